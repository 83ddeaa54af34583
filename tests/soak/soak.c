/*
 * Soak: random validated point-to-point traffic for a long time, watching
 * for corruption and for growth of resident memory, file descriptors and
 * gpuwire's counters.
 *
 *   soak [--messages N] [--max-size BYTES] [--seed S] [--per-round M]
 *        [--device] [--rss-growth PERCENT] [--rss-slack-kib KIB]
 *        [--inject-corruption K] [--large-share F --small-size BYTES]
 *
 * N messages in the whole job (default 20000), sizes from 0 to BYTES
 * (default 1 MiB; K, M, G suffixes), log-uniform (with --large-share F, only
 * a share F of the messages goes up to BYTES, the others up to --small-size:
 * many small messages and a tail of large ones); every send mode
 * (buffered on host memory only), blocking and not, wildcard receives,
 * derived datatypes on host memory, five communicators besides
 * MPI_COMM_WORLD; --device adds cudaMalloc and managed buffers on both
 * sides (exit 77 where there is no GPU). soak_plan.h describes the schedule.
 *
 * Every payload is a pattern of (sender, sequence number, size), checked on
 * arrival with source, tag, count and the guard bytes around the receive;
 * on host buffers by the CPU, on device and managed buffers by kernels
 * (soak_gpu.cu), so that only a few bytes per message cross PCIe for the
 * check.
 * Resident memory, descriptors and counters are sampled after the first
 * tenth of the messages and at the end; the test fails on any corrupted
 * message, on RSS growth beyond PERCENT (default 5) of the resident memory
 * that is not the soak's own host buffers, plus KIB (default 4096),
 * on more than 16 new file descriptors, and on messages gpuwire dropped.
 * --inject-corruption K changes one byte of every K-th message after its
 * pattern is written (on the GPU for device and managed send buffers): the
 * run must then report corrupted messages, counted by the kind of the
 * receive buffer whose check caught them (the checkers' own test).
 *
 * The files: soak.h says what each of the soak's files holds.
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "soak.h"
#include "soak_gpu.h"
#include "soak_mem.h"
#include "soak_pattern.h"
#include "soak_plan.h"
#include "soak_sample.h"

#define FD_SLACK 16

soak_config_t cfg;
MPI_Comm comms[SC_NCOMMS];
int *to_comm[SC_NCOMMS], *to_world[SC_NCOMMS];
arena_t send_arena[SK_NKINDS], recv_arena[SK_NKINDS];
unsigned char *staging, *bsend_buf;
MPI_Status *statuses;
size_t staging_cap, bsend_cap;
long corrupted, errors, reports;
long unplanned; /* corruptions that --inject-corruption did not make */
long failed_in[SK_NKINDS]; /* failed checks of received data, by receive buffer kind */
unsigned long long injected;
pending_check_t *pending;
soak_gpu_result_t *gpu_results;
int npending;
unsigned long long sent_msgs, sent_bytes;

/* ---- arguments ----------------------------------------------------------- */

static size_t parse_size(const char *s)
{
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    switch (*end) {
    case 'G': case 'g': v <<= 10; /* fall through */
    case 'M': case 'm': v <<= 10; /* fall through */
    case 'K': case 'k': v <<= 10; end++; break;
    default: break;
    }
    if (*end == 'i') end++;
    if (*end != '\0') {
        fprintf(stderr, "soak: not a size: %s\n", s);
        exit(2);
    }
    return (size_t)v;
}

static double rss_growth_pct = 5.0;
uint64_t inject_every; /* --inject-corruption K: one wrong byte in every K-th message */
static long rss_slack_kib = 4096;
/* Mappings a run may add after the first tenth beyond 5 %: buffers first
 * sent late (a kind or size first drawn then). */
#define IPC_MAP_SLACK 4
static long own_host_kib; /* host memory the soak itself allocated and touched */

static void parse_args(int argc, char **argv)
{
    cfg.seed = 1;
    cfg.messages = 20000;
    cfg.max_size = 1 << 20;
    cfg.per_round = 32;
    cfg.large_share = 1.0;
    cfg.small_size = 64 << 10;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--device")) {
            cfg.device = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "soak: %s needs a value (see the header of soak.c)\n", a);
            exit(2);
        }
        ++i;
        if (!strcmp(a, "--messages")) cfg.messages = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--max-size")) cfg.max_size = parse_size(v);
        else if (!strcmp(a, "--seed")) cfg.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--per-round")) cfg.per_round = atoi(v);
        else if (!strcmp(a, "--rss-growth")) rss_growth_pct = atof(v);
        else if (!strcmp(a, "--rss-slack-kib")) rss_slack_kib = atol(v);
        else if (!strcmp(a, "--inject-corruption")) inject_every = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--large-share")) cfg.large_share = atof(v);
        else if (!strcmp(a, "--small-size")) cfg.small_size = parse_size(v);
        else {
            fprintf(stderr, "soak: unknown option %s (see the header of soak.c)\n", a);
            exit(2);
        }
    }
    if (cfg.per_round < 1 || cfg.max_size > (size_t)INT_MAX || !(cfg.large_share >= 0.0)) {
        fprintf(stderr, "soak: --per-round must be >= 1, --max-size < 2 GiB and --large-share "
                        ">= 0\n");
        exit(2);
    }
}

/* ---- samples and verdict -------------------------------------------------------- */

static void report_samples(const soak_pvars_t *pv, const soak_sample_t *a, const soak_sample_t *b)
{
    /* The percentage applies to what the libraries hold, not to the soak's
     * own buffers, which are allocated and touched before the first sample. */
    long base = a->rss_kib - own_host_kib > 0 ? a->rss_kib - own_host_kib : a->rss_kib;
    /* gpuwire's pinned memory (bounce buffers, staging chunks) fills as
     * larger messages come, up to bounds of its own
     * (pml_gpuwire_pinned_bounce_bytes, pml_gpuwire_staging_bytes): its
     * growth is reported on its own and not counted as a leak. */
    static const char *const pinned[2][2] = {
        {"pml_gpuwire_pinned_bounce_held_bytes", "pinned bounce cache"},
        {"pml_gpuwire_pinned_staging_held_bytes", "pinned staging chunks"}};
    long cache_kib = 0;
    for (int k = 0; k < 2; ++k) {
        int held = soak_pvar_find(pv, pinned[k][0]);
        if (held < 0 || b->value[held] <= a->value[held]) continue;
        long kib = (long)((b->value[held] - a->value[held]) / 1024);
        cache_kib += kib;
        printf("rank %d: gpuwire's %s grew by %ld KiB (from %llu to %llu bytes, bounded by a "
               "parameter): not counted as growth\n",
               mt_rank, pinned[k][1], kib, a->value[held], b->value[held]);
    }
    long limit = a->rss_kib + (long)((double)base * rss_growth_pct / 100.0) + rss_slack_kib +
                 cache_kib;
    long fig[5] = {a->rss_kib, b->rss_kib, a->fds, b->fds, base};
    long *all = malloc(sizeof(fig) * mt_size);
    MPI_Gather(fig, 5, MPI_LONG, all, 5, MPI_LONG, 0, MPI_COMM_WORLD);
    if (mt_rank == 0) {
        for (int r = 0; r < mt_size; ++r) {
            long *f = all + 5 * r;
            printf("rank %d: VmRSS %ld KiB after the first tenth, %ld KiB at the end: %+ld KiB, "
                   "%+.2f %% of the %ld KiB not the soak's own buffers; open files %ld -> %ld\n",
                   r, f[0], f[1], f[1] - f[0],
                   f[4] > 0 ? 100.0 * (double)(f[1] - f[0]) / (double)f[4] : 0.0, f[4], f[2], f[3]);
        }
        printf("rank 0: peak VmRSS (VmHWM) %ld KiB\n", b->hwm_kib);
        for (int i = 0; i < pv->n; ++i)
            printf("rank 0: %-32s %llu after the first tenth, %llu at the end\n", pv->name[i],
                   a->value[i], b->value[i]);
        fflush(stdout);
    }
    free(all);
    if (a->rss_kib > 0 && b->rss_kib > limit)
        mt_fail(__FILE__, __LINE__, "VmRSS grew from %ld to %ld KiB, above the limit %ld KiB "
                "(+%.1f %% of %ld KiB + %ld KiB + %ld KiB of pinned bounce cache)", a->rss_kib,
                b->rss_kib, limit, rss_growth_pct, base, rss_slack_kib, cache_kib);
    if (a->fds >= 0 && b->fds > a->fds + FD_SLACK)
        mt_fail(__FILE__, __LINE__, "open file descriptors grew from %d to %d", a->fds, b->fds);
    /* The soak's buffers live from the start to the end: once each has been
     * sent, the peer's mappings of them stay; a mapping opened per message
     * would show here. */
    int maps = soak_pvar_find(pv, "pml_gpuwire_ipc_mappings_open");
    if (maps >= 0 && b->value[maps] > a->value[maps] + a->value[maps] / 20 + IPC_MAP_SLACK)
        mt_fail(__FILE__, __LINE__, "CUDA IPC mappings grew from %llu to %llu",
                a->value[maps], b->value[maps]);
    int dropped = soak_pvar_find(pv, "pml_gpuwire_dropped_messages");
    if (dropped >= 0 && b->value[dropped] != 0)
        mt_fail(__FILE__, __LINE__, "gpuwire dropped %llu messages", b->value[dropped]);
}

int main(int argc, char **argv)
{
    int provided = 0;
    parse_args(argc, argv);
    if (MPI_T_init_thread(MPI_THREAD_SINGLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "soak: MPI_T_init_thread failed\n");
        return 1;
    }
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    cfg.nranks = mt_size;
    if (cfg.device) {
        MPI_Comm local;
        int lrank = 0;
        char why[160] = "";
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
        MPI_Comm_rank(local, &lrank);
        MPI_Comm_free(&local);
        int skip = soak_mem_init_device(lrank, why, sizeof(why)), any = 0;
        MPI_Allreduce(&skip, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        if (any) {
            MPI_T_finalize();
            return mt_skip(skip ? why : "no GPU (CUDA driver or device absent) on another rank");
        }
    }
    make_comms();
    needs_t need = prescan();
    arenas_alloc(&need, false);
    staging_cap = need.msg + GUARD;
    staging = soak_alloc(SK_HOST, staging_cap);
    bsend_cap = need.bsend + MPI_BSEND_OVERHEAD + 4096;
    bsend_buf = soak_alloc(SK_HOST, bsend_cap);
    MT_CHECK_MPI(MPI_Buffer_attach(bsend_buf, (int)bsend_cap));
    own_host_kib =
        (long)((need.send[SK_HOST] + need.recv[SK_HOST] + staging_cap + bsend_cap) / 1024);

    int cap = soak_plan_capacity(&cfg);
    soak_plan_t plan = {malloc(sizeof(soak_msg_t) * cap), 0, calloc((size_t)mt_size, sizeof(uint64_t)), 0};
    send_op_t *sends = malloc(sizeof(send_op_t) * cap);
    recv_op_t *recvs = malloc(sizeof(recv_op_t) * cap);
    MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * cap);
    statuses = malloc(sizeof(MPI_Status) * 2 * cap);
    int *recv_of = malloc(sizeof(int) * cap);
    unsigned char *seen = malloc((size_t)cap);
    if (cfg.device) {
        soak_gpu_init(cap);
        pending = malloc(sizeof(pending_check_t) * cap);
        gpu_results = malloc(sizeof(soak_gpu_result_t) * cap);
    }

    soak_pvars_t pv;
    soak_pvars_open(&pv);
    soak_sample_t first, last;
    int sampled = 0;
    uint64_t rounds = 0;
    double t0 = MPI_Wtime();
    for (uint64_t r = 0; soak_plan_round(&cfg, r, &plan); ++r, ++rounds) {
        if (cfg.device && r > 0 && r % 16 == 0) {
            /* New device allocations, often at the same addresses: mappings
             * and memory kinds cached for the old ones must not be used. */
            arenas_free(true);
            arenas_alloc(&need, true);
        }
        run_round(&plan, r, sends, recvs, reqs, recv_of, seen);
        if (!sampled && plan.planned * 10 >= cfg.messages) {
            soak_take_sample(&pv, &first);
            sampled = 1;
        }
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double secs = MPI_Wtime() - t0;
    soak_take_sample(&pv, &last);
    if (!sampled) first = last;

    /* Every corruption that is not a planned report_bad() is unplanned. */
    long tot[3 + SK_NKINDS] = {corrupted, errors}, sum[3 + SK_NKINDS] = {0};
    for (int k = 0; k < SK_NKINDS; ++k) tot[2 + k] = failed_in[k];
    long by_report_bad = 0;
    for (int k = 0; k < SK_NKINDS; ++k) by_report_bad += failed_in[k];
    tot[2 + SK_NKINDS] = unplanned + (corrupted - by_report_bad);
    MPI_Allreduce(tot, sum, 3 + SK_NKINDS, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    unsigned long long mine[3] = {sent_msgs, sent_bytes, injected}, all[3] = {0, 0, 0};
    MPI_Allreduce(mine, all, 3, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (mt_rank == 0) {
        printf("soak: %llu messages, %.1f MB in %.1f s (%llu rounds, %d ranks, sizes 0-%zu B, "
               "seed %llu, %s buffers): %ld corrupted, %ld failed calls\n",
               all[0], (double)all[1] / 1e6, secs, (unsigned long long)rounds, mt_size,
               cfg.max_size, (unsigned long long)cfg.seed,
               cfg.device ? "host, device and managed" : "host", sum[0], sum[1]);
        if (sum[0] || inject_every) {
            /* --inject-corruption: every changed message must be found, and nothing else. */
            char verdict[48] = "all of them";
            if ((unsigned long long)sum[0] != all[2])
                snprintf(verdict, sizeof(verdict), "expected %llu", all[2]);
            printf("soak: %llu messages changed on purpose, %ld found corrupted (%s), failed checks "
                   "by receive buffer: host %ld, device %ld, managed %ld\n",
                   all[2], sum[0], verdict, sum[2 + SK_HOST], sum[2 + SK_DEVICE],
                   sum[2 + SK_MANAGED]);
        }
        fflush(stdout);
    }
    if (!inject_every && corrupted) mt_fail(__FILE__, __LINE__, "%ld corrupted messages", corrupted);
    if (inject_every && mt_rank == 0) {
        /* The checkers' own test passes on the figures, not on a message. */
        if (all[2] == 0) mt_fail(__FILE__, __LINE__, "no message was changed on purpose");
        if ((unsigned long long)sum[0] != all[2])
            mt_fail(__FILE__, __LINE__, "%ld messages found corrupted, %llu changed on purpose",
                    sum[0], all[2]);
        if (sum[2 + SK_NKINDS])
            mt_fail(__FILE__, __LINE__, "%ld corruptions not made on purpose", sum[2 + SK_NKINDS]);
        for (int k = 0; cfg.device && k < SK_NKINDS; ++k)
            if (sum[2 + k] == 0)
                mt_fail(__FILE__, __LINE__, "no failed check of a %s receive buffer",
                        soak_kind_name(k));
    }
    if (errors) mt_fail(__FILE__, __LINE__, "%ld MPI calls failed", errors);
    if (all[0] != cfg.messages)
        mt_fail(__FILE__, __LINE__, "%llu messages sent, %llu planned", all[0],
                (unsigned long long)cfg.messages);
    report_samples(&pv, &first, &last);

    void *b;
    int sz;
    MT_CHECK_MPI(MPI_Buffer_detach(&b, &sz));
    soak_pvars_close(&pv);
    free_comms();
    arenas_free(false);
    soak_free(SK_HOST, staging);
    free(statuses);
    soak_free(SK_HOST, bsend_buf);
    free(plan.msgs);
    free(plan.next_seq);
    free(sends);
    free(recvs);
    free(reqs);
    free(recv_of);
    free(seen);
    free(pending);
    free(gpu_results);
    if (cfg.device) soak_gpu_fini();
    MPI_T_finalize();
    return mt_finish();
}
