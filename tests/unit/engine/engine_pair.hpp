// Two engines in one process that talk over UCX (shared memory or TCP): the
// fixture of the engine's tests without MPI.
#pragma once

#include "gw_catch.hpp"

#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>

#include "gpuwire/engine.h"

// An engine request whose completion sets done (single-threaded tests).
struct Req {
    gw_request_t r{};
    bool done = false;
    Req()
    {
        r.complete_cb = [](gw_request_t *g) { reinterpret_cast<Req *>(g)->done = true; };
    }
};
static_assert(offsetof(Req, r) == 0);

struct EnginePair {
    gw_engine_t *e[2] = {nullptr, nullptr};
    const void *addr[2] = {nullptr, nullptr};
    size_t len[2] = {0, 0};

    static int resolve(void *ctx, uint32_t peer, const void **a, size_t *l)
    {
        auto *p = static_cast<EnginePair *>(ctx);
        if (peer > 1 || !p->addr[peer]) return -1;
        *a = p->addr[peer];
        *l = p->len[peer];
        return 0;
    }

    explicit EnginePair(size_t rndv_threshold = 0, bool thread_multiple = false,
                        const std::function<void(gw_engine_params_t &)> &tweak = {})
    {
        for (uint32_t i = 0; i < 2; ++i) {
            gw_engine_params_t p;
            gw_engine_params_init(&p);
            p.my_peer = i;
            p.npeers = 2;
            p.thread_multiple = thread_multiple ? 1 : 0;
            p.resolve_peer = &EnginePair::resolve;
            p.resolve_ctx = this;
            p.rndv_threshold = rndv_threshold;
            if (tweak) tweak(p);
            char why[256] = "";
            gw_status_t st = gw_engine_create(&p, &e[i], why, sizeof(why));
            INFO(why);
            REQUIRE(st == GW_OK);
            gw_engine_address(e[i], &addr[i], &len[i]);
        }
    }
    ~EnginePair()
    {
        for (auto *x : e)
            if (x) gw_engine_disconnect(x);
        for (auto *x : e)
            if (x) gw_engine_destroy(x);
    }
    // Engine i goes away: its endpoints close and its worker is destroyed,
    // while a thread keeps the other engine progressing (the close of an
    // endpoint waits for the peer's side). The other engine then sees its
    // endpoint fail, as when a process is killed. The pair must be made with
    // thread_multiple: a UCX built with assertions (Debian's 1.18) aborts when
    // a single-threaded worker is progressed by a thread that does not own it.
    void kill(int i)
    {
        std::atomic<bool> stop{false};
        gw_engine_t *other = e[1 - i];
        std::thread t([&] {
            while (!stop.load()) gw_engine_progress(other);
        });
        gw_engine_destroy(e[i]);
        e[i] = nullptr;
        stop = true;
        t.join();
    }
    EnginePair(const EnginePair &) = delete;
    EnginePair &operator=(const EnginePair &) = delete;

    void progress()
    {
        for (auto *x : e)
            if (x) gw_engine_progress(x);
    }
    // Progresses until pred() holds; fails the test after many rounds.
    void until(const std::function<bool()> &pred)
    {
        for (long i = 0; i < 20000000 && !pred(); ++i) progress();
        REQUIRE(pred());
    }
};
