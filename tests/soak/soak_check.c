/* The soak's payloads (soak.h): patterns written into send buffers, and
 * every completed receive checked (source, tag, count, payload, the gaps of
 * a derived datatype, the guard bytes after it); on device and managed
 * buffers by the kernels of soak_gpu.cu, whose verdicts come per round. */
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

void prepare_send(send_op_t *s, const soak_msg_t *m)
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

void prepare_recv(recv_op_t *r, const soak_plan_t *p, const soak_msg_t *m)
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

void free_type(MPI_Datatype *t)
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
int validate(const recv_op_t *r, const soak_plan_t *p)
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
void finish_device_checks(void)
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
