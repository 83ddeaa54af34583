/*
 * One-sided communication under every window flavor (create, allocate,
 * dynamic) and every synchronisation (fence, post/start/complete/wait,
 * lock/unlock, lock_all + flush): Put, Get, Accumulate (SUM, REPLACE),
 * Get_accumulate (SUM, NO_OP), Fetch_and_op, Compare_and_swap, Rput, Rget,
 * Raccumulate, vector datatypes at both ends, and accumulates from every
 * rank into one element (the sum must be exact). Data and return codes are
 * checked. Built with OSC_TEST_DEVICE, the window and the origin buffers are
 * in GPU memory (osc_rma_device.c).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpitest.h"
#include "osc_test_mem.h"

#define N 64
/* A dynamic window on host memory is attached in three regions end to end:
 * the Get and Rget of elements 8..11 span the first two. Device memory is
 * attached whole (separate allocations are never one range). */
static const int cuts_host[] = {0, 10, 34, N}, cuts_device[] = {0, N};
enum { F_CREATE, F_ALLOCATE, F_DYNAMIC, NFLAVORS };
enum { S_FENCE, S_PSCW, S_LOCK, S_LOCKALL, NSYNCS };
static const char *flavor_name[] = {"create", "allocate", "dynamic"};
static const char *sync_name[] = {"fence", "pscw", "lock", "lockall+flush"};

typedef struct {
    MPI_Win win;
    int64_t *mem; /* the window's memory (device memory under OSC_TEST_DEVICE) */
    MPI_Aint *addr; /* dynamic: every rank's base address */
    int flavor, sync;
    MPI_Group group;
} ctx_t;

static MPI_Aint disp(const ctx_t *c, int target, int idx)
{
    return c->flavor == F_DYNAMIC ? c->addr[target] + idx * (MPI_Aint)sizeof(int64_t) : idx;
}

static void open_access(ctx_t *c, int target, int type)
{
    if (c->sync == S_LOCK) MT_CHECK_MPI(MPI_Win_lock(type, target, 0, c->win));
}
static void close_access(ctx_t *c, int target)
{
    if (c->sync == S_LOCK) MT_CHECK_MPI(MPI_Win_unlock(target, c->win));
    if (c->sync == S_LOCKALL) MT_CHECK_MPI(MPI_Win_flush(target, c->win));
}

static void epoch_begin(ctx_t *c)
{
    switch (c->sync) {
    case S_FENCE: MT_CHECK_MPI(MPI_Win_fence(0, c->win)); break;
    case S_PSCW:
        MT_CHECK_MPI(MPI_Win_post(c->group, 0, c->win));
        MT_CHECK_MPI(MPI_Win_start(c->group, 0, c->win));
        break;
    case S_LOCKALL: MT_CHECK_MPI(MPI_Win_lock_all(0, c->win)); break;
    default: break;
    }
}

static void epoch_end(ctx_t *c)
{
    switch (c->sync) {
    case S_FENCE: MT_CHECK_MPI(MPI_Win_fence(0, c->win)); break;
    case S_PSCW:
        MT_CHECK_MPI(MPI_Win_complete(c->win));
        MT_CHECK_MPI(MPI_Win_wait(c->win));
        break;
    case S_LOCKALL:
        MT_CHECK_MPI(MPI_Win_flush_all(c->win));
        MT_CHECK_MPI(MPI_Win_unlock_all(c->win));
        break;
    default: break;
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

static int64_t init_value(int rank, int i)
{
    return i == 21 ? 0 : 1000 * (int64_t)rank + i;
}

static void run(int flavor, int sync)
{
    const int *cut = osc_test_device ? cuts_device : cuts_host;
    const int ncuts = osc_test_device ? 1 : 3;
    ctx_t c = {.flavor = flavor, .sync = sync};
    const int r = mt_rank, size = mt_size;
    const int next = (r + 1) % size, prev = (r + size - 1) % size;
    int64_t host[N];
    for (int i = 0; i < N; i++) host[i] = init_value(r, i);
    MPI_Comm_group(MPI_COMM_WORLD, &c.group);

    if (flavor == F_ALLOCATE && !osc_test_device) {
        MT_CHECK_MPI(MPI_Win_allocate(N * sizeof(int64_t), sizeof(int64_t), MPI_INFO_NULL,
                                      MPI_COMM_WORLD, &c.mem, &c.win));
    } else {
        c.mem = osc_test_alloc(N * sizeof(int64_t));
        if (flavor == F_DYNAMIC) {
            MT_CHECK_MPI(MPI_Win_create_dynamic(MPI_INFO_NULL, MPI_COMM_WORLD, &c.win));
            for (int i = 0; i < ncuts; i++) {
                MT_CHECK_MPI(MPI_Win_attach(c.win, c.mem + cut[i],
                                            (cut[i + 1] - cut[i]) * sizeof(int64_t)));
            }
        } else {
            /* Device windows: ALLOCATE gives host memory; create stands in. */
            MT_CHECK_MPI(MPI_Win_create(c.mem, N * sizeof(int64_t), sizeof(int64_t),
                                        MPI_INFO_NULL, MPI_COMM_WORLD, &c.win));
        }
    }
    osc_test_to(c.mem, host, sizeof(host));
    c.addr = malloc(size * sizeof(MPI_Aint));
    MPI_Aint mine;
    MPI_Get_address(c.mem, &mine);
    MPI_Allgather(&mine, 1, MPI_AINT, c.addr, 1, MPI_AINT, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);

    /* Not a shared window: MPI_Win_shared_query says so (MPI_ERR_RMA_FLAVOR). */
    MPI_Aint qsize;
    int qunit, qclass = MPI_SUCCESS;
    void *qbase;
    MPI_Win_set_errhandler(c.win, MPI_ERRORS_RETURN);
    MPI_Error_class(MPI_Win_shared_query(c.win, r, &qsize, &qunit, &qbase), &qclass);
    MT_CHECK_EQ(qclass, MPI_ERR_RMA_FLAVOR);
    MPI_Win_set_errhandler(c.win, MPI_ERRORS_ARE_FATAL);

    /* Origin buffers (device memory under OSC_TEST_DEVICE). */
    int64_t o_host[32];
    for (int k = 0; k < 8; k++) o_host[k] = 100000 * (int64_t)r + k;
    for (int k = 0; k < 4; k++) o_host[8 + k] = 200000 * (int64_t)r + k;
    for (int k = 0; k < 8; k++) o_host[12 + k] = 300000 * (int64_t)r + k;
    o_host[20] = r + 1;    /* SUM contribution */
    o_host[21] = 7777 + r; /* REPLACE */
    o_host[22] = 5;        /* GACC SUM */
    o_host[23] = 1;        /* FOP */
    o_host[24] = r + 1;    /* CAS new */
    o_host[25] = 0;        /* CAS compare */
    o_host[26] = 3;        /* Raccumulate */
    int64_t *o = osc_test_alloc(sizeof(o_host));
    int64_t *res = osc_test_alloc(16 * sizeof(int64_t));
    osc_test_to(o, o_host, sizeof(o_host));
    MPI_Datatype vec2, vec3;
    MPI_Type_vector(4, 1, 2, MPI_INT64_T, &vec2);
    MPI_Type_vector(4, 1, 3, MPI_INT64_T, &vec3);
    MPI_Type_commit(&vec2);
    MPI_Type_commit(&vec3);

    epoch_begin(&c);
    open_access(&c, next, MPI_LOCK_EXCLUSIVE);
    MT_CHECK_MPI(MPI_Put(o, 8, MPI_INT64_T, next, disp(&c, next, 0), 8, MPI_INT64_T, c.win));
    MT_CHECK_MPI(MPI_Get(res, 4, MPI_INT64_T, next, disp(&c, next, 8), 4, MPI_INT64_T, c.win));
    MT_CHECK_MPI(MPI_Accumulate(o + 21, 1, MPI_INT64_T, next, disp(&c, next, 17), 1,
                                MPI_INT64_T, MPI_REPLACE, c.win));
    MT_CHECK_MPI(MPI_Get_accumulate(NULL, 0, MPI_INT64_T, res + 5, 1, MPI_INT64_T, next,
                                    disp(&c, next, 19), 1, MPI_INT64_T, MPI_NO_OP, c.win));
    MPI_Request rq[3];
    MT_CHECK_MPI(MPI_Rput(o + 8, 4, MPI_INT64_T, next, disp(&c, next, 24), 4, MPI_INT64_T,
                          c.win, &rq[0]));
    MT_CHECK_MPI(MPI_Rget(res + 8, 4, MPI_INT64_T, next, disp(&c, next, 8), 4, MPI_INT64_T,
                          c.win, &rq[1]));
    MT_CHECK_MPI(MPI_Raccumulate(o + 26, 1, MPI_INT64_T, next, disp(&c, next, 22), 1,
                                 MPI_INT64_T, MPI_SUM, c.win, &rq[2]));
    MT_CHECK_MPI(MPI_Waitall(3, rq, MPI_STATUSES_IGNORE));
    MT_CHECK_MPI(MPI_Put(o + 12, 1, vec2, next, disp(&c, next, 32), 1, vec3, c.win));
    close_access(&c, next);

    /* Every rank into rank 0's elements at once. */
    open_access(&c, 0, MPI_LOCK_SHARED);
    MT_CHECK_MPI(MPI_Accumulate(o + 20, 1, MPI_INT64_T, 0, disp(&c, 0, 16), 1, MPI_INT64_T,
                                MPI_SUM, c.win));
    MT_CHECK_MPI(MPI_Get_accumulate(o + 22, 1, MPI_INT64_T, res + 4, 1, MPI_INT64_T, 0,
                                    disp(&c, 0, 18), 1, MPI_INT64_T, MPI_SUM, c.win));
    MT_CHECK_MPI(MPI_Fetch_and_op(o + 23, res + 6, MPI_INT64_T, 0, disp(&c, 0, 20), MPI_SUM,
                                  c.win));
    MT_CHECK_MPI(MPI_Compare_and_swap(o + 24, o + 25, res + 7, MPI_INT64_T, 0,
                                      disp(&c, 0, 21), c.win));
    close_access(&c, 0);
    epoch_end(&c);

    int64_t got[N], rh[16];
    osc_test_from(got, c.mem, sizeof(got));
    osc_test_from(rh, res, sizeof(rh));
    int bad = mt_failures;
    for (int k = 0; k < 8; k++) MT_CHECK_EQ(got[k], 100000 * (int64_t)prev + k);
    for (int k = 0; k < 4; k++) {
        MT_CHECK_EQ(rh[k], init_value(next, 8 + k));
        MT_CHECK_EQ(rh[8 + k], init_value(next, 8 + k));
        MT_CHECK_EQ(got[24 + k], 200000 * (int64_t)prev + k);
    }
    MT_CHECK_EQ(rh[5], init_value(next, 19));
    MT_CHECK_EQ(got[17], 7777 + prev);
    MT_CHECK_EQ(got[22], init_value(r, 22) + 3);
    for (int k = 0; k < 4; k++) MT_CHECK_EQ(got[32 + 3 * k], 300000 * (int64_t)prev + 2 * k);
    MT_CHECK_EQ(got[33], init_value(r, 33));
    MT_CHECK_EQ(got[34], init_value(r, 34));
    if (r == 0) {
        MT_CHECK_EQ(got[16], init_value(0, 16) + (int64_t)size * (size + 1) / 2);
        MT_CHECK_EQ(got[18], init_value(0, 18) + 5 * (int64_t)size);
        MT_CHECK_EQ(got[20], init_value(0, 20) + size);
        MT_CHECK(got[21] >= 1 && got[21] <= size);
    } else {
        MT_CHECK_EQ(got[16], init_value(r, 16));
    }
    /* Fetched values: each rank saw a distinct earlier state. */
    int64_t fop = rh[6] - init_value(0, 20), gacc = (rh[4] - init_value(0, 18));
    MT_CHECK(fop >= 0 && fop < size);
    MT_CHECK(gacc >= 0 && gacc % 5 == 0 && gacc / 5 < size);
    int64_t *all = malloc(size * sizeof(int64_t));
    MPI_Allgather(&fop, 1, MPI_INT64_T, all, 1, MPI_INT64_T, MPI_COMM_WORLD);
    for (int i = 0; i < size; i++)
        for (int j = i + 1; j < size; j++) MT_CHECK(all[i] != all[j]);
    int zero = rh[7] == 0, zeros = 0;
    MPI_Allreduce(&zero, &zeros, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    MT_CHECK_EQ(zeros, 1);
    free(all);
    if (mt_failures != bad) {
        mt_fail(__FILE__, __LINE__, "failures above under flavor %s, sync %s",
                flavor_name[flavor], sync_name[sync]);
    }

    MPI_Type_free(&vec2);
    MPI_Type_free(&vec3);
    for (int i = 0; flavor == F_DYNAMIC && i < ncuts; i++) {
        MT_CHECK_MPI(MPI_Win_detach(c.win, c.mem + cut[i]));
    }
    MT_CHECK_MPI(MPI_Win_free(&c.win));
    if (!(flavor == F_ALLOCATE && !osc_test_device)) osc_test_free(c.mem);
    osc_test_free(o);
    osc_test_free(res);
    free(c.addr);
    MPI_Group_free(&c.group);
}

int main(int argc, char **argv)
{
    mt_init(&argc, &argv, MPI_THREAD_SINGLE);
    if (osc_test_setup() != 0) return mt_skip("no GPU on this machine");
    for (int f = 0; f < NFLAVORS; f++)
        for (int s = 0; s < NSYNCS; s++) run(f, s);
    return mt_finish();
}
