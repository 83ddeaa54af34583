/* One round of the soak's plan (soak.h, soak_plan.h): buffers prepared,
 * early receives, non-blocking sends, blocking operations in message order,
 * late receives, every request waited for, every receive checked. */
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

void mpi_ok(int rc, const char *what, const soak_msg_t *m)
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

void run_round(const soak_plan_t *p, uint64_t round, send_op_t *sends, recv_op_t *recvs,
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
