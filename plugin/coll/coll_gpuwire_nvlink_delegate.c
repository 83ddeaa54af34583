/*
 * The delegated form of the NVLink calls, for a team whose ranks all share
 * one GPU (ranks under CUDA MPS): no kernel ever waits for another rank.
 *
 * The ranks share a board (host memory, set up with the team,
 * coll_gpuwire_nvlink_team.c) with an entry per call; calls are numbered
 * alike on every rank (nvl_dl_seq: a team's calls come in the same order
 * everywhere). Initiation, blocking or not, describes this rank's buffers
 * for CUDA IPC and posts the descriptions; the rank whose post comes last
 * maps every rank's buffers and launches one kernel that does the whole call
 * on all of them, and its stream then writes the entry's completion word.
 * Every rank's Test/Wait reads that word: one load. So the work runs while
 * the ranks compute, without MPI's progress (no message per call), and a
 * rank that initiates, synchronizes its device and only then sends what
 * another rank waits for before initiating has nothing of the call queued
 * on its GPU: it cannot hang there.
 *
 * What a rank's own buffers need is its own business, invisible to the
 * others: host memory, another GPU's memory and memory CUDA IPC cannot
 * export (stream-ordered pools, VMM, managed) go through device temporaries
 * that can be exported, copied in before the post and back once done. A
 * rank that cannot take part at all (a temporary it cannot get) still posts,
 * a description no peer accepts: the launching rank then marks the call
 * failed for every rank. A rank that never posts leaves the others waiting
 * until coll_gpuwire_nvlink_timeout seconds after their initiation.
 *
 * Like every CUDA-aware MPI, the buffers must be ready when the call is
 * made: the kernel runs in whichever rank's context launches it, ordered
 * with none of the other ranks' streams (with coll_gpuwire_device_sync,
 * initiation waits for this rank's legacy default stream first).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coll_gpuwire_nvlink.h"
#include "gpuwire/gpu_device.h"
#include "opal/runtime/opal_progress.h"

typedef struct {
    mca_coll_gpuwire_module_t *m;
    gw_coll_args_t args;
    /* The call's regions as the temporaries see them: one that cannot be
     * exported is marked as not on the team's GPU. */
    gw_coll_region_t r[GW_REGION_COUNT];
    gw_coll_temps_t tmp;
    uint64_t seq;
    double since; /* initiation, seconds (CLOCK_MONOTONIC) */
    bool posted;  /* a kernel may use its buffers until settled */
    bool settled; /* done, or failed for every rank: no kernel uses them any more */
} dl_call_t;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int dl_failed(const dl_call_t *d, const char *why)
{
    opal_output(0, "coll:gpuwire: %s%s over NVLink (delegated): %s",
                d->args.nonblocking ? "i" : "", gw_coll_name(d->args.id), why);
    return OMPI_ERROR;
}

/* Describes the call's input and output on this rank; false where CUDA IPC
 * cannot export one of them. */
static bool describe(const dl_call_t *d, const gw_coll_nvl_place_t *p, char *in_desc,
                     char *out_desc, char *why, size_t why_len)
{
    const int n = ompi_comm_size(d->args.comm);
    const size_t out_bytes = GW_COLL_ALLGATHER == d->args.id ? (size_t)n * p->bytes : p->bytes;
    if (0 != gw_coll_buffer_describe(p->out, out_bytes, out_desc, why, why_len)) return false;
    if (GW_COLL_BCAST == d->args.id) {
        memcpy(in_desc, out_desc, GW_COLL_BUF_DESC_BYTES);
        return true;
    }
    return 0 == gw_coll_buffer_describe(p->in, p->bytes, in_desc, why, why_len);
}

/* Whether every significant region of the call is on gpu. */
static bool all_on(const gw_coll_region_t r[GW_REGION_COUNT], int gpu)
{
    for (int i = 0; i < GW_REGION_COUNT; ++i) {
        if (r[i].hi > r[i].lo && !(r[i].on_gpu && r[i].gpu == gpu)) return false;
    }
    return true;
}

/* Initiation: the descriptions posted (the kernel launched where this rank
 * is the last). OMPI_SUCCESS, or an error once this rank has posted a
 * description that makes the call fail on every rank. */
static int dl_begin(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                    const gw_coll_region_t r[GW_REGION_COUNT], dl_call_t *d)
{
    gw_coll_team_t *t = m->nvl_team;
    const int tgpu = gw_coll_team_gpu(t);
    char why[256] = "";
    d->m = m;
    d->args = *a;
    memcpy(d->r, r, sizeof(d->r));
    d->seq = ++m->nvl_dl_seq;
    d->since = now_s();

    gw_coll_nvl_place_t p;
    gw_coll_nvl_place_of(a, r, &p);
    char in_desc[GW_COLL_BUF_DESC_BYTES], out_desc[GW_COLL_BUF_DESC_BYTES];
    bool ok = 0 == gw_coll_wait_user_regions(r, why, sizeof(why));
    /* Buffers on the team's GPU usually export as they are. Elsewhere they
     * go through temporaries; where one on the GPU does not export, every
     * region of the call does (second attempt). */
    const bool on_team_gpu = all_on(r, tgpu);
    bool described = false;
    if (ok && on_team_gpu) described = describe(d, &p, in_desc, out_desc, why, sizeof(why));
    for (int attempt = on_team_gpu ? 1 : 0; ok && !described && attempt < 2; ++attempt) {
        if (1 == attempt) {
            gw_coll_temps_release(&d->tmp);
            for (int i = 0; i < GW_REGION_COUNT; ++i) d->r[i].on_gpu = false;
            gw_coll_nvl_place_of(a, r, &p);
        }
        ok = 0 == gw_coll_temps_in(d->r, tgpu, &d->tmp, why, sizeof(why));
        if (!ok) break;
        gw_coll_nvl_relocate(&p, d->r, &d->tmp);
        described = describe(d, &p, in_desc, out_desc, why, sizeof(why));
    }
    ok = ok && described;
    const gw_coll_team_call_t c = gw_coll_nvl_team_call_of(a, &p);
    bool launched = false;
    char pwhy[256] = "";
    int rc;
    /* The entry is busy only where this rank is 256 calls ahead of another. */
    while (1 == (rc = gw_coll_team_post(t, d->seq, &c, ok ? in_desc : NULL, ok ? out_desc : NULL,
                                        &launched, pwhy, sizeof(pwhy)))) {
        if (now_s() - d->since > (double)mca_coll_gpuwire.nvlink_timeout) {
            return dl_failed(d, "the call 256 before it did not finish in "
                                "coll_gpuwire_nvlink_timeout seconds (a rank stopped calling)");
        }
        opal_progress();
    }
    if (!ok) return dl_failed(d, why);
    if (0 != rc) return dl_failed(d, pwhy);
    d->posted = true;
    return OMPI_SUCCESS;
}

/* *done once the call has run on every rank and this rank's temporaries are
 * copied back. */
static int dl_poll(dl_call_t *d, bool query, bool *done)
{
    gw_coll_team_t *t = d->m->nvl_team;
    char why[256] = "";
    bool finished = false;
    *done = false;
    if (0 != gw_coll_team_posted_done(t, d->seq, query, &finished, why, sizeof(why))) {
        d->settled = true;
        return dl_failed(d, why);
    }
    d->settled = finished;
    if (!finished) {
        if (query && now_s() - d->since > (double)mca_coll_gpuwire.nvlink_timeout) {
            return dl_failed(d, "not every rank initiated the call within "
                                "coll_gpuwire_nvlink_timeout seconds");
        }
        return OMPI_SUCCESS;
    }
    if (0 != gw_coll_temps_out(d->r, gw_coll_team_gpu(t), &d->tmp, why, sizeof(why))) {
        return dl_failed(d, why);
    }
    *done = true;
    return OMPI_SUCCESS;
}

/* Gives the temporaries back once no kernel can use them any more. A
 * request that could not be made, or a call given up on after the timeout,
 * leaves a call the last rank may still launch on them: they are then kept
 * (lost) rather than lent again; waiting here would hold MPI's progress. */
static void dl_release_temps(dl_call_t *d)
{
    if (d->posted && !d->settled) {
        bool finished = false;
        char why[256];
        d->settled = 0 != gw_coll_team_posted_done(d->m->nvl_team, d->seq, false, &finished, why,
                                                   sizeof(why)) || finished;
    }
    if (d->posted && !d->settled && NULL != d->tmp.buf.owner) {
        opal_output(0, "coll:gpuwire: NVLink (delegated): a call still outstanding keeps its "
                    "device temporaries (%zu bytes) for good", d->tmp.buf.len);
        return;
    }
    gw_coll_temps_release(&d->tmp);
}

int gw_coll_nvl_dl_run(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                       gw_coll_region_t r[GW_REGION_COUNT])
{
    dl_call_t d;
    memset(&d, 0, sizeof(d));
    int rc = dl_begin(m, a, r, &d);
    bool done = false;
    /* A blocking call: the completion word is watched closely, MPI's
     * progress now and then. */
    for (unsigned spins = 1; OMPI_SUCCESS == rc && !done; ++spins) {
        rc = dl_poll(&d, 0 == (spins & 1023), &done);
        if (OMPI_SUCCESS == rc && !done && 0 == (spins & 63)) opal_progress();
    }
    dl_release_temps(&d);
    if (OMPI_SUCCESS == rc) __atomic_fetch_add(&mca_coll_gpuwire.nvlink_calls, 1, __ATOMIC_RELAXED);
    return rc;
}

static int dl_job_poll(void *p, bool query, bool *done) { return dl_poll(p, query, done); }

static void dl_job_release(void *p)
{
    dl_call_t *d = p;
    dl_release_temps(d);
    free(d);
}

static const gw_coll_job_ops_t dl_job_ops = {dl_job_poll, dl_job_release, NULL};

int gw_coll_nvl_dl_start(mca_coll_gpuwire_module_t *m, const gw_coll_args_t *a,
                         gw_coll_region_t r[GW_REGION_COUNT], ompi_request_t **request)
{
    dl_call_t *d = calloc(1, sizeof(*d));
    if (NULL == d) return OMPI_ERR_OUT_OF_RESOURCE;
    int rc = dl_begin(m, a, r, d);
    if (OMPI_SUCCESS != rc) {
        dl_job_release(d);
        return rc;
    }
    rc = gw_coll_nb_job(m, a, r, &dl_job_ops, d, false, request); /* d is the request's now */
    if (OMPI_SUCCESS == rc) {
        __atomic_fetch_add(&mca_coll_gpuwire.nvlink_nb_calls, 1, __ATOMIC_RELAXED);
    }
    return rc;
}
