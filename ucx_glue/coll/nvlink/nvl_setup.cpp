/*
 * A team's set-up, collectively and without blocking, and its release
 * (gpuwire/coll_nvlink.h, "Set-up"). Its own messages and state, driven by
 * whichever call needs the outcome: a blocking call drives it to the end
 * itself; a non-blocking one leaves it to the progress of its request's
 * polls, so that initiation never waits for another rank.
 */
#include <cstdio>
#include <cstring>
#include <new>

#include "nvl.hpp"

/* The set-up under way. [0]: the descriptions' receives and sends; [1]:
 * the answers'. A request is NULL once it has completed. */
struct gw_ce_nvl_setup {
    gw_coll_team_t *team = nullptr; /* NULL: this rank cannot take part */
    int gpu = 0, n = 0, me = 0, phase = 1; /* 1: descriptions coming, 2: answers coming */
    int ok = 0;                            /* this rank's answer */
    bool dl = false;                       /* this rank has the board of the delegated form */
    char board[64] = {};                   /* its name, created by rank 0, removed at the end */
    char why[256] = {};
    char *descs = nullptr; /* every rank's description, rank order */
    int answers[GW_CE_NVL_MAX_TEAM] = {};
    uint32_t ids[GW_CE_NVL_MAX_TEAM] = {};
    int nreqs[2] = {0, 0};
    void *reqs[2][2 * GW_CE_NVL_MAX_TEAM] = {};
    /* An error of a completed message of each group: its request is gone
     * by the time the whole group has completed. */
    int err[2] = {GW_CE_OK, GW_CE_OK};
};

namespace {

using gw::nvl::logf;

const char *comm_name(const gw_ce_nvl_t &nvl)
{
    return nullptr != nvl.tp.name ? nvl.tp.name(nvl.tp.ctx) : "?";
}

void set_state(gw_ce_nvl_t *nvl, int state) { __atomic_store_n(&nvl->state, state, __ATOMIC_RELEASE); }

void setup_free(gw_ce_nvl_t *nvl, gw_ce_nvl_setup_t *st)
{
    if (nullptr == st) return;
    /* Every rank has opened the board by now, or never will. */
    if (0 == st->me && '\0' != st->board[0]) gw_coll_team_board_unlink(st->board);
    for (int k = 0; k < 2; ++k) {
        for (int i = 0; i < st->nreqs[k]; ++i) {
            if (nullptr != st->reqs[k][i]) nvl->tp.p2p.cancel(nvl->tp.p2p.ctx, &st->reqs[k][i]);
        }
    }
    if (nullptr != st->team) gw_coll_team_close(st->team);
    delete[] st->descs;
    delete st;
}

/* Posts one set-up message of group k (0 descriptions, 1 answers). */
int post(gw_ce_nvl_t *nvl, gw_ce_nvl_setup_t *st, int k, bool send, void *buf, size_t bytes,
         int peer)
{
    const gw_ce_transport_t &p = nvl->tp.p2p;
    void **r = &st->reqs[k][st->nreqs[k]];
    *r = nullptr;
    const int rc = send ? p.isend(p.ctx, buf, bytes, peer, nvl->tp.setup_tag, r)
                        : p.irecv(p.ctx, buf, bytes, peer, nvl->tp.setup_tag, r);
    if (GW_CE_OK == rc) ++st->nreqs[k];
    return rc;
}

/* Whether every message of group k has completed; an error of one is kept
 * in st->err[k]. */
bool setup_reqs_done(gw_ce_nvl_t *nvl, gw_ce_nvl_setup_t *st, int k)
{
    const gw_ce_transport_t &p = nvl->tp.p2p;
    bool all = true;
    for (int i = 0; i < st->nreqs[k]; ++i) {
        if (nullptr == st->reqs[k][i]) continue;
        bool done = false;
        const int e = p.test(p.ctx, &st->reqs[k][i], &done);
        if (!done) {
            all = false;
            continue;
        }
        if (GW_CE_OK != e) st->err[k] = e;
    }
    return all;
}

/* Phase 1's end: every description is here; maps the peers and sends this
 * rank's answer. */
void answer(gw_ce_nvl_t *nvl, gw_ce_nvl_setup_t *st, int *err)
{
    /* A failed message makes this rank answer no, so every rank still
     * decides alike. */
    if (GW_CE_OK != *err) {
        st->ok = 0;
        std::snprintf(st->why, sizeof(st->why), "a description's message failed (MPI error %d)",
                      *err);
        *err = GW_CE_OK;
    }
    if (st->ok) {
        st->ok = 0 == gw_coll_team_connect(st->team, st->descs, st->ids, nvl->params.shared_gpu,
                                           st->why, sizeof(st->why));
    }
    /* Ranks that all share one GPU: the delegated form, where every rank
     * has the board (bit 1 of the answer). */
    if (st->ok && '\0' != st->board[0] && gw_coll_team_one_gpu(st->team)) {
        char bwhy[256] = "";
        if (0 != st->me) {
            st->dl = 0 == gw_coll_team_board_open(st->team, st->board, false, bwhy, sizeof(bwhy));
        }
        if (!st->dl) {
            logf(*nvl, 1, "NVLink: no delegated calls on %s: %s", comm_name(*nvl),
                 bwhy[0] ? bwhy : "rank 0 has no board");
        }
    } else {
        st->dl = false;
    }
    st->answers[st->me] = st->ok ? (st->dl ? 3 : 1) : 0;
    st->phase = 2;
    int rc = GW_CE_OK;
    for (int q = 0; q < st->n && GW_CE_OK == rc; ++q) {
        if (q != st->me) rc = post(nvl, st, 1, true, &st->answers[st->me], sizeof(int), q);
    }
    if (GW_CE_OK != rc) *err = rc;
}

} // namespace

extern "C" void gw_ce_nvl_init(gw_ce_nvl_t *nvl, const gw_ce_nvl_transport_t *tp,
                               const gw_ce_nvl_params_t *params)
{
    nvl->tp = *tp;
    nvl->params = *params;
}

extern "C" void gw_ce_nvl_release(gw_ce_nvl_t *nvl)
{
    setup_free(nvl, nvl->setup);
    nvl->setup = nullptr;
    if (nullptr != nvl->team) gw_coll_team_close(nvl->team);
    nvl->team = nullptr;
    set_state(nvl, GW_CE_NVL_UNKNOWN);
    nvl->dl = false;
}

extern "C" int gw_ce_nvl_setup_start(gw_ce_nvl_t *nvl, int gpu)
{
    const gw_ce_transport_t &p = nvl->tp.p2p;
    const int n = p.size, me = p.rank;
    gw_ce_nvl_peers_t peers{};
    if (n > GW_CE_NVL_MAX_TEAM || GW_CE_OK != nvl->tp.peers(nvl->tp.ctx, &peers) || !peers.local) {
        logf(*nvl, 10, "NVLink: %s spans more than this node: not used", comm_name(*nvl));
        set_state(nvl, GW_CE_NVL_UNUSABLE);
        return GW_CE_OK;
    }
    auto *st = new (std::nothrow) gw_ce_nvl_setup_t;
    char *descs = new (std::nothrow) char[(size_t)n * GW_COLL_TEAM_DESC_BYTES]();
    if (nullptr == st || nullptr == descs) {
        delete st;
        delete[] descs;
        return GW_CE_ERR_NOMEM;
    }
    st->descs = descs;
    st->gpu = gpu;
    st->n = n;
    st->me = me;
    std::memcpy(st->ids, peers.ids, sizeof(st->ids));
    const size_t slot = (nvl->params.oneshot_bytes + 255) / 256 * 256;
    char *mine = descs + (size_t)me * GW_COLL_TEAM_DESC_BYTES;
    /* On failure the description still goes out: it tells the others this
     * rank cannot take part. */
    st->ok = 0 == gw_coll_team_open(gpu, me, n, slot, (double)nvl->params.timeout_s, &st->team,
                                    mine, st->why, sizeof(st->why));
    /* The delegated form's board: made by rank 0 before its description
     * goes out, so it exists when the others open it (once every
     * description is here). */
    if (st->ok && 0 != nvl->params.delegate) {
        std::snprintf(st->board, sizeof(st->board), "%s", peers.board);
        if (0 == me) {
            char bwhy[256] = "";
            st->dl = 0 == gw_coll_team_board_open(st->team, st->board, true, bwhy, sizeof(bwhy));
            if (!st->dl) {
                logf(*nvl, 1, "NVLink: no delegated calls on %s: %s", comm_name(*nvl), bwhy);
                st->board[0] = '\0';
            }
        }
    }
    int rc = GW_CE_OK;
    /* Per peer, the description's receive before the answer's: the peer
     * sends them in that order on the one tag. */
    for (int q = 0; q < n && GW_CE_OK == rc; ++q) {
        if (q == me) continue;
        rc = post(nvl, st, 0, false, descs + (size_t)q * GW_COLL_TEAM_DESC_BYTES,
                  GW_COLL_TEAM_DESC_BYTES, q);
        if (GW_CE_OK == rc) rc = post(nvl, st, 1, false, &st->answers[q], sizeof(int), q);
        if (GW_CE_OK == rc) rc = post(nvl, st, 0, true, mine, GW_COLL_TEAM_DESC_BYTES, q);
    }
    nvl->setup = st;
    set_state(nvl, GW_CE_NVL_SETTING_UP);
    if (GW_CE_OK != rc) {
        /* The others wait for what this rank could not send: an MPI error. */
        logf(*nvl, 0, "NVLink team of %s: posting the set-up messages failed (%d)",
             comm_name(*nvl), rc);
        gw_ce_nvl_release(nvl);
        set_state(nvl, GW_CE_NVL_UNUSABLE);
    }
    return rc;
}

extern "C" void gw_ce_nvl_setup_progress(gw_ce_nvl_t *nvl)
{
    gw_ce_nvl_setup_t *st = nvl->setup;
    int err = GW_CE_OK;
    if (nullptr == st) return;
    if (1 == st->phase) {
        if (!setup_reqs_done(nvl, st, 0)) return;
        err = st->err[0];
        answer(nvl, st, &err);
    }
    if (GW_CE_OK == err) {
        if (!setup_reqs_done(nvl, st, 1)) return;
        err = st->err[1];
    }
    bool all_ok = GW_CE_OK == err, all_dl = true;
    for (int q = 0; q < st->n; ++q) {
        all_ok = all_ok && 0 != (st->answers[q] & 1);
        all_dl = all_dl && 0 != (st->answers[q] & 2);
    }
    if (!all_ok) {
        if (GW_CE_OK != err) {
            logf(*nvl, 0, "NVLink team of %s: a set-up message failed (MPI error %d); not used",
                 comm_name(*nvl), err);
        } else {
            logf(*nvl, 1, "NVLink: not used on %s: %s", comm_name(*nvl),
                 st->ok ? "another rank could not take part" : st->why);
        }
        gw_ce_nvl_release(nvl);
        set_state(nvl, GW_CE_NVL_UNUSABLE);
        return;
    }
    nvl->team = st->team;
    nvl->dl = all_dl;
    if (!all_dl) gw_coll_team_board_close(nvl->team); /* rank 0's, or one a rank opened */
    st->team = nullptr;
    logf(*nvl, 10, "NVLink: team of %d ranks on %s (GPU %d, one-shot up to %zu bytes; %s)", st->n,
         comm_name(*nvl), st->gpu, gw_coll_team_slot_bytes(nvl->team),
         all_dl ? "delegated calls on one GPU" : "a GPU per rank");
    setup_free(nvl, st);
    nvl->setup = nullptr;
    set_state(nvl, GW_CE_NVL_READY);
}

extern "C" int gw_ce_nvl_setup(gw_ce_nvl_t *nvl, int gpu)
{
    int rc = gw_ce_nvl_setup_start(nvl, gpu);
    while (GW_CE_OK == rc && GW_CE_NVL_SETTING_UP == nvl->state) {
        gw_ce_nvl_setup_progress(nvl);
        if (GW_CE_NVL_SETTING_UP == nvl->state) nvl->tp.p2p.progress(nvl->tp.p2p.ctx);
    }
    return rc;
}

extern "C" void gw_ce_nvl_settle(gw_ce_nvl_t *nvl)
{
    /* The non-blocking calls that started the set-up have their places in
     * the team's order already. Their requests' progress drives it,
     * possibly from another thread; only if none got a request does it end
     * here. During a set-up no call launches: calls issued and not launched
     * are requests waiting for it. */
    while (GW_CE_NVL_SETTING_UP == __atomic_load_n(&nvl->state, __ATOMIC_ACQUIRE)) {
        if (__atomic_load_n(&nvl->nb_launched, __ATOMIC_ACQUIRE) ==
            __atomic_load_n(&nvl->nb_issued, __ATOMIC_ACQUIRE)) {
            gw_ce_nvl_setup_progress(nvl);
        }
        if (GW_CE_NVL_SETTING_UP == nvl->state) nvl->tp.p2p.progress(nvl->tp.p2p.ctx);
    }
    nvl->seen = nvl->state;
}

extern "C" bool gw_ce_nvl_settled(gw_ce_nvl_t *nvl)
{
    const int state = __atomic_load_n(&nvl->state, __ATOMIC_ACQUIRE);
    if (GW_CE_NVL_SETTING_UP == state) return false;
    nvl->seen = state;
    return true;
}
