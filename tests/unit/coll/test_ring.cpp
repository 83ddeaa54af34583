/*
 * The device reduction ring (gpuwire/coll_ring.h) without mpirun: ranks
 * over the memory transport, GPU work on the simulated GPU of tests/mpi_coll
 * (fake_device.c: "device" buffers are gwfake-device memfd mappings the CPU
 * may touch, and kernels and copies land only after several polls of their
 * ticket, so a result sent before its ticket is reached is stale).
 *
 * Two drivers: the blocking form with one thread per rank (which only run
 * the calls: Catch2 is not thread-safe, so the outcomes are checked after
 * the threads end), and every rank's job polled in turn from one thread
 * (deterministic: what the GPU has not finished has not landed). Results
 * are compared bit for bit with a CPU reference, for ops whose result does
 * not depend on the order in which the ring combines (integer sums, XOR,
 * MAX, MINLOC with ties), and the messages sent with those of the blocking
 * ring that coll gpuwire ran before the engine had it.
 */
#include "gw_catch.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gpuwire/coll_ring.h"
#include "gpuwire/cuda/reduce.h"
#include "gpuwire/gpu_device.h"

#include "dev_buf.hpp"
#include "mem_transport.hpp"

namespace {

/* Mappings of the simulated GPU's memory: scratch a job did not give back
 * shows here. */
int device_mappings()
{
    FILE *f = std::fopen("/proc/self/maps", "r");
    if (nullptr == f) return -1;
    char line[512];
    int k = 0;
    while (std::fgets(line, sizeof(line), f)) k += nullptr != std::strstr(line, "gwfake-device");
    std::fclose(f);
    return k;
}

struct TypeCase {
    const char *name;
    int op, type;
};
const TypeCase kInt32Sum{"int32 sum", GW_OP_SUM, GW_TYPE_INT32};
const TypeCase kTypes[] = {kInt32Sum,
                           {"uint8 bxor", GW_OP_BXOR, GW_TYPE_UINT8},
                           {"double max", GW_OP_MAX, GW_TYPE_DOUBLE},
                           {"float_int minloc", GW_OP_MINLOC, GW_TYPE_FLOAT_INT}};

/* Rank r's input: count elements, different per rank and element, with
 * ties between ranks for MINLOC. */
std::vector<char> input(const TypeCase &tc, size_t count, int r)
{
    const size_t es = gw_reduce_type_size(tc.type);
    std::vector<char> v(count * es);
    uint32_t x = 2654435761u * static_cast<uint32_t>(r + 1);
    for (size_t i = 0; i < count; ++i) {
        x = x * 1664525u + 1013904223u;
        char *e = v.data() + i * es;
        if (GW_TYPE_DOUBLE == tc.type) {
            const double d = static_cast<double>(static_cast<int32_t>(x >> 8)) / 3.0;
            std::memcpy(e, &d, sizeof(d));
        } else if (GW_TYPE_FLOAT_INT == tc.type) {
            const gw_float_int_t p{static_cast<float>((x >> 13) % 4), r};
            std::memcpy(e, &p, sizeof(p));
        } else {
            for (size_t b = 0; b < es; ++b) e[b] = static_cast<char>(x >> (8 * (b % 4)));
        }
    }
    return v;
}

/* in[lo] op ... op in[hi - 1], rank order, on the CPU. */
std::vector<char> fold(const TypeCase &tc, const std::vector<std::vector<char>> &in, int lo, int hi)
{
    std::vector<char> acc = in[lo];
    const size_t count = acc.size() / gw_reduce_type_size(tc.type);
    char why[200];
    for (int r = lo + 1; r < hi; ++r) {
        REQUIRE(0 == gw_host_reduce3(tc.op, tc.type, acc.data(), in[r].data(), acc.data(), count,
                                     why, sizeof(why)));
    }
    return acc;
}

/* MemWorld's transport, whose progress yields: the blocking form spins on
 * it, and the ranks share few cores. */
void yield_progress(void *) { std::this_thread::yield(); }

struct Case {
    gw_ce_ring_coll_t coll;
    TypeCase tc;
    int n;
    size_t count; /* Reduce_scatter_block: per rank; Reduce_scatter: ignored */
    bool vcounts; /* Reduce_scatter with counts per rank */
    bool in_place;
    int root;
    size_t segment_bytes;
    bool threads; /* the blocking form on a thread per rank */
};

std::string describe(const Case &c)
{
    char s[200];
    std::snprintf(s, sizeof(s), "coll %d %s n=%d count=%zu%s%s root=%d seg=%zu %s",
                  static_cast<int>(c.coll), c.tc.name, c.n, c.count, c.vcounts ? " v" : "",
                  c.in_place ? " in-place" : "", c.root, c.segment_bytes,
                  c.threads ? "blocking" : "jobs");
    return s;
}

/* One rank's outcome. */
struct Outcome {
    int rc = -100;
    std::string why;
    bool freed_idle = true; /* gw_ce_ring_free found nothing in flight */
};

/* Every rank's blocking call on a thread of its own; the outcomes are
 * checked after the threads end (Catch2's assertions are not thread-safe). */
std::vector<Outcome> run_blocking(const std::vector<gw_ce_transport_t> &tps,
                                  const std::vector<gw_ce_ring_call_t> &calls)
{
    const int n = static_cast<int>(calls.size());
    std::vector<Outcome> out(n);
    std::vector<std::thread> ts;
    for (int r = 0; r < n; ++r) {
        ts.emplace_back([&, r] {
            char why[256] = "";
            out[r].rc = gw_ce_ring_run(&calls[r], &tps[r], why, sizeof(why));
            out[r].why = why;
        });
    }
    for (auto &t : ts) t.join();
    return out;
}

/* Every rank's job, started in rank order and polled in turn from this
 * thread until all are done (deterministic: what the GPU has not finished
 * has not landed), or one fails, or they stop moving. Every job is freed. */
std::vector<Outcome> run_jobs(const std::vector<gw_ce_transport_t> &tps,
                              const std::vector<gw_ce_ring_call_t> &calls)
{
    const int n = static_cast<int>(calls.size());
    std::vector<Outcome> out(n);
    std::vector<gw_ce_ring_job_t *> jobs(n, nullptr);
    std::vector<bool> done(n, false);
    char why[256] = "";
    bool failed = false;
    for (int r = 0; r < n && !failed; ++r) {
        why[0] = '\0';
        out[r].rc = gw_ce_ring_start(&calls[r], &tps[r], &jobs[r], why, sizeof(why));
        out[r].why = why;
        failed = GW_CE_OK != out[r].rc;
    }
    int left = failed ? 0 : n;
    for (long polls = 0; left > 0; ++polls) {
        if (polls == 100000) {
            for (int r = 0; r < n; ++r) {
                if (!done[r]) out[r] = {GW_CE_ERR, "still not done after 100000 polls (a hang)"};
            }
            break;
        }
        for (int r = 0; r < n && left > 0; ++r) {
            if (done[r]) continue;
            bool d = false;
            why[0] = '\0';
            out[r].rc = gw_ce_ring_poll(jobs[r], 0 == polls % 64, &d, why, sizeof(why));
            out[r].why = why;
            if (GW_CE_OK != out[r].rc) left = 0;
            if (d) {
                done[r] = true;
                --left;
            }
        }
    }
    for (int r = 0; r < n; ++r) out[r].freed_idle = gw_ce_ring_free(jobs[r]);
    return out;
}

/* The messages the ring sends, all ranks together, as the blocking ring of
 * coll gpuwire sent them: one per segment of every chunk each step passes
 * on. A step posted twice, or one left out, shows here. */
long expected_sends(const Case &c, const std::vector<int> &counts, size_t es)
{
    const int n = c.n;
    if (1 == n) return 0;
    const size_t seg = std::max<size_t>(1, c.segment_bytes / es);
    auto segs = [seg](size_t k) { return static_cast<long>((k + seg - 1) / seg); };
    auto mod = [n](int x) { return ((x % n) + n) % n; };
    if (GW_CE_RING_SCAN == c.coll || GW_CE_RING_EXSCAN == c.coll) return (n - 1) * segs(c.count);
    const bool rs = GW_CE_RING_REDUCE_SCATTER == c.coll;
    std::vector<size_t> cnt(n);
    for (int i = 0; i < n; ++i) {
        cnt[i] = rs ? static_cast<size_t>(counts[i])
                    : c.count / n + (static_cast<size_t>(i) < c.count % n ? 1 : 0);
    }
    const int shift = rs ? -1 : 0;
    long k = 0;
    for (int me = 0; me < n; ++me) {
        for (int step = 0; step < n - 1; ++step) {
            k += segs(cnt[mod(me - step + shift)]); /* the reduce-scatter */
            if (GW_CE_RING_ALLREDUCE == c.coll) k += segs(cnt[mod(me + 1 - step)]);
        }
        if (GW_CE_RING_REDUCE == c.coll && me != c.root) k += segs(cnt[mod(me + 1)]);
    }
    return k;
}

/* Runs one call on every rank and checks every rank's status and result,
 * the messages sent, and that nothing was left behind. */
void run_case(const Case &c)
{
    INFO(describe(c));
    const int n = c.n;
    const size_t es = gw_reduce_type_size(c.tc.type);
    const bool rs = GW_CE_RING_REDUCE_SCATTER == c.coll;
    std::vector<int> counts(n);
    size_t total = c.count;
    if (rs) {
        total = 0;
        for (int r = 0; r < n; ++r) {
            counts[r] = c.vcounts ? static_cast<int>((c.count + 2 * r) % 5) : static_cast<int>(c.count);
            total += counts[r];
        }
    }
    std::vector<std::vector<char>> in(n);
    for (int r = 0; r < n; ++r) in[r] = input(c.tc, total, r);
    /* rbuf holds the input in place; its bytes beyond the result, and a
     * result a rank must not write, keep this pattern. */
    const char guard = 0x3C;
    std::vector<std::unique_ptr<DevBuf>> sbuf(n), rbuf(n);
    for (int r = 0; r < n; ++r) {
        sbuf[r] = std::make_unique<DevBuf>(total * es + 1);
        rbuf[r] = std::make_unique<DevBuf>(total * es + 1);
        std::memset(rbuf[r]->p(), guard, total * es + 1);
        std::memcpy(c.in_place ? rbuf[r]->p() : sbuf[r]->p(), in[r].data(), total * es);
    }
    const int mappings = device_mappings();

    gwtest::MemWorld w(n);
    std::vector<gw_ce_transport_t> tps(n);
    std::vector<gw_ce_ring_call_t> calls(n);
    for (int r = 0; r < n; ++r) {
        tps[r] = w.transport(r);
        tps[r].progress = &yield_progress;
        gw_ce_ring_call_t &d = calls[r];
        d.coll = c.coll;
        d.op = c.tc.op;
        d.type = c.tc.type;
        d.es = es;
        d.count = c.count;
        d.counts = rs && c.vcounts ? counts.data() : nullptr;
        d.sbuf = c.in_place ? nullptr : sbuf[r]->p();
        d.rbuf = rbuf[r]->p();
        d.in_place = c.in_place;
        d.root = c.root;
        d.gpu = 0;
        d.segment_bytes = c.segment_bytes;
        d.tag = -5;
    }
    const std::vector<Outcome> outs = c.threads ? run_blocking(tps, calls) : run_jobs(tps, calls);
    for (int r = 0; r < n; ++r) {
        INFO("rank " << r << ": " << outs[r].why);
        REQUIRE(GW_CE_OK == outs[r].rc);
        CHECK(outs[r].freed_idle);
    }
    CHECK(0 == w.leaks());
    CHECK(0 == w.unreceived());
    CHECK(expected_sends(c, counts, es) == w.sends());
    CHECK(mappings == device_mappings());

    /* What each rank must hold: [lo, lo + len) of ref at rbuf. */
    for (int r = 0; r < n; ++r) {
        INFO("rank " << r);
        std::vector<char> want;
        switch (c.coll) {
        case GW_CE_RING_ALLREDUCE: want = fold(c.tc, in, 0, n); break;
        case GW_CE_RING_REDUCE:
            if (r == c.root) want = fold(c.tc, in, 0, n);
            break;
        case GW_CE_RING_REDUCE_SCATTER: {
            const std::vector<char> all = fold(c.tc, in, 0, n);
            size_t off = 0;
            for (int q = 0; q < r; ++q) off += counts[q];
            want.assign(all.begin() + off * es, all.begin() + (off + counts[r]) * es);
            break;
        }
        case GW_CE_RING_SCAN: want = fold(c.tc, in, 0, r + 1); break;
        case GW_CE_RING_EXSCAN:
            if (r > 0) want = fold(c.tc, in, 0, r);
            break;
        }
        const char *got = rbuf[r]->p();
        /* Bytes not written keep the guard, or the input in place. */
        std::vector<char> rest(total * es + 1, guard);
        if (c.in_place) std::memcpy(rest.data(), in[r].data(), total * es);
        std::memcpy(rest.data(), want.data(), want.size());
        CHECK(0 == std::memcmp(got, rest.data(), rest.size()));
    }
}

const gw_ce_ring_coll_t kColls[] = {GW_CE_RING_ALLREDUCE, GW_CE_RING_REDUCE,
                                    GW_CE_RING_REDUCE_SCATTER, GW_CE_RING_SCAN,
                                    GW_CE_RING_EXSCAN};

} // namespace

/* Each case costs several reads of /proc/self/maps per copy (the simulated
 * GPU classifies memory so): the matrix is kept to what varies the ring's
 * paths -- counts below the number of ranks (empty chunks), segments that
 * divide nothing evenly, the first and the last root. */
TEST_CASE("the ring reduces bit-exactly for 1..5 ranks, every collective", "[coll][ring]")
{
    /* Segments of 3 elements plus one byte (not a whole element) divide
     * none of 1, 3, 37; 1 MiB is one segment per chunk. */
    const size_t counts[] = {0, 1, 3, 37};
    for (int n = 1; n <= 5; ++n) {
        for (gw_ce_ring_coll_t coll : kColls) {
            for (size_t count : counts) {
                for (int variant = 0; variant < 4; ++variant) {
                    const bool in_place = variant & 1, threads = variant & 2;
                    const TypeCase &tc = kTypes[(n + count + variant) % 4];
                    const size_t es = gw_reduce_type_size(tc.type);
                    for (size_t seg : {3 * es + 1, size_t{1} << 20}) {
                        const int roots[] = {0, n - 1};
                        const int nroots = GW_CE_RING_REDUCE == coll && n > 1 ? 2 : 1;
                        for (int ri = 0; ri < nroots; ++ri) {
                            /* Reduce_scatter: blocks of count, and of
                             * counts per rank (some 0). */
                            for (int v = 0; v < (GW_CE_RING_REDUCE_SCATTER == coll ? 2 : 1); ++v) {
                                run_case({coll, tc, n, count, 1 == v, in_place, roots[ri], seg,
                                          threads});
                            }
                        }
                    }
                }
            }
        }
    }
}

TEST_CASE("every type case runs every collective at 4 ranks", "[coll][ring]")
{
    for (const TypeCase &tc : kTypes) {
        for (gw_ce_ring_coll_t coll : kColls) {
            const size_t es = gw_reduce_type_size(tc.type);
            run_case({coll, tc, 4, 29, false, false, 2, 2 * es, false});
            run_case({coll, tc, 4, 29, true, true, 1, 5 * es, true});
        }
    }
}

/* A step with nothing to receive and no kernel (an empty chunk: count 3 at
 * 4 ranks, or a block of 0 elements) is done as soon as its sends are out,
 * possibly while the job starts: it must then not be posted a second time,
 * or its sends meet the next step's receives. */
TEST_CASE("a step that ends while its job starts is sent once", "[coll][ring]")
{
    for (bool threads : {false, true}) {
        for (int root = 0; root < 4; ++root) {
            run_case({GW_CE_RING_REDUCE, kInt32Sum, 4, 3, false, false, root, 1 << 20, threads});
        }
        run_case({GW_CE_RING_ALLREDUCE, kInt32Sum, 4, 3, false, true, 0, 1 << 20, threads});
        for (bool in_place : {false, true}) {
            run_case({GW_CE_RING_REDUCE_SCATTER, kInt32Sum, 4, 29, true, in_place, 0, 20, threads});
        }
    }
}

/* The simulated GPU moves a kernel's bytes only after several polls of its
 * ticket: a step that sent what the step before computed without waiting
 * for that kernel's ticket would send the scratch's garbage (or rbuf's old
 * bytes), and the chain would pass on a prefix not combined yet. Many small
 * segments, every rank's job polled in turn, so that nothing lands early. */
TEST_CASE("a kernel's result is sent only once its ticket is reached", "[coll][ring]")
{
    for (gw_ce_ring_coll_t coll : kColls) {
        run_case({coll, kInt32Sum, 3, 64, false, false, 1, 4 * 4, false});
    }
}

TEST_CASE("the ring refuses a call it cannot run, in one line", "[coll][ring]")
{
    gwtest::MemWorld w(2);
    gw_ce_ring_call_t d{};
    d.coll = GW_CE_RING_REDUCE;
    d.op = GW_OP_SUM;
    d.type = GW_TYPE_INT32;
    d.es = 4;
    d.root = 2;
    d.segment_bytes = 64;
    char why[256] = "";
    gw_ce_ring_job_t *job = reinterpret_cast<gw_ce_ring_job_t *>(&d);
    CHECK(GW_CE_ERR_ARG == gw_ce_ring_start(&d, &w.transport(0), &job, why, sizeof(why)));
    CHECK(nullptr == job);
    CHECK(std::string(why).find("root 2") != std::string::npos);
    d.root = 0;
    d.op = GW_OP_MINLOC; /* not on INT32 */
    CHECK(GW_CE_ERR_ARG == gw_ce_ring_run(&d, &w.transport(0), why, sizeof(why)));
    CHECK(std::string(why).find("no kernel") != std::string::npos);
    CHECK(0 == w.leaks());
}
