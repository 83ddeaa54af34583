/*
 * Agreements without blocking (gpuwire/coll_agree.h): dissemination of an
 * OR of flags, its rounds kept in initiation order on a communicator's line.
 */
#include "gpuwire/coll_agree.h"

#include <cstdio>
#include <new>

struct gw_ce_agree {
    const gw_ce_transport_t *t;
    gw_ce_agree_line_t *line;
    int tag;
    int rounds;       /* message slots: ceil(log2 size), or size - 1 when direct */
    bool direct;      /* one round: every rank sends to every other at the start */
    uint64_t seq;     /* 1 + agreements with messages started before on line */
    int next_send;    /* the first round not sent yet */
    int received;     /* rounds whose message has arrived, in order */
    uint32_t all;     /* what this rank knows so far */
    uint32_t out[GW_CE_AGREE_MAX_ROUNDS], in[GW_CE_AGREE_MAX_ROUNDS];
    void *sreq[GW_CE_AGREE_MAX_ROUNDS], *rreq[GW_CE_AGREE_MAX_ROUNDS];
    bool rdone[GW_CE_AGREE_MAX_ROUNDS];
    gw_ce_turn_ticket_t ticket;
};

namespace {

int failed(const char *what, int rc, int peer, char *why, size_t why_len)
{
    if (nullptr != why && why_len > 0) {
        std::snprintf(why, why_len, "agreement of a non-blocking collective: %s rank %d failed (%d)",
                      what, peer, rc);
    }
    return GW_CE_ERR;
}

int peer_at(const gw_ce_agree_t *a, int k, int dir)
{
    const long n = a->t->size, step = a->direct ? k + 1L : 1L << k;
    return static_cast<int>(((a->t->rank + dir * step) % n + n) % n);
}

/* Sends the rounds whose turn on the line has come and whose earlier
 * rounds have all arrived. */
int send_ready(gw_ce_agree_t *a, char *why, size_t why_len)
{
    while (a->next_send < a->rounds && (a->direct || a->next_send <= a->received)) {
        const int k = a->next_send;
        if (!a->direct && __atomic_load_n(&a->line->sent[k], __ATOMIC_ACQUIRE) + 1 != a->seq) {
            break;
        }
        a->out[k] = a->all;
        const int to = peer_at(a, k, +1);
        const int rc = a->t->isend(a->t->ctx, &a->out[k], sizeof(a->out[k]), to, a->tag, &a->sreq[k]);
        if (0 != rc) return failed("send to", rc, to, why, why_len);
        if (!a->direct) __atomic_fetch_add(&a->line->sent[k], 1, __ATOMIC_RELEASE);
        ++a->next_send;
    }
    return GW_CE_OK;
}

} // namespace

extern "C" int gw_ce_agree_start(const gw_ce_transport_t *t, gw_ce_agree_line_t *line, int tag,
                                 uint32_t mine, gw_ce_agree_t **out, char *why, size_t why_len)
{
    auto *a = new (std::nothrow) gw_ce_agree_t{};
    if (nullptr == a) {
        if (nullptr != why && why_len > 0) std::snprintf(why, why_len, "out of host memory");
        return GW_CE_ERR_NOMEM;
    }
    a->t = t;
    a->line = line;
    a->tag = tag;
    a->all = mine;
    if (t->size > 1 && t->size <= GW_CE_AGREE_DIRECT_MAX) {
        a->direct = true;
        a->rounds = t->size - 1;
    }
    while (!a->direct && a->rounds < GW_CE_AGREE_MAX_ROUNDS && (1L << a->rounds) < t->size) {
        ++a->rounds;
    }
    gw_ce_turn_take(&line->decisions, &a->ticket);
    if (a->rounds > 0) a->seq = __atomic_add_fetch(&line->started, 1, __ATOMIC_ACQ_REL);
    for (int k = 0; k < a->rounds; ++k) {
        const int from = peer_at(a, k, -1);
        const int rc = t->irecv(t->ctx, &a->in[k], sizeof(a->in[k]), from, tag, &a->rreq[k]);
        if (0 != rc) {
            gw_ce_agree_free(a);
            return failed("receive from", rc, from, why, why_len);
        }
    }
    if (const int rc = send_ready(a, why, why_len); GW_CE_OK != rc) {
        gw_ce_agree_free(a);
        return rc;
    }
    *out = a;
    return GW_CE_OK;
}

extern "C" int gw_ce_agree_known(gw_ce_agree_line_t *line, uint32_t all, gw_ce_agree_t **out)
{
    auto *a = new (std::nothrow) gw_ce_agree_t{};
    if (nullptr == a) return GW_CE_ERR_NOMEM;
    a->line = line;
    a->all = all;
    gw_ce_turn_take(&line->decisions, &a->ticket);
    *out = a;
    return GW_CE_OK;
}

extern "C" int gw_ce_agree_poll(gw_ce_agree_t *a, bool *done, uint32_t *all, char *why,
                                size_t why_len)
{
    *done = false;
    for (;;) {
        if (const int rc = send_ready(a, why, why_len); GW_CE_OK != rc) return rc;
        if (a->received == a->rounds) break;
        const int k = a->received;
        if (!a->rdone[k]) {
            bool got = false;
            const int rc = a->t->test(a->t->ctx, &a->rreq[k], &got);
            if (got) a->rdone[k] = true;
            if (0 != rc) return failed("receive from", rc, peer_at(a, k, -1), why, why_len);
            if (!got) return GW_CE_OK;
        }
        a->all |= a->in[k];
        ++a->received;
    }
    /* Every round received, and sent: a send may wait for the line. */
    if (const int rc = send_ready(a, why, why_len); GW_CE_OK != rc) return rc;
    if (a->next_send < a->rounds) return GW_CE_OK;
    for (int k = 0; k < a->rounds; ++k) {
        if (nullptr == a->sreq[k]) continue;
        bool sent = false;
        const int rc = a->t->test(a->t->ctx, &a->sreq[k], &sent);
        if (0 != rc) return failed("send to", rc, peer_at(a, k, +1), why, why_len);
        if (!sent) return GW_CE_OK;
    }
    *all = a->all;
    *done = true;
    return GW_CE_OK;
}

extern "C" bool gw_ce_agree_my_turn(const gw_ce_agree_t *a)
{
    return gw_ce_turn_mine(&a->line->decisions, &a->ticket);
}

extern "C" void gw_ce_agree_decided(gw_ce_agree_t *a) { gw_ce_turn_pass(&a->line->decisions, &a->ticket); }

extern "C" void gw_ce_agree_free(gw_ce_agree_t *a)
{
    if (nullptr == a) return;
    for (int k = 0; k < a->rounds; ++k) {
        if (nullptr != a->sreq[k]) a->t->cancel(a->t->ctx, &a->sreq[k]);
        if (nullptr != a->rreq[k]) a->t->cancel(a->t->ctx, &a->rreq[k]);
    }
    gw_ce_agree_decided(a);
    delete a;
}

extern "C" bool gw_ce_agree_line_idle(const gw_ce_agree_line_t *line)
{
    return gw_ce_turn_idle(&line->decisions);
}
