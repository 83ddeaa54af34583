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
 */
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "soak_gpu.h"
#include "soak_mem.h"
#include "soak_pattern.h"
#include "soak_plan.h"
#include "soak_sample.h"

#define GUARD 64
#define GUARD_BYTE 0xA5
#define ALIGN 256
#define FD_SLACK 16
#define MAX_REPORTS 10

typedef struct {
    const soak_msg_t *m; /* the message meant for it; a wildcard may take another */
    int kind;
    unsigned char *buf;
    size_t cap;          /* bytes the buffer spans (guard excluded) */
    MPI_Datatype type;
    int count;
    MPI_Request req;
    MPI_Status st;
} recv_op_t;

typedef struct {
    const soak_msg_t *m;
    unsigned char *buf;
    MPI_Datatype type;
    int count;
    MPI_Request req;
} send_op_t;

typedef struct {
    unsigned char *base;
    size_t cap, used;
} arena_t;

static soak_config_t cfg;
static MPI_Comm comms[SC_NCOMMS];
static int *to_comm[SC_NCOMMS], *to_world[SC_NCOMMS];
static arena_t send_arena[SK_NKINDS], recv_arena[SK_NKINDS];
static unsigned char *staging, *bsend_buf;
static MPI_Status *statuses;
static size_t staging_cap, bsend_cap;
static long corrupted, errors, reports;
static long unplanned; /* corruptions that --inject-corruption did not make */
static long failed_in[SK_NKINDS]; /* failed checks of received data, by receive buffer kind */
static unsigned long long injected;

/* A receive into device or managed memory whose check runs on the GPU; the
 * verdict comes with the others of the round (finish_device_checks). */
typedef struct {
    const recv_op_t *r;
    const soak_msg_t *m;
    int slot, count, want;
} pending_check_t;
static pending_check_t *pending;
static soak_gpu_result_t *gpu_results;
static int npending;
static unsigned long long sent_msgs, sent_bytes;

#define REPORT(...)                                                                        \
    do {                                                                                   \
        if (reports++ < MAX_REPORTS) {                                                     \
            fprintf(stderr, "[rank %d] ", mt_rank);                                        \
            fprintf(stderr, __VA_ARGS__);                                                  \
            fputc('\n', stderr);                                                           \
        }                                                                                  \
    } while (0)

static void mpi_ok(int rc, const char *what, const soak_msg_t *m)
{
    if (rc == MPI_SUCCESS) return;
    char s[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(rc, s, &len);
    errors++;
    if (m)
        REPORT("%s failed on message %d (%d->%d, %zu B): %s", what, m->id, m->src, m->dst,
               m->size, s);
    else
        REPORT("%s failed: %s", what, s);
}

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
static uint64_t inject_every; /* --inject-corruption K: one wrong byte in every K-th message */
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

/* ---- communicators ---------------------------------------------------------- */

static void make_comms(void)
{
    comms[SC_WORLD] = MPI_COMM_WORLD;
    MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[SC_DUP]));
    MT_CHECK_MPI(MPI_Comm_split(MPI_COMM_WORLD, 0, mt_size - 1 - mt_rank, &comms[SC_SPLIT]));
    for (int c = SC_ANYANY; c < SC_NCOMMS; ++c) MT_CHECK_MPI(MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]));
    MPI_Group world;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int *ranks = malloc(sizeof(int) * mt_size);
    for (int i = 0; i < mt_size; ++i) ranks[i] = i;
    for (int c = 0; c < SC_NCOMMS; ++c) {
        MPI_Group g;
        MPI_Comm_group(comms[c], &g);
        to_comm[c] = malloc(sizeof(int) * mt_size);
        to_world[c] = malloc(sizeof(int) * mt_size);
        MPI_Group_translate_ranks(world, mt_size, ranks, g, to_comm[c]);
        MPI_Group_translate_ranks(g, mt_size, ranks, world, to_world[c]);
        MPI_Group_free(&g);
        if (c != SC_WORLD) MPI_Comm_set_errhandler(comms[c], MPI_ERRORS_RETURN);
    }
    MPI_Group_free(&world);
    free(ranks);
}

static void free_comms(void)
{
    for (int c = 0; c < SC_NCOMMS; ++c) {
        if (c != SC_WORLD) MT_CHECK_MPI(MPI_Comm_free(&comms[c]));
        free(to_comm[c]);
        free(to_world[c]);
    }
}

/* ---- buffers ----------------------------------------------------------------- */

static size_t align_up(size_t n) { return (n + ALIGN - 1) / ALIGN * ALIGN; }

static size_t send_bytes(const soak_msg_t *m)
{
    soak_layout_t l;
    soak_layout(m, false, &l);
    return soak_span(&l);
}

/* What a receive for m spans: its layout, or for a wildcard receive the
 * largest message it might take, given the round's messages. */
static size_t recv_bytes(const soak_plan_t *p, const soak_msg_t *m)
{
    if (m->comm == SC_ANYANY || m->comm == SC_ANYTAG) {
        size_t cap = 0;
        for (int i = 0; i < p->n; ++i) {
            const soak_msg_t *o = &p->msgs[i];
            if (o->dst == m->dst && o->comm == m->comm &&
                (m->comm == SC_ANYANY || o->src == m->src) && o->size > cap)
                cap = o->size;
        }
        return cap;
    }
    if (m->dtype == SD_BYTES) return m->size + m->recv_extra;
    soak_layout_t l;
    soak_layout(m, true, &l);
    return soak_span(&l);
}

typedef struct {
    size_t send[SK_NKINDS], recv[SK_NKINDS], bsend, msg;
} needs_t;

/* Runs the whole plan once to find what one round needs at most. */
static needs_t prescan(void)
{
    needs_t need = {{0}, {0}, 0, 0};
    soak_plan_t p = {malloc(sizeof(soak_msg_t) * soak_plan_capacity(&cfg)), 0,
                     calloc((size_t)mt_size, sizeof(uint64_t)), 0};
    for (uint64_t r = 0; soak_plan_round(&cfg, r, &p); ++r) {
        needs_t n = {{0}, {0}, 0, 0};
        for (int i = 0; i < p.n; ++i) {
            const soak_msg_t *m = &p.msgs[i];
            if (m->src == mt_rank) {
                size_t b = send_bytes(m);
                n.send[m->send_kind] += align_up(b);
                if (m->mode == SM_BUFFERED) n.bsend += m->size + 2 * MPI_BSEND_OVERHEAD + 64;
                if (b > n.msg) n.msg = b;
            }
            if (m->dst == mt_rank) {
                size_t b = recv_bytes(&p, m);
                n.recv[m->recv_kind] += align_up(b + GUARD);
                if (b + GUARD > n.msg) n.msg = b + GUARD;
            }
        }
        for (int k = 0; k < SK_NKINDS; ++k) {
            if (n.send[k] > need.send[k]) need.send[k] = n.send[k];
            if (n.recv[k] > need.recv[k]) need.recv[k] = n.recv[k];
        }
        if (n.bsend > need.bsend) need.bsend = n.bsend;
        if (n.msg > need.msg) need.msg = n.msg;
    }
    free(p.msgs);
    free(p.next_seq);
    return need;
}

static void arenas_alloc(const needs_t *need, bool device_only)
{
    for (int k = 0; k < SK_NKINDS; ++k) {
        if (device_only && k == SK_HOST) continue;
        if (!cfg.device && k != SK_HOST) continue;
        send_arena[k].cap = need->send[k];
        recv_arena[k].cap = need->recv[k];
        send_arena[k].base = soak_alloc(k, need->send[k]);
        recv_arena[k].base = soak_alloc(k, need->recv[k]);
    }
}

static void arenas_free(bool device_only)
{
    for (int k = 0; k < SK_NKINDS; ++k) {
        if (device_only && k == SK_HOST) continue;
        if (send_arena[k].base) soak_free(k, send_arena[k].base);
        if (recv_arena[k].base) soak_free(k, recv_arena[k].base);
        send_arena[k].base = recv_arena[k].base = NULL;
    }
}

static unsigned char *carve(arena_t *a, size_t n)
{
    unsigned char *p = a->base + a->used;
    a->used += align_up(n);
    if (a->used > a->cap) {
        fprintf(stderr, "soak: arena overflow (%zu > %zu): prescan and round disagree\n", a->used,
                a->cap);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    return p;
}

/* ---- payloads ------------------------------------------------------------------ */

static void scatter(unsigned char *dst, const unsigned char *packed, const soak_layout_t *l)
{
    for (int r = 0; r < l->count; ++r)
        for (int b = 0; b < l->nblocks; ++b) {
            memcpy(dst + (size_t)r * l->extent + l->off[b], packed, l->len[b]);
            packed += l->len[b];
        }
}

static void gather(unsigned char *packed, const unsigned char *src, const soak_layout_t *l)
{
    for (int r = 0; r < l->count; ++r)
        for (int b = 0; b < l->nblocks; ++b) {
            memcpy(packed, src + (size_t)r * l->extent + l->off[b], l->len[b]);
            packed += l->len[b];
        }
}

/* First byte of [0, span) outside the layout's blocks that is not the guard
 * byte, or -1: a receive must not write between the blocks of its type. The
 * blocks of a repetition lie inside its extent (soak_plan.c builds them so),
 * so the gaps of one repetition, found once, are those of every one and only
 * their bytes are read. */
#define MAX_GAP_EXTENT 4096 /* the largest extent soak_plan.c builds is 1432 B */
static long check_gaps(const unsigned char *buf, const soak_layout_t *l)
{
    size_t span = soak_span(l), ext = l->extent;
    if (span == 0) return -1;
    if (l->nblocks == 1 && l->off[0] == 0 && l->len[0] >= ext) return -1; /* contiguous */
    unsigned char mark[MAX_GAP_EXTENT];
    if (ext > MAX_GAP_EXTENT) {
        fprintf(stderr, "soak: a datatype extent of %zu B (at most %d expected)\n", ext,
                MAX_GAP_EXTENT);
        MPI_Abort(MPI_COMM_WORLD, 1);
        return 0;
    }
    memset(mark, 0, ext);
    for (int b = 0; b < l->nblocks; ++b) {
        if (l->off[b] + l->len[b] > ext) {
            fprintf(stderr, "soak: a block at %zu + %zu B beyond the extent %zu B\n", l->off[b],
                    l->len[b], ext);
            MPI_Abort(MPI_COMM_WORLD, 1);
            return 0;
        }
        memset(mark + l->off[b], 1, l->len[b]);
    }
    size_t gap_at[SOAK_MAX_BLOCKS + 1], gap_len[SOAK_MAX_BLOCKS + 1];
    int ngaps = 0;
    for (size_t i = 0; i < ext;) {
        if (mark[i]) {
            ++i;
            continue;
        }
        size_t j = i;
        while (j < ext && !mark[j]) ++j;
        gap_at[ngaps] = i;
        gap_len[ngaps++] = j - i;
        i = j;
    }
    for (int r = 0; r < l->count; ++r) {
        size_t base = (size_t)r * ext;
        for (int g = 0; g < ngaps; ++g)
            for (size_t i = base + gap_at[g]; i < base + gap_at[g] + gap_len[g] && i < span; ++i)
                if (buf[i] != GUARD_BYTE) return (long)i;
    }
    return -1;
}

static void prepare_send(send_op_t *s, const soak_msg_t *m)
{
    s->m = m;
    soak_layout_t l;
    soak_layout(m, false, &l);
    s->buf = carve(&send_arena[m->send_kind], soak_span(&l));
    uint64_t key = soak_key(m->src, m->seq, m->size);
    /* The checkers' own test: this byte must be caught. */
    bool inject = inject_every && m->size && m->seq % inject_every == inject_every - 1;
    injected += inject;
    if (m->send_kind != SK_HOST) {
        if (m->dtype != SD_BYTES) {
            fprintf(stderr, "soak: message %d: a derived datatype on device memory\n", m->id);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        /* Written by a kernel; soak_gpu_sync() before the sends start. */
        soak_gpu_fill(s->buf, m->size, key);
        if (inject) soak_gpu_flip(s->buf, m->seq % m->size, 0x10);
    } else {
        unsigned char *p = m->dtype == SD_BYTES ? s->buf : staging;
        soak_fill(p, m->size, key);
        if (inject) p[m->seq % m->size] ^= 0x10;
        if (m->dtype != SD_BYTES) scatter(s->buf, staging, &l);
    }
    mpi_ok(soak_make_type(m, false, &s->type, &s->count), "datatype", m);
    s->req = MPI_REQUEST_NULL;
}

static void prepare_recv(recv_op_t *r, const soak_plan_t *p, const soak_msg_t *m)
{
    r->m = m;
    r->kind = m->recv_kind;
    r->cap = recv_bytes(p, m);
    r->buf = carve(&recv_arena[r->kind], r->cap + GUARD);
    soak_set(r->kind, r->buf, GUARD_BYTE, r->cap + GUARD);
    if (soak_is_wildcard(m->comm) || m->dtype == SD_BYTES) {
        r->type = MPI_BYTE;
        r->count = (int)r->cap;
    } else {
        mpi_ok(soak_make_type(m, true, &r->type, &r->count), "datatype", m);
    }
    r->req = MPI_REQUEST_NULL;
}

static void free_type(MPI_Datatype *t)
{
    if (*t != MPI_BYTE && *t != MPI_INT && *t != MPI_DOUBLE) MPI_Type_free(t);
}

static void report_bad(const recv_op_t *r, const soak_msg_t *m, int comm, const char *what,
                       long bad, unsigned long long wrong, int count, int want)
{
    corrupted++;
    failed_in[r->kind]++;
    /* --inject-corruption: the payload of every K-th message of a sender was
     * changed on purpose; anything else wrong is a real corruption. */
    if (!(inject_every && m->size && m->seq % inject_every == inject_every - 1 &&
          0 == strcmp(what, "payload")))
        unplanned++;
    char nwrong[48] = "";
    if (wrong)
        snprintf(nwrong, sizeof(nwrong), "%llu byte%s wrong, ", wrong, wrong == 1 ? "" : "s");
    REPORT("message %d (%d->%d, seq %llu, %zu B, %s, %s, %s -> %s, %s): %s wrong at byte %ld "
           "(%scount %d, expected %d)",
           m->id, m->src, m->dst, (unsigned long long)m->seq, m->size, soak_mode_name(m->mode),
           soak_dtype_name(m->dtype), soak_kind_name(m->send_kind), soak_kind_name(r->kind),
           soak_comm_name(comm), what, bad, nwrong, count, want);
}

/* Checks one completed receive; returns the id of the message it got, or -1.
 * The payload of a device or managed receive is checked on the GPU: queued
 * here, judged in finish_device_checks(). */
static int validate(const recv_op_t *r, const soak_plan_t *p)
{
    const MPI_Status *st = &r->st;
    const soak_msg_t *m = r->m;
    int comm = m->comm;
    if (soak_is_wildcard(comm)) {
        if (st->MPI_TAG < 0 || st->MPI_TAG >= p->n) {
            corrupted++;
            REPORT("%s receive got tag %d, which no message of the round has",
                   soak_comm_name(comm), st->MPI_TAG);
            return -1;
        }
        m = &p->msgs[st->MPI_TAG];
    }
    int src = st->MPI_SOURCE >= 0 && st->MPI_SOURCE < mt_size ? to_world[comm][st->MPI_SOURCE] : -1;
    if (st->MPI_TAG != m->id || src != m->src || m->dst != mt_rank || m->comm != comm) {
        corrupted++;
        REPORT("message %d (%d->%d on %s) arrived as tag %d from %d on %s", m->id, m->src, m->dst,
               soak_comm_name(m->comm), st->MPI_TAG, src, soak_comm_name(comm));
        return -1;
    }
    int count = -1, want = (int)m->size;
    if (!soak_is_wildcard(comm) && m->dtype != SD_BYTES) {
        MPI_Datatype t;
        mpi_ok(soak_make_type(m, true, &t, &want), "datatype", m);
        free_type(&t);
    }
    MPI_Get_count(st, r->type, &count);
    uint64_t key = soak_key(m->src, m->seq, m->size);
    long bad = -1;
    unsigned long long wrong = 0;
    const char *what = "payload";
    if (count != want) {
        bad = 0;
        what = "count";
    } else if (r->type == MPI_BYTE || r->type == MPI_INT || r->type == MPI_DOUBLE) {
        size_t tail = r->cap + GUARD - m->size < GUARD ? r->cap + GUARD - m->size : GUARD;
        if (r->kind != SK_HOST) {
            pending_check_t *c = &pending[npending++];
            c->r = r;
            c->m = m;
            c->count = count;
            c->want = want;
            c->slot = soak_gpu_check(r->buf, m->size, tail, GUARD_BYTE, key);
            return m->id;
        }
        const unsigned char *h = r->buf;
        bad = soak_check(h, m->size, key);
        if (bad >= 0) wrong = soak_count_wrong(h, m->size, key);
        for (size_t i = 0; i < tail; ++i)
            if (h[m->size + i] != GUARD_BYTE) {
                if (bad < 0) {
                    bad = (long)(m->size + i);
                    what = "guard after the payload";
                }
                wrong++;
            }
    } else {
        soak_layout_t l;
        soak_layout(m, true, &l);
        gather(staging, r->buf, &l);
        bad = soak_check(staging, m->size, key);
        if (bad >= 0) wrong = soak_count_wrong(staging, m->size, key);
        if (bad < 0) {
            bad = check_gaps(r->buf, &l);
            what = "gap of the datatype";
        }
        if (bad < 0) {
            size_t span = soak_span(&l);
            for (size_t i = 0; i < GUARD; ++i)
                if (r->buf[span + i] != GUARD_BYTE) {
                    bad = (long)(span + i);
                    what = "guard after the buffer";
                    break;
                }
        }
    }
    if (bad >= 0) report_bad(r, m, comm, what, bad, wrong, count, want);
    return m->id;
}

/* The verdicts of the round's checks on the GPU, fetched in one copy. */
static void finish_device_checks(void)
{
    if (!npending) return;
    int n = soak_gpu_results(gpu_results);
    for (int i = 0; i < npending; ++i) {
        const pending_check_t *c = &pending[i];
        const soak_gpu_result_t *g = c->slot < n ? &gpu_results[c->slot] : NULL;
        if (!g || !g->wrong) continue;
        int comm = c->r->m->comm;
        const char *what = g->first < c->m->size ? "payload" : "guard after the payload";
        report_bad(c->r, c->m, comm, what, (long)g->first, g->wrong, c->count, c->want);
    }
    npending = 0;
}

/* ---- one round ------------------------------------------------------------------ */

static void post_recv(recv_op_t *r)
{
    const soak_msg_t *m = r->m;
    int src = to_comm[m->comm][m->src], tag = m->id;
    if (m->comm == SC_ANYANY) src = MPI_ANY_SOURCE, tag = MPI_ANY_TAG;
    if (m->comm == SC_ANYSRC) src = MPI_ANY_SOURCE;
    if (m->comm == SC_ANYTAG) tag = MPI_ANY_TAG;
    if (m->recv == SR_EARLY || m->recv == SR_LATE) {
        mpi_ok(MPI_Irecv(r->buf, r->count, r->type, src, tag, comms[m->comm], &r->req), "MPI_Irecv", m);
    } else if (m->recv == SR_BLOCKING) {
        mpi_ok(MPI_Recv(r->buf, r->count, r->type, src, tag, comms[m->comm], &r->st), "MPI_Recv", m);
    } else {
        MPI_Message msg;
        MPI_Status pst;
        mpi_ok(MPI_Mprobe(src, tag, comms[m->comm], &msg, &pst), "MPI_Mprobe", m);
        mpi_ok(MPI_Mrecv(r->buf, r->count, r->type, &msg, &r->st), "MPI_Mrecv", m);
        if (pst.MPI_SOURCE != r->st.MPI_SOURCE || pst.MPI_TAG != r->st.MPI_TAG) {
            corrupted++;
            REPORT("MPI_Mprobe reported source %d tag %d, MPI_Mrecv source %d tag %d",
                   pst.MPI_SOURCE, pst.MPI_TAG, r->st.MPI_SOURCE, r->st.MPI_TAG);
        }
    }
}

static void start_send(send_op_t *s)
{
    const soak_msg_t *m = s->m;
    int dst = to_comm[m->comm][m->dst];
    MPI_Comm c = comms[m->comm];
    int rc;
    if (m->send_blocking) {
        switch (m->mode) {
        case SM_SYNC: rc = MPI_Ssend(s->buf, s->count, s->type, dst, m->id, c); break;
        case SM_BUFFERED: rc = MPI_Bsend(s->buf, s->count, s->type, dst, m->id, c); break;
        case SM_READY: rc = MPI_Rsend(s->buf, s->count, s->type, dst, m->id, c); break;
        default: rc = MPI_Send(s->buf, s->count, s->type, dst, m->id, c); break;
        }
    } else {
        switch (m->mode) {
        case SM_SYNC: rc = MPI_Issend(s->buf, s->count, s->type, dst, m->id, c, &s->req); break;
        case SM_BUFFERED: rc = MPI_Ibsend(s->buf, s->count, s->type, dst, m->id, c, &s->req); break;
        case SM_READY: rc = MPI_Irsend(s->buf, s->count, s->type, dst, m->id, c, &s->req); break;
        default: rc = MPI_Isend(s->buf, s->count, s->type, dst, m->id, c, &s->req); break;
        }
    }
    mpi_ok(rc, "send", m);
    sent_msgs++;
    sent_bytes += m->size;
}

static void run_round(const soak_plan_t *p, uint64_t round, send_op_t *sends, recv_op_t *recvs,
                      MPI_Request *reqs, int *recv_of, unsigned char *seen)
{
    int ns = 0, nr = 0, nbsend = 0;
    for (int k = 0; k < SK_NKINDS; ++k) send_arena[k].used = recv_arena[k].used = 0;
    for (int i = 0; i < p->n; ++i) {
        const soak_msg_t *m = &p->msgs[i];
        recv_of[i] = -1;
        seen[i] = 0;
        if (m->src == mt_rank) {
            prepare_send(&sends[ns++], m);
            if (m->mode == SM_BUFFERED) nbsend++;
        }
        if (m->dst == mt_rank) {
            recv_of[i] = nr;
            prepare_recv(&recvs[nr++], p, m);
        }
    }
    /* Device and managed payloads and guards are written by then. */
    if (cfg.device) soak_gpu_sync();
    /* A: early receives, then the handshake that ready sends rely on. */
    for (int i = 0; i < nr; ++i)
        if (recvs[i].m->recv == SR_EARLY) post_recv(&recvs[i]);
    mpi_ok(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier", NULL);
    /* B: non-blocking sends. */
    for (int i = 0; i < ns; ++i)
        if (!sends[i].m->send_blocking) start_send(&sends[i]);
    /* C: blocking operations in message order on every rank. */
    int si = 0;
    for (int i = 0; i < p->n; ++i) {
        const soak_msg_t *m = &p->msgs[i];
        if (m->src == mt_rank) {
            if (m->send_blocking) start_send(&sends[si]);
            si++;
        }
        if (m->dst == mt_rank && (m->recv == SR_BLOCKING || m->recv == SR_PROBE))
            post_recv(&recvs[recv_of[i]]);
    }
    /* D: late receives, then wait for everything. */
    for (int i = 0; i < nr; ++i)
        if (recvs[i].m->recv == SR_LATE) post_recv(&recvs[i]);
    int n = 0;
    for (int i = 0; i < nr; ++i) reqs[n++] = recvs[i].req;
    for (int i = 0; i < ns; ++i) reqs[n++] = sends[i].req;
    MPI_Status *sts = statuses;
    if (round % 2 == 0) {
        mpi_ok(MPI_Waitall(n, reqs, sts), "MPI_Waitall", NULL);
    } else {
        for (int left = n; left > 0; --left) {
            int idx = MPI_UNDEFINED;
            MPI_Status st;
            mpi_ok(MPI_Waitany(n, reqs, &idx, &st), "MPI_Waitany", NULL);
            if (idx == MPI_UNDEFINED) break;
            sts[idx] = st;
        }
    }
    for (int i = 0; i < nr; ++i)
        if (recvs[i].m->recv == SR_EARLY || recvs[i].m->recv == SR_LATE) recvs[i].st = sts[i];
    /* Check every receive; every message for this rank must have come once. */
    for (int i = 0; i < nr; ++i) {
        int id = validate(&recvs[i], p);
        if (id >= 0 && seen[id]++) {
            corrupted++;
            REPORT("message %d received twice", id);
        }
        free_type(&recvs[i].type);
    }
    finish_device_checks();
    for (int i = 0; i < p->n; ++i)
        if (p->msgs[i].dst == mt_rank && !seen[i]) {
            corrupted++;
            REPORT("message %d (%d->%d on %s) never received", i, p->msgs[i].src, mt_rank,
                   soak_comm_name(p->msgs[i].comm));
        }
    for (int i = 0; i < ns; ++i) free_type(&sends[i].type);
    if (nbsend) {
        /* Detaching waits until every buffered message has left; then the
         * whole buffer is free for the next round. */
        void *b;
        int sz;
        mpi_ok(MPI_Buffer_detach(&b, &sz), "MPI_Buffer_detach", NULL);
        mpi_ok(MPI_Buffer_attach(bsend_buf, (int)bsend_cap), "MPI_Buffer_attach", NULL);
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
