/*
 * osc/gpuwire's messages: sends, the progress callback that finds and
 * receives incoming messages, and their handling in arrival order.
 */
#include "osc_gpuwire.h"

#include <stdlib.h>
#include <string.h>

#include "ompi/message/message.h"
#include "ompi/mca/pml/pml.h"
#include "opal/runtime/opal_progress.h"
#include "opal/util/output.h"

static void msg_construct(gw_osc_msg_t *msg)
{
    msg->req = NULL;
    msg->buf = NULL;
    msg->len = 0;
    msg->peer = -1;
}

static void msg_destruct(gw_osc_msg_t *msg)
{
    /* Completed before it is released (gw_osc_wait_sends, gw_osc_poll):
     * freeing a complete request cannot fail. */
    if (msg->req != NULL) (void)ompi_request_free(&msg->req);
    gw_osc_buf_put(msg->buf, msg->len);
}

OBJ_CLASS_INSTANCE(gw_osc_msg_t, opal_list_item_t, msg_construct, msg_destruct);

int gw_osc_call_failed(const char *call, int rc)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    if (PMPI_Error_string(rc, text, &len) != MPI_SUCCESS) text[0] = '\0';
    opal_output(0, "osc:gpuwire: %s failed: %s (%d); the operation is not done", call,
                text[0] ? text : "unknown error", rc);
    return rc;
}
/* A pending get holds a reference on its result datatype: MPI lets the
 * application free it before the reply has been unpacked. */
static void pending_construct(gw_osc_pending_t *p) { p->dt = NULL; }
static void pending_destruct(gw_osc_pending_t *p)
{
    if (NULL != p->dt) OMPI_DATATYPE_RELEASE_NO_NULLIFY(p->dt);
}
OBJ_CLASS_INSTANCE(gw_osc_pending_t, opal_list_item_t, pending_construct, pending_destruct);

/* Caller holds m->lock. The message is copied: the caller's buffers are
 * free again on return (local completion at once). */
int gw_osc_send(gw_osc_module_t *m, int peer, const gw_osc_hdr_t *h, const void *blocks,
                size_t blocks_len, const void *payload, size_t payload_len)
{
    const size_t len = sizeof(*h) + blocks_len + payload_len;
    char *buf = gw_osc_buf_get(len);
    if (buf == NULL) return OMPI_ERR_OUT_OF_RESOURCE;
    memcpy(buf, h, sizeof(*h));
    if (blocks_len) memcpy(buf + sizeof(*h), blocks, blocks_len);
    if (payload_len) memcpy(buf + sizeof(*h) + blocks_len, payload, payload_len);
    return gw_osc_send_buf(m, peer, buf, len);
}

int gw_osc_send_buf(gw_osc_module_t *m, int peer, char *buf, size_t len)
{
    gw_osc_msg_t *msg = OBJ_NEW(gw_osc_msg_t);
    if (msg == NULL) {
        gw_osc_buf_put(buf, len);
        return OMPI_ERR_OUT_OF_RESOURCE;
    }
    msg->buf = buf;
    msg->len = len;
    msg->peer = peer;
    int rc = MCA_PML_CALL(isend(msg->buf, msg->len, MPI_BYTE, peer, GW_OSC_TAG,
                                MCA_PML_BASE_SEND_STANDARD, m->comm, &msg->req));
    if (rc != OMPI_SUCCESS) {
        opal_output(0, "osc:gpuwire: send of %zu bytes to rank %d failed (%d)", msg->len, peer,
                    rc);
        msg->req = NULL;
        OBJ_RELEASE(msg);
        return rc;
    }
    opal_list_append(&m->outgoing, &msg->super);
    return OMPI_SUCCESS;
}

int gw_osc_send_ctl(gw_osc_module_t *m, int peer, uint32_t kind, int aux, uint64_t count)
{
    gw_osc_hdr_t h = {.kind = kind, .aux = aux, .count = count};
    return gw_osc_send(m, peer, &h, NULL, 0, NULL, 0);
}

static void handle(gw_osc_module_t *m, int peer, const char *buf, size_t len)
{
    switch (gw_osc_sync_handle(&m->sync, peer, buf, len)) {
    case 0:
        break;
    case GW_OSC_ERR_SHORT:
        opal_output(0, "osc:gpuwire: short message (%zu bytes) from rank %d dropped", len, peer);
        break;
    case GW_OSC_ERR_NOMEM:
        opal_output(0, "osc:gpuwire: out of memory queueing a lock request");
        abort();
    default:
        opal_output(0, "osc:gpuwire: unknown message kind %u from rank %d dropped",
                    ((const gw_osc_hdr_t *)buf)->kind, peer);
    }
}

/* Caller holds m->lock. Bounded work: a few new messages per call. */
int gw_osc_poll(gw_osc_module_t *m)
{
    int work = 0;
    for (int i = 0; i < 16; i++) {
        int matched = 0;
        ompi_message_t *message = NULL;
        ompi_status_public_t status;
        int rc = MCA_PML_CALL(improbe(MPI_ANY_SOURCE, GW_OSC_TAG, m->comm, &matched, &message,
                                      &status));
        if (rc != OMPI_SUCCESS) {
            opal_output(0, "osc:gpuwire: probe for window messages failed (%d)", rc);
            break;
        }
        if (!matched) break;
        gw_osc_msg_t *msg = OBJ_NEW(gw_osc_msg_t);
        if (msg == NULL) {
            opal_output(0, "osc:gpuwire: out of memory receiving a window message");
            abort();
        }
        msg->len = status._ucount;
        msg->buf = gw_osc_buf_get(msg->len);
        msg->peer = status.MPI_SOURCE;
        if (msg->buf == NULL) {
            opal_output(0, "osc:gpuwire: out of memory receiving %zu bytes", msg->len);
            abort();
        }
        rc = MCA_PML_CALL(imrecv(msg->buf, msg->len, MPI_BYTE, &message, &msg->req));
        if (rc != OMPI_SUCCESS) {
            opal_output(0, "osc:gpuwire: receive of %zu bytes from rank %d failed (%d)",
                        msg->len, msg->peer, rc);
            abort();
        }
        opal_list_append(&m->incoming, &msg->super);
        work++;
    }
    /* Requests by message queued behind a lock that a same-node origin held
     * in this rank's word (released there, without a message). */
    if (m->sync.nwaiters > 0) gw_osc_sync_grant_waiters(&m->sync);
    /* Strictly in arrival order: later messages wait for a large one, and
     * for an accumulate whose turn at this rank's accumulate word has not
     * come (a same-node origin changing the window itself holds it: tried
     * again at the next poll rather than waited for here). */
    while (!opal_list_is_empty(&m->incoming)) {
        gw_osc_msg_t *msg = (gw_osc_msg_t *)opal_list_get_first(&m->incoming);
        if (!REQUEST_COMPLETE(msg->req)) break;
        const uint32_t kind = msg->len >= sizeof(gw_osc_hdr_t)
                                  ? ((const gw_osc_hdr_t *)msg->buf)->kind : 0;
        int *word = kind == GW_OSC_ACC || kind == GW_OSC_GACC || kind == GW_OSC_CAS
                        ? gw_osc_lockwords_acc(m->locks, m->rank) : NULL;
        if (word != NULL && !gw_osc_acc_trylock(word, 64)) break;
        opal_list_remove_first(&m->incoming);
        const int err = msg->req->req_status.MPI_ERROR;
        if (err != MPI_SUCCESS) {
            /* Its bytes are not all there: applying them would corrupt the window. */
            opal_output(0, "osc:gpuwire: receive of %zu bytes from rank %d failed (%d); dropped",
                        msg->len, msg->peer, err);
        } else {
            handle(m, msg->peer, msg->buf, msg->len);
        }
        if (word != NULL) gw_osc_acc_unlock(word);
        OBJ_RELEASE(msg);
        work++;
    }
    gw_osc_msg_t *msg, *next;
    OPAL_LIST_FOREACH_SAFE(msg, next, &m->outgoing, gw_osc_msg_t) {
        if (REQUEST_COMPLETE(msg->req)) {
            if (msg->req->req_status.MPI_ERROR != MPI_SUCCESS)
                opal_output(0, "osc:gpuwire: send of %zu bytes to rank %d failed (%d)", msg->len,
                            msg->peer, msg->req->req_status.MPI_ERROR);
            opal_list_remove_item(&m->outgoing, &msg->super);
            OBJ_RELEASE(msg);
            work++;
        }
    }
    return work;
}

int gw_osc_progress(void)
{
    int work = 0;
    if (opal_mutex_trylock(&gw_osc_state.windows_lock) != 0) return 0;
    opal_list_item_t *item;
    OPAL_LIST_FOREACH(item, &gw_osc_state.windows, opal_list_item_t) {
        gw_osc_module_t *m = gw_osc_from_link(item);
        if (opal_mutex_trylock(&m->lock) == 0) {
            work += gw_osc_poll(m);
            /* Direct copies batched by Puts with no synchronisation yet. */
            (void)gw_osc_direct_kick(m->direct);
            opal_mutex_unlock(&m->lock);
        }
    }
    opal_mutex_unlock(&gw_osc_state.windows_lock);
    return work;
}

/* Polls and progresses until done(m, arg), asked under m->lock after each
 * poll, holds: the one waiting loop of the waits below. */
static void poll_until(gw_osc_module_t *m, bool (*done)(gw_osc_module_t *, const void *),
                       const void *arg)
{
    for (;;) {
        opal_mutex_lock(&m->lock);
        /* Already there (a flush after direct operations only): no probe. */
        bool reached = done(m, arg);
        if (!reached) {
            gw_osc_poll(m);
            reached = done(m, arg);
        }
        opal_mutex_unlock(&m->lock);
        if (reached) return;
        opal_progress();
    }
}

/* What a wait waits for: *value (or *flag) reaching want. */
typedef struct {
    const uint64_t *value;
    volatile int *flag;
    uint64_t want;
} gw_osc_reach_t;

static bool value_reached(gw_osc_module_t *m, const void *arg)
{
    (void)m;
    const gw_osc_reach_t *r = arg;
    return *r->value >= r->want;
}

static bool list_emptied(gw_osc_module_t *m, const void *list)
{
    (void)m;
    return opal_list_is_empty((opal_list_t *)list);
}

static bool flag_reached(gw_osc_module_t *m, const void *arg)
{
    (void)m;
    const gw_osc_reach_t *r = arg;
    return *r->flag >= (int)r->want;
}

/* Waits until *counter reaches at_least (caller does not hold m->lock);
 * returns at once, without polling, when it has already. */
void gw_osc_wait_until(gw_osc_module_t *m, volatile int *counter, int at_least)
{
    if (*counter >= at_least) return;
    const gw_osc_reach_t r = {.flag = counter, .want = (uint64_t)at_least};
    poll_until(m, flag_reached, &r);
}

void gw_osc_wait_reached(gw_osc_module_t *m, const uint64_t *value, uint64_t want)
{
    const gw_osc_reach_t r = {.value = value, .want = want};
    poll_until(m, value_reached, &r);
}

/* Every reply this process awaits has arrived. */
void gw_osc_wait_pending(gw_osc_module_t *m)
{
    poll_until(m, list_emptied, &m->pending);
}

/* Every message this process sent has left (before the window goes). */
void gw_osc_wait_sends(gw_osc_module_t *m)
{
    poll_until(m, list_emptied, &m->outgoing);
}
