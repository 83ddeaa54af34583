/* The soak's communicators and the buffers of a round (soak.h): arenas of
 * each memory kind sized by a dry run of the whole plan (prescan), carved
 * anew every round. */
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

/* ---- communicators ---------------------------------------------------------- */

void make_comms(void)
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

void free_comms(void)
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
size_t recv_bytes(const soak_plan_t *p, const soak_msg_t *m)
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


/* Runs the whole plan once to find what one round needs at most. */
needs_t prescan(void)
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

void arenas_alloc(const needs_t *need, bool device_only)
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

void arenas_free(bool device_only)
{
    for (int k = 0; k < SK_NKINDS; ++k) {
        if (device_only && k == SK_HOST) continue;
        if (send_arena[k].base) soak_free(k, send_arena[k].base);
        if (recv_arena[k].base) soak_free(k, recv_arena[k].base);
        send_arena[k].base = recv_arena[k].base = NULL;
    }
}

unsigned char *carve(arena_t *a, size_t n)
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
