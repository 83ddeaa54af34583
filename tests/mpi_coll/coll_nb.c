/*
 * The non-blocking collectives on device buffers as a state machine
 * (docs/coll.md, "Non-blocking forms"), checked against host references:
 *
 * - Initiation returns at once: right after MPI_Iallreduce on device buffers
 *   returns, the component's nb_deferred_starts counter has risen by one and
 *   one request of its own is pending (its copy in has not finished: the
 *   simulated GPU moves bytes only when polled).
 * - Order: eight collectives in flight on one communicator. Their buffers are
 *   host memory, GPU 0 or the slow GPU 1 of the simulated device, in a
 *   pattern that differs between ranks, so that on every rank later
 *   collectives are ready (copied in, or nothing to copy) before earlier
 *   ones, and ranks would start them in different orders if the component
 *   started each one when ready. They are Iallreduces of one size (started
 *   out of order, results land in the wrong buffers), an Ibarrier and an
 *   Iallgather on host memory (queued behind the staged ones). Completed by
 *   MPI_Waitany (each checked as it completes), by MPI_Testall polling, and
 *   by MPI_Waitall with one request freed before completion
 *   (MPI_Request_free: erroneous for collectives, tolerated; its result is
 *   checked once the component has no request pending).
 * - A blocking collective and MPI_Comm_dup (its CID agreement runs a
 *   non-blocking allreduce on the communicator) while a non-blocking
 *   collective waits for its copies.
 * - MPI_Comm_free right after initiation.
 * - An error: rank 0's copy back fails (simulated GPU only, injected through
 *   GWFAKE_FAIL_COPY_TO_DEVICE_BYTES); its request completes with
 *   MPI_ERR_OTHER (MPI_ERRORS_RETURN on the communicator), the other ranks
 *   get the right result. The simulated device aborts at MPI_Finalize when a
 *   staging buffer did not come back.
 *
 *   coll_nb host | fakedev | device
 *
 * host: every buffer in host memory, through coll gpuwire (references,
 * order and completion forms). fakedev: coll "gpuwirefake" (fake_device.c).
 * device: cudaMalloc (both kinds of device buffers on the rank's GPU); exits
 * 77 without a usable GPU.
 */
#include <stdlib.h>
#include <string.h>

#include "coll_harness.h"
#include "coll_pvar.h"

static enum mem_kind dev_fast, dev_slow; /* MEM_HOST in host mode */
static int me, n;

/* ------------------------------------------------------------------------
 * The component's MPI_T variables
 * ------------------------------------------------------------------------ */

static MPI_T_pvar_session session;
static MPI_T_pvar_handle deferred_h = MPI_T_PVAR_HANDLE_NULL, pending_h = MPI_T_PVAR_HANDLE_NULL;

static MPI_T_pvar_handle open_pvar(const char *component, const char *var, int var_class)
{
    char name[128];
    snprintf(name, sizeof(name), "coll_%s_%s", component, var);
    return coll_pvar_open(session, name, var_class);
}

static unsigned long long read_pvar(MPI_T_pvar_handle h) { return coll_pvar_read(session, h); }

static unsigned long long deferred(void) { return read_pvar(deferred_h); }
static unsigned long long pending(void) { return read_pvar(pending_h); }

/* Progresses MPI (a blocking host collective) until no rank has a request of
 * the component pending. */
static void drain(MPI_Comm comm)
{
    for (int i = 0; i < 1000000; ++i) {
        int mine = pending() == 0, all = 0;
        MT_CHECK_MPI(MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, comm));
        if (all) return;
    }
    mt_fail(__FILE__, __LINE__, "%s: requests still pending: %llu", tctx, pending());
}

/* ------------------------------------------------------------------------
 * Items: an Iallreduce (int sum) or an Iallgather, with their checks
 * ------------------------------------------------------------------------ */

typedef struct {
    enum { IT_ALLREDUCE, IT_ALLGATHER, IT_BARRIER } kind;
    tbuf_t s, r;
    long c;
    unsigned seed;
} item_t;

static void item_init(item_t *x, int kind, long c, unsigned seed, enum mem_kind ks,
                      enum mem_kind kr)
{
    memset(x, 0, sizeof(*x));
    x->kind = kind;
    x->c = c;
    x->seed = seed;
    if (kind == IT_BARRIER) return;
    tbuf_alloc(&x->s, T_INT, c, ks);
    tbuf_alloc(&x->r, T_INT, kind == IT_ALLGATHER ? n * c : c, kr);
    if (kind == IT_ALLREDUCE) {
        for (long e = 0; e < c; ++e) {
            int64_t v[2];
            tval(OP_SUM, T_INT, seed, me, e, v);
            tbuf_set(&x->s, e, v);
        }
    } else {
        img_set_flat(&x->s, x->s.img, 0, c, seed, me, 0);
    }
    tbuf_push(&x->s);
    tbuf_push(&x->r);
}

static void item_start(item_t *x, MPI_Comm comm, MPI_Request *req)
{
    switch (x->kind) {
    case IT_ALLREDUCE:
        MT_CHECK_MPI(MPI_Iallreduce(x->s.mpi, x->r.mpi, (int)x->c, MPI_INT, MPI_SUM, comm, req));
        break;
    case IT_ALLGATHER:
        MT_CHECK_MPI(MPI_Iallgather(x->s.mpi, (int)x->c, MPI_INT, x->r.mpi, (int)x->c, MPI_INT,
                                    comm, req));
        break;
    case IT_BARRIER: MT_CHECK_MPI(MPI_Ibarrier(comm, req)); break;
    }
}

static bool item_check(item_t *x, const char *what)
{
    if (x->kind == IT_BARRIER) return true;
    tbuf_pull(&x->r);
    unsigned char *expect = tbuf_snapshot(&x->r);
    if (x->kind == IT_ALLREDUCE) {
        for (long e = 0; e < x->c; ++e) {
            int64_t acc[2];
            tfold(OP_SUM, T_INT, x->seed, 0, n, e, acc);
            img_set(&x->r, expect, e, acc);
        }
    } else {
        for (int r = 0; r < n; ++r) img_set_flat(&x->r, expect, r * x->c, x->c, x->seed, r, 0);
    }
    bool ok = tbuf_matches(&x->r, expect, 0, x->r.nelem, what);
    free(expect);
    return ok;
}

static void item_free(item_t *x)
{
    if (x->kind == IT_BARRIER) return;
    tbuf_free(&x->s);
    tbuf_free(&x->r);
}

/* ------------------------------------------------------------------------
 * Cases
 * ------------------------------------------------------------------------ */

static void initiation_returns(MPI_Comm comm)
{
    tctx_set("MPI_Iallreduce returns before its copy in (%s)", mode_name);
    item_t x;
    item_init(&x, IT_ALLREDUCE, 5000, 91, dev_fast, dev_fast);
    const unsigned long long d0 = deferred(), p0 = pending();
    MPI_Request r;
    item_start(&x, comm, &r);
    const unsigned long long d1 = deferred(), p1 = pending();
    if (dev_fast != MEM_HOST) {
        /* Copies to host staging queued, not waited for: the previous
         * module's collective starts later, from progress. */
        MT_CHECK_EQ(d1 - d0, 1);
        MT_CHECK_EQ(p1 - p0, 1);
    } else {
        MT_CHECK_EQ(d1 - d0, 0);
        MT_CHECK_EQ(p1, 0);
    }
    MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    MT_CHECK_EQ(pending(), 0);
    item_check(&x, "iallreduce result");
    item_free(&x);
}

enum { NITEMS = 8, BARRIER_AT = 3, ALLGATHER_AT = 6 };

static void order_and_completion(MPI_Comm comm)
{
    /* Send and receive kinds of item i on rank me: pattern[(me + i) % 4] and
     * pattern[(me + i + 1) % 4]. So an item waits for a slow copy in, a
     * fast one, nothing (host buffers), or nothing to copy in (a dense
     * receive buffer on the GPU), differently on every rank. */
    const enum mem_kind pattern[4] = {dev_slow, dev_fast, MEM_HOST, MEM_HOST};
    static const char *const how[3] = {"MPI_Waitany", "MPI_Testall", "MPI_Waitall, one freed"};
    for (int round = 0; round < 3; ++round) {
        tctx_set("%d collectives in flight, kinds differ per rank, %s (%s)", NITEMS, how[round],
                 mode_name);
        item_t it[NITEMS];
        MPI_Request req[NITEMS];
        for (int i = 0; i < NITEMS; ++i) {
            const unsigned seed = 5000 + 100 * round + i;
            if (i == BARRIER_AT) {
                item_init(&it[i], IT_BARRIER, 0, seed, MEM_HOST, MEM_HOST);
            } else if (i == ALLGATHER_AT) {
                item_init(&it[i], IT_ALLGATHER, 211, seed, MEM_HOST, MEM_HOST);
            } else {
                item_init(&it[i], IT_ALLREDUCE, 3000, seed, pattern[(me + i) % 4],
                          pattern[(me + i + 1) % 4]);
            }
        }
        const unsigned long long d0 = deferred();
        for (int i = 0; i < NITEMS; ++i) item_start(&it[i], comm, &req[i]);
        if (dev_fast != MEM_HOST && n > 1) {
            /* At least the first item with a copy in is deferred, and every
             * item after it on this rank. */
            MT_CHECK(deferred() - d0 >= 1);
        }

        bool checked[NITEMS] = {false};
        int freed = -1;
        if (round == 0) {
            for (int k = 0; k < NITEMS; ++k) {
                int idx = MPI_UNDEFINED;
                MT_CHECK_MPI(MPI_Waitany(NITEMS, req, &idx, MPI_STATUS_IGNORE));
                if (idx == MPI_UNDEFINED || idx < 0 || idx >= NITEMS || checked[idx]) {
                    mt_fail(__FILE__, __LINE__, "%s: MPI_Waitany gave %d", tctx, idx);
                    break;
                }
                char what[64];
                snprintf(what, sizeof(what), "item %d (completed %d-th)", idx, k);
                item_check(&it[idx], what);
                checked[idx] = true;
            }
        } else if (round == 1) {
            int done = 0;
            while (!done) MT_CHECK_MPI(MPI_Testall(NITEMS, req, &done, MPI_STATUSES_IGNORE));
        } else {
            /* Free a request of the component's own: one with device memory
             * on this rank (a request of libnbc's refuses MPI_Request_free
             * before completion). */
            for (int i = 0; dev_fast != MEM_HOST && i < NITEMS && freed < 0; ++i) {
                if (i != BARRIER_AT && i != ALLGATHER_AT && (me + i) % 4 != 2) freed = i;
            }
            if (freed >= 0) MT_CHECK_MPI(MPI_Request_free(&req[freed]));
            MT_CHECK_MPI(MPI_Waitall(NITEMS, req, MPI_STATUSES_IGNORE));
            drain(comm);
        }
        for (int i = 0; i < NITEMS; ++i) {
            if (!checked[i]) {
                char what[64];
                snprintf(what, sizeof(what), "item %d%s", i, i == freed ? " (request freed)" : "");
                item_check(&it[i], what);
            }
            item_free(&it[i]);
        }
    }
    MT_CHECK_EQ(pending(), 0);
}

static void blocking_while_pending(MPI_Comm comm)
{
    tctx_set("blocking allreduce and MPI_Comm_dup while an iallreduce waits (%s)", mode_name);
    item_t x;
    item_init(&x, IT_ALLREDUCE, 4000, 92, dev_slow, dev_fast);
    MPI_Request r;
    item_start(&x, comm, &r);
    int a = me, b = -1;
    MT_CHECK_MPI(MPI_Allreduce(&a, &b, 1, MPI_INT, MPI_SUM, comm));
    MT_CHECK_EQ(b, n * (n - 1) / 2);
    MPI_Comm d;
    MT_CHECK_MPI(MPI_Comm_dup(comm, &d));
    MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    item_check(&x, "iallreduce result");
    item_free(&x);
    MT_CHECK_MPI(MPI_Comm_free(&d));
}

static void comm_freed_while_pending(MPI_Comm comm)
{
    /* A request of libnbc's on a freed communicator is Open MPI's matter:
     * only the component's own requests here. */
    if (dev_fast == MEM_HOST) return;
    tctx_set("MPI_Comm_free right after MPI_Iallreduce (%s)", mode_name);
    MPI_Comm d;
    MT_CHECK_MPI(MPI_Comm_dup(comm, &d));
    item_t x;
    item_init(&x, IT_ALLREDUCE, 2500, 93, dev_slow, dev_fast);
    MPI_Request r;
    item_start(&x, d, &r);
    MT_CHECK_MPI(MPI_Comm_free(&d));
    MT_CHECK_MPI(MPI_Wait(&r, MPI_STATUS_IGNORE));
    item_check(&x, "iallreduce result");
    item_free(&x);
}

static void error_in_status(MPI_Comm comm)
{
    if (dev_fast != MEM_FAKEDEV) return;
    tctx_set("rank 0's copy back fails (%s)", mode_name);
    MPI_Comm d;
    MT_CHECK_MPI(MPI_Comm_dup(comm, &d));
    MT_CHECK_MPI(MPI_Comm_set_errhandler(d, MPI_ERRORS_RETURN));
    const long c = 1237; /* no other copy of this rank has this size */
    item_t x;
    item_init(&x, IT_ALLREDUCE, c, 94, dev_fast, dev_fast);
    char bytes[32];
    snprintf(bytes, sizeof(bytes), "%ld", c * (long)sizeof(int));
    if (me == 0) setenv("GWFAKE_FAIL_COPY_TO_DEVICE_BYTES", bytes, 1);
    MPI_Request r;
    item_start(&x, d, &r);
    const int rc = MPI_Wait(&r, MPI_STATUS_IGNORE);
    if (me == 0) {
        unsetenv("GWFAKE_FAIL_COPY_TO_DEVICE_BYTES");
        int cls = MPI_SUCCESS;
        if (rc != MPI_SUCCESS) MPI_Error_class(rc, &cls);
        if (cls != MPI_ERR_OTHER) {
            mt_fail(__FILE__, __LINE__, "%s: MPI_Wait returned %d (class %d), not MPI_ERR_OTHER",
                    tctx, rc, cls);
        }
        if (r != MPI_REQUEST_NULL) mt_fail(__FILE__, __LINE__, "%s: request not freed", tctx);
    } else {
        MT_CHECK_MPI(rc);
        item_check(&x, "iallreduce result");
    }
    MT_CHECK_EQ(pending(), 0);
    item_free(&x);
    MT_CHECK_MPI(MPI_Comm_free(&d));
}

int main(int argc, char **argv)
{
    harness_init(&argc, &argv);
    if (harness_skip_reason()) return mt_skip(harness_skip_reason());
    if (mem_send != mem_recv || (mem_send != MEM_HOST && mem_send != MEM_FAKEDEV &&
                                 mem_send != MEM_DEVICE)) {
        mt_fail(__FILE__, __LINE__, "mode %s: give host, fakedev or device", mode_name);
        return mt_finish();
    }
    dev_fast = mem_send;
    dev_slow = mem_send == MEM_FAKEDEV ? MEM_FAKEDEV_SLOW : mem_send;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);

    int provided;
    MT_CHECK_MPI(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MT_CHECK_MPI(MPI_T_pvar_session_create(&session));
    const char *component = mem_send == MEM_FAKEDEV ? "gpuwirefake" : "gpuwire";
    deferred_h = open_pvar(component, "nb_deferred_starts", MPI_T_PVAR_CLASS_COUNTER);
    pending_h = open_pvar(component, "nb_pending", MPI_T_PVAR_CLASS_LEVEL);

    const struct {
        const char *name;
        void (*fn)(MPI_Comm);
    } cases[] = {
        {"initiation returns", initiation_returns},
        {"order and completion", order_and_completion},
        {"blocking while pending", blocking_while_pending},
        {"communicator freed while pending", comm_freed_while_pending},
        {"error in the status", error_in_status},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); ++i) {
        const int before = mt_failures;
        cases[i].fn(MPI_COMM_WORLD);
        if (mt_failures != before) {
            fprintf(stderr, "[rank %d] %s: %d failure(s)\n", mt_rank, cases[i].name,
                    mt_failures - before);
        }
    }

    if (deferred_h != MPI_T_PVAR_HANDLE_NULL) MPI_T_pvar_handle_free(session, &deferred_h);
    if (pending_h != MPI_T_PVAR_HANDLE_NULL) MPI_T_pvar_handle_free(session, &pending_h);
    MPI_T_pvar_session_free(&session);
    MPI_T_finalize();
    harness_fini();
    return mt_finish();
}
