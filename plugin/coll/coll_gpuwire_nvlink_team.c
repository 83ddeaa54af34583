/*
 * Setting up a communicator's NVLink team, collectively and without
 * blocking, and releasing it. Separate from the calls that use a team
 * (coll_gpuwire_nvlink.c, coll_gpuwire_nvlink_nb.c): its own messages and
 * state, driven by whichever call needs the outcome.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_gpuwire_nvlink.h"
#include "ompi/mca/pml/pml.h"
#include "ompi/proc/proc.h"
#include "opal/runtime/opal_progress.h"


/* Setting a team up, collectively, without blocking: each rank opens its
 * side (local), sends its description to every other rank and posts a
 * receive for each of theirs; once they have come, it maps the peers'
 * workspaces (local) and sends every other rank whether it could, and once
 * every rank's answer has come, every rank knows alike whether the team is
 * usable. The messages go point-to-point on the communicator with a tag of
 * their own (GW_TAG_NVL_SETUP: descriptions, then answers, in that order
 * from every rank), so no other collective's messages can meet their
 * receives whenever they are sent. A blocking call drives it to the end
 * itself; a non-blocking one leaves it to MPI's progress (its request's
 * polls), so that initiation never waits for another rank. */
typedef struct gw_nvl_setup {
    gw_coll_team_t *team; /* NULL: this rank cannot take part */
    int gpu, n, me, phase; /* 1: descriptions coming, 2: answers coming */
    int ok;                /* this rank's answer */
    bool dl;               /* this rank has the board of the delegated form */
    char board[64];        /* its name, created by rank 0, removed at the end */
    char why[256];
    char *descs;           /* every rank's description, rank order */
    int answers[GW_NVL_MAX_TEAM];
    uint32_t ids[GW_NVL_MAX_TEAM];
    /* [0]: the descriptions' receives and sends; [1]: the answers'. */
    int nreqs[2];
    ompi_request_t *reqs[2][2 * GW_NVL_MAX_TEAM];
} gw_nvl_setup_t;

static void setup_free(gw_nvl_setup_t *st)
{
    if (NULL == st) return;
    /* Every rank has opened the board by now, or never will. */
    if (0 == st->me && '\0' != st->board[0]) gw_coll_team_board_unlink(st->board);
    for (int k = 0; k < 2; ++k) {
        for (int i = 0; i < st->nreqs[k]; ++i) {
            if (MPI_REQUEST_NULL != st->reqs[k][i]) ompi_request_free(&st->reqs[k][i]);
        }
    }
    if (NULL != st->team) gw_coll_team_close(st->team);
    free(st->descs);
    free(st);
}

void gw_coll_nvlink_release(mca_coll_gpuwire_module_t *m)
{
    setup_free(m->nvl_setup);
    m->nvl_setup = NULL;
    if (NULL != m->nvl_team) gw_coll_team_close(m->nvl_team);
    m->nvl_team = NULL;
    m->nvl_state = GW_NVL_UNKNOWN;
    m->nvl_dl = false;
}

/* Posts one set-up message of group k (0 descriptions, 1 answers). */
static int post(gw_nvl_setup_t *st, int k, bool send, void *buf, int bytes, int peer,
                struct ompi_communicator_t *comm)
{
    ompi_request_t **r = &st->reqs[k][st->nreqs[k]];
    *r = MPI_REQUEST_NULL;
    int rc = send ? MCA_PML_CALL(isend(buf, bytes, MPI_BYTE, peer, GW_TAG_NVL_SETUP,
                                       MCA_PML_BASE_SEND_STANDARD, comm, r))
                  : MCA_PML_CALL(irecv(buf, bytes, MPI_BYTE, peer, GW_TAG_NVL_SETUP, comm, r));
    if (OMPI_SUCCESS == rc) ++st->nreqs[k];
    return rc;
}

/* Whether every message of group k has completed; an error of one in *err. */
static bool setup_reqs_done(const gw_nvl_setup_t *st, int k, int *err)
{
    for (int i = 0; i < st->nreqs[k]; ++i) {
        if (!REQUEST_COMPLETE(st->reqs[k][i])) return false;
        const int e = st->reqs[k][i]->req_status.MPI_ERROR;
        if (MPI_SUCCESS != e) *err = e;
    }
    return true;
}

/* Starts setting the communicator's team up: GW_NVL_SETTING_UP, or
 * GW_NVL_UNUSABLE at once where the communicator cannot have a team (ranks on
 * other nodes: the same answer on every rank, nothing exchanged). */
int gw_coll_nvl_setup_start(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm, int gpu)
{
    const int n = ompi_comm_size(comm), me = ompi_comm_rank(comm);
    bool local = true;
    for (int r = 0; r < n; ++r) {
        ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        local = local && NULL != p && OPAL_PROC_ON_LOCAL_NODE(p->super.proc_flags);
    }
    if (!local || NULL == m->previous_allgather || NULL == m->previous_allreduce) {
        COLL_GPUWIRE_VERBOSE(10, "NVLink: %s spans more than this node: not used",
                             comm->c_name);
        m->nvl_state = GW_NVL_UNUSABLE;
        return OMPI_SUCCESS;
    }
    gw_nvl_setup_t *st = calloc(1, sizeof(*st));
    char *descs = malloc((size_t)n * GW_COLL_TEAM_DESC_BYTES);
    if (NULL == st || NULL == descs) {
        free(st);
        free(descs);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    st->descs = descs;
    st->gpu = gpu;
    st->n = n;
    st->me = me;
    st->phase = 1;
    for (int r = 0; r < n; ++r) {
        ompi_proc_t *p = ompi_comm_peer_lookup(comm, r);
        st->ids[r] = (uint32_t)p->super.proc_name.vpid;
    }
    const size_t slot = (mca_coll_gpuwire.nvlink_oneshot_bytes + 255) / 256 * 256;
    char *mine = descs + (size_t)me * GW_COLL_TEAM_DESC_BYTES;
    /* On failure the description still goes out: it tells the others this
     * rank cannot take part. */
    st->ok = 0 == gw_coll_team_open(gpu, me, n, slot, (double)mca_coll_gpuwire.nvlink_timeout,
                                    &st->team, mine, st->why, sizeof(st->why));
    /* The delegated form's board: made by rank 0 before its description
     * goes out, so it exists when the others open it (once every
     * description is here). Its name is known to every rank of this job. */
    if (st->ok && mca_coll_gpuwire.nvlink_delegate) {
        snprintf(st->board, sizeof(st->board), "/gwnvl-%x-%x-%x",
                 (unsigned)OMPI_PROC_MY_NAME->jobid, (unsigned)st->ids[0],
                 (unsigned)gw_comm_cid(comm));
        if (0 == me) {
            char bwhy[256] = "";
            st->dl = 0 == gw_coll_team_board_open(st->team, st->board, true, bwhy, sizeof(bwhy));
            if (!st->dl) {
                COLL_GPUWIRE_VERBOSE(1, "NVLink: no delegated calls on %s: %s", comm->c_name, bwhy);
                st->board[0] = '\0';
            }
        }
    }
    int rc = OMPI_SUCCESS;
    /* Per peer, the description's receive before the answer's: the peer
     * sends them in that order on the one tag. */
    for (int q = 0; q < n && OMPI_SUCCESS == rc; ++q) {
        if (q == me) continue;
        rc = post(st, 0, false, descs + (size_t)q * GW_COLL_TEAM_DESC_BYTES,
                  GW_COLL_TEAM_DESC_BYTES, q, comm);
        if (OMPI_SUCCESS == rc) rc = post(st, 1, false, &st->answers[q], (int)sizeof(int), q, comm);
        if (OMPI_SUCCESS == rc) rc = post(st, 0, true, mine, GW_COLL_TEAM_DESC_BYTES, q, comm);
    }
    m->nvl_setup = st;
    m->nvl_state = GW_NVL_SETTING_UP;
    if (OMPI_SUCCESS != rc) {
        /* The others wait for what this rank could not send: an MPI error. */
        opal_output(0, "coll:gpuwire: NVLink team of %s: posting the set-up messages failed (%d)",
                    comm->c_name, rc);
        gw_coll_nvlink_release(m);
        m->nvl_state = GW_NVL_UNUSABLE;
    }
    return rc;
}

/* Moves the set-up on without waiting; at its end m->nvl_state is
 * GW_NVL_READY or GW_NVL_UNUSABLE, the same on every rank. */
void gw_coll_nvl_setup_progress(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm)
{
    gw_nvl_setup_t *st = m->nvl_setup;
    int err = MPI_SUCCESS;
    if (NULL == st) return;
    if (1 == st->phase) {
        if (!setup_reqs_done(st, 0, &err)) return;
        /* Every description is here. A failed message makes this rank
         * answer no, so every rank still decides alike. */
        if (MPI_SUCCESS != err) {
            st->ok = 0;
            snprintf(st->why, sizeof(st->why), "a description's message failed (MPI error %d)",
                     err);
            err = MPI_SUCCESS;
        }
        if (st->ok) {
            st->ok = 0 == gw_coll_team_connect(st->team, st->descs, st->ids,
                                               mca_coll_gpuwire.nvlink_shared_gpu, st->why,
                                               sizeof(st->why));
        }
        /* Ranks that all share one GPU: the delegated form, where every
         * rank has the board (bit 1 of the answer). */
        if (st->ok && '\0' != st->board[0] && gw_coll_team_one_gpu(st->team)) {
            char bwhy[256] = "";
            if (0 != st->me) {
                st->dl = 0 == gw_coll_team_board_open(st->team, st->board, false, bwhy,
                                                      sizeof(bwhy));
            }
            if (!st->dl) {
                COLL_GPUWIRE_VERBOSE(1, "NVLink: no delegated calls on %s: %s", comm->c_name,
                                     bwhy[0] ? bwhy : "rank 0 has no board");
            }
        } else {
            st->dl = false;
        }
        st->answers[st->me] = st->ok ? (st->dl ? 3 : 1) : 0;
        st->phase = 2;
        int rc = OMPI_SUCCESS;
        for (int q = 0; q < st->n && OMPI_SUCCESS == rc; ++q) {
            if (q != st->me) rc = post(st, 1, true, &st->answers[st->me], (int)sizeof(int), q, comm);
        }
        if (OMPI_SUCCESS != rc) err = MPI_ERR_OTHER;
    }
    if (MPI_SUCCESS == err && !setup_reqs_done(st, 1, &err)) return;
    bool all_ok = MPI_SUCCESS == err, all_dl = true;
    for (int q = 0; q < st->n; ++q) {
        all_ok = all_ok && 0 != (st->answers[q] & 1);
        all_dl = all_dl && 0 != (st->answers[q] & 2);
    }
    if (!all_ok) {
        if (MPI_SUCCESS != err) {
            opal_output(0, "coll:gpuwire: NVLink team of %s: a set-up message failed (MPI "
                        "error %d); not used", comm->c_name, err);
        } else {
            COLL_GPUWIRE_VERBOSE(1, "NVLink: not used on %s: %s", comm->c_name,
                                 st->ok ? "another rank could not take part" : st->why);
        }
        gw_coll_nvlink_release(m);
        m->nvl_state = GW_NVL_UNUSABLE;
        return;
    }
    m->nvl_team = st->team;
    m->nvl_dl = all_dl;
    if (!all_dl) gw_coll_team_board_close(m->nvl_team); /* rank 0's, or one a rank opened */
    st->team = NULL;
    COLL_GPUWIRE_VERBOSE(10, "NVLink: team of %d ranks on %s (GPU %d, one-shot up to %zu bytes; "
                         "%s)",
                         st->n, comm->c_name, st->gpu, gw_coll_team_slot_bytes(m->nvl_team),
                         all_dl ? "delegated calls on one GPU" : "a GPU per rank");
    setup_free(st);
    m->nvl_setup = NULL;
    m->nvl_state = GW_NVL_READY;
}

/* Sets the team up and waits for the end (blocking calls: no request of
 * this communicator is setting it up, so the set-up is driven here). */
int gw_coll_nvl_team_setup(mca_coll_gpuwire_module_t *m, struct ompi_communicator_t *comm, int gpu)
{
    int rc = gw_coll_nvl_setup_start(m, comm, gpu);
    while (OMPI_SUCCESS == rc && GW_NVL_SETTING_UP == m->nvl_state) {
        gw_coll_nvl_setup_progress(m, comm);
        if (GW_NVL_SETTING_UP == m->nvl_state) opal_progress();
    }
    return rc;
}
