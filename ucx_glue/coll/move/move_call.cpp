#include "move_call.hpp"

#include <cstdio>

#include "gpuwire/gpu_device.h"

namespace gpuwire::coll {

namespace {

char *at(void *base, ptrdiff_t offset) { return static_cast<char *>(base) + offset; }
const char *at(const void *base, ptrdiff_t offset)
{
    return static_cast<const char *>(base) + offset;
}

std::string code(const char *what, int rc)
{
    char s[96];
    std::snprintf(s, sizeof(s), "%s (%d)", what, rc);
    return s;
}

} // namespace

/* What is wrong with a description, or nullptr. */
static const char *move_flaw(const gw_ce_transport_t &t, const gw_ce_move_t &m, bool blocking)
{
    if (t.size < 1 || t.rank < 0 || t.rank >= t.size) {
        return "the transport's rank is not within its size";
    }
    if (GW_CE_MOVE_BCAST == m.kind) {
        const bool chain = m.segment_elems > 0 && m.segment_elems < m.elems;
        if (m.root < 0 || m.root >= t.size) return "the bcast's root is not a rank";
        if (chain && !blocking) return "a chained bcast has no non-blocking form";
        return nullptr;
    }
    if (GW_CE_MOVE_ALLGATHER != m.kind && GW_CE_MOVE_ALLTOALL != m.kind) {
        return "unknown kind of data movement";
    }
    if (nullptr == m.sblocks || nullptr == m.rblocks) return "the call has no blocks";
    if (GW_CE_LOCAL_NONE > m.local || GW_CE_LOCAL_MESSAGE < m.local) {
        return "unknown own-block mode";
    }
    if (GW_CE_LOCAL_COPY == m.local && m.gpu < 0) return "an own-block copy needs a GPU";
    if (GW_CE_LOCAL_NONE == m.local && GW_CE_MOVE_ALLTOALL == m.kind) {
        return "alltoall has no in-place form";
    }
    return nullptr;
}

int move_check(const gw_ce_transport_t &t, const gw_ce_move_t &m, bool blocking, std::string &why)
{
    const char *bad = move_flaw(t, m, blocking);
    if (nullptr == bad) return GW_CE_OK;
    why = bad;
    return GW_CE_ERR_ARG;
}

MoveCall::~MoveCall()
{
    if (copying_) {
        char w[256];
        (void)gw_coll_copy_wait(gpu_, ticket_, w, sizeof(w)); /* its failure was not asked for */
    }
}

int MoveCall::fail(int rc, const char *what, const std::string &detail)
{
    if (why_.empty()) why_ = std::string(what) + ": " + detail;
    return rc;
}

int MoveCall::copy_failed(const char *why) { return fail(GW_CE_ERR, "device copy", why); }

int MoveCall::send(const void *base, ptrdiff_t offset, size_t bytes, int peer, int tag)
{
    if (0 == bytes) return GW_CE_OK;
    const int rc = reqs_.send(at(base, offset), bytes, peer, tag);
    return 0 == rc ? GW_CE_OK : fail(rc, "point-to-point", code("posting a send failed", rc));
}

int MoveCall::recv(void *base, ptrdiff_t offset, size_t bytes, int peer, int tag)
{
    if (0 == bytes) return GW_CE_OK;
    const int rc = reqs_.recv(at(base, offset), bytes, peer, tag);
    return 0 == rc ? GW_CE_OK : fail(rc, "point-to-point", code("posting a receive failed", rc));
}

int MoveCall::post(const gw_ce_move_t &m)
{
    if (GW_CE_MOVE_BCAST != m.kind) return exchange(m);
    if (m.segment_elems > 0 && m.segment_elems < m.elems && n_ > 2) return bcast_chain(m);
    return bcast(m);
}

int MoveCall::bcast(const gw_ce_move_t &m)
{
    const size_t bytes = m.elems * m.elem_bytes;
    if (me_ != m.root) return recv(m.buf, 0, bytes, m.root, m.tag);
    int rc = GW_CE_OK;
    for (int k = 1; k < n_ && GW_CE_OK == rc; ++k) {
        rc = send(m.buf, 0, bytes, (m.root + k) % n_, m.tag);
    }
    return rc;
}

/* Every segment is received from the previous rank into the application's
 * buffer and sent on to the next one as soon as it is there, so every rank
 * receives and sends the message once and the segments overlap along the
 * chain. Segments from one rank with one tag match in order. */
int MoveCall::bcast_chain(const gw_ce_move_t &m)
{
    const int v = (me_ - m.root + n_) % n_; /* place in the chain */
    const int prev = (me_ - 1 + n_) % n_, next = (me_ + 1) % n_;
    const size_t seg = m.segment_elems, nseg = (m.elems + seg - 1) / seg;
    auto elems_of = [&](size_t s) { return s == nseg - 1 ? m.elems - s * seg : seg; };
    auto offset_of = [&](size_t s) { return static_cast<ptrdiff_t>(s * seg) * m.elem_stride; };
    int rc = GW_CE_OK;
    const size_t first = reqs_.size();
    if (v > 0) {
        for (size_t s = 0; s < nseg && GW_CE_OK == rc; ++s) {
            rc = recv(m.buf, offset_of(s), elems_of(s) * m.elem_bytes, prev, m.tag);
        }
    }
    for (size_t s = 0; s < nseg && GW_CE_OK == rc; ++s) {
        if (v > 0 && 0 != m.elem_bytes) {
            rc = reqs_.wait(first + s);
            if (0 != rc) return fail(rc, "point-to-point", code("a message failed", rc));
        }
        if (v < n_ - 1) rc = send(m.buf, offset_of(s), elems_of(s) * m.elem_bytes, next, m.tag);
    }
    return rc;
}

/* Receives first (a message finds its receive posted), then sends, both
 * starting with the next rank so that not every rank sends to rank 0 first. */
int MoveCall::exchange(const gw_ce_move_t &m)
{
    const bool all = GW_CE_MOVE_ALLTOALL == m.kind;
    int rc = GW_CE_OK;
    for (int k = 1; k < n_ && GW_CE_OK == rc; ++k) {
        const int j = (me_ + k) % n_;
        rc = recv(m.rbuf, m.rblocks[j].offset, m.rblocks[j].bytes, j, m.tag);
    }
    for (int k = 1; k < n_ && GW_CE_OK == rc; ++k) {
        const int j = (me_ + k) % n_;
        const gw_ce_block_t &b = m.sblocks[all ? j : 0];
        rc = send(m.sbuf, b.offset, b.bytes, j, m.tag);
    }
    return GW_CE_OK == rc ? own_block(m) : rc;
}

int MoveCall::own_block(const gw_ce_move_t &m)
{
    const gw_ce_block_t &r = m.rblocks[me_];
    const gw_ce_block_t &s = m.sblocks[GW_CE_MOVE_ALLTOALL == m.kind ? me_ : 0];
    if (GW_CE_LOCAL_NONE == m.local) return GW_CE_OK;
    if (GW_CE_LOCAL_MESSAGE == m.local || 0 == r.bytes) {
        const int rc = recv(m.rbuf, r.offset, r.bytes, me_, m.tag);
        return GW_CE_OK == rc ? send(m.sbuf, s.offset, s.bytes, me_, m.tag) : rc;
    }
    if (r.bytes != s.bytes) {
        why_ = "the own block's send and receive differ in bytes: it needs a message";
        return GW_CE_ERR_ARG;
    }
    char w[256];
    if (0 != gw_coll_copy_start(at(m.rbuf, r.offset + m.copy_dst_shift),
                                at(m.sbuf, s.offset + m.copy_src_shift), r.bytes, m.gpu, &ticket_,
                                w, sizeof(w))) {
        return copy_failed(w);
    }
    gpu_ = m.gpu;
    copying_ = true;
    return GW_CE_OK;
}

int MoveCall::finish(int rc)
{
    const int wrc = reqs_.wait_all();
    if (copying_) {
        char w[256];
        copying_ = false;
        if (0 != gw_coll_copy_wait(gpu_, ticket_, w, sizeof(w)) && GW_CE_OK == rc) {
            rc = copy_failed(w);
        }
    }
    if (GW_CE_OK == rc && 0 != wrc) rc = fail(wrc, "point-to-point", code("a message failed", wrc));
    return rc;
}

int MoveCall::poll(bool query, bool *done)
{
    bool msgs = false;
    const int rc = reqs_.test_all(&msgs);
    if (0 != rc) return fail(rc, "point-to-point", code("a message failed", rc));
    if (!msgs) {
        *done = false;
        return GW_CE_OK;
    }
    if (copying_) {
        char w[256];
        bool d = false;
        if (0 != gw_coll_copy_done(gpu_, ticket_, query, &d, w, sizeof(w))) {
            copying_ = false; /* a failed stream never reaches the ticket */
            return copy_failed(w);
        }
        if (!d) {
            *done = false;
            return GW_CE_OK;
        }
        copying_ = false;
    }
    *done = true;
    return GW_CE_OK;
}

} // namespace gpuwire::coll
