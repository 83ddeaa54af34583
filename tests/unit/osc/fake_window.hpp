// A stand-in for osc gpuwire around the one-sided engine (gpuwire/osc.h):
// the control messages it would send, recorded instead, and the operations
// and replies the engine hands back, recorded too.
#pragma once

#include <cstdint>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

#include "gpuwire/osc.h"

namespace gwtest {

struct Ctl {
    int peer;
    uint32_t kind;
    int aux;
    uint64_t count;
    bool operator==(const Ctl &o) const
    {
        return peer == o.peer && kind == o.kind && aux == o.aux && count == o.count;
    }
};

struct FakeWindow {
    gw_osc_sync_t s{};
    std::vector<Ctl> sent;
    std::vector<std::pair<int, uint32_t>> applied;  // (origin, kind)
    std::vector<uint64_t> replies;                  // reply ids
    int send_rc = 0;                                // what the next sends answer

    explicit FakeWindow(int size)
    {
        const gw_osc_sync_ops_t ops = {&FakeWindow::ctl, &FakeWindow::apply,
                                       &FakeWindow::reply, this};
        if (gw_osc_sync_init(&s, size, &ops) != 0) throw std::bad_alloc();
    }
    ~FakeWindow() { gw_osc_sync_fini(&s); }
    FakeWindow(const FakeWindow &) = delete;
    FakeWindow &operator=(const FakeWindow &) = delete;

    // A message as it arrives from peer.
    int deliver(int peer, uint32_t kind, int aux = 0, uint64_t count = 0)
    {
        gw_osc_hdr_t h{};
        h.kind = kind;
        h.aux = aux;
        h.count = count;
        return gw_osc_sync_handle(&s, peer, reinterpret_cast<const char *>(&h), sizeof(h));
    }
    // The control messages sent since the last call.
    std::vector<Ctl> take()
    {
        std::vector<Ctl> out;
        out.swap(sent);
        return out;
    }

    static int ctl(void *ctx, int peer, uint32_t kind, int aux, uint64_t count)
    {
        auto *w = static_cast<FakeWindow *>(ctx);
        w->sent.push_back(Ctl{peer, kind, aux, count});
        return w->send_rc;
    }
    static void apply(void *ctx, int origin, const gw_osc_hdr_t *h, const char *)
    {
        static_cast<FakeWindow *>(ctx)->applied.emplace_back(origin, h->kind);
    }
    static void reply(void *ctx, const gw_osc_hdr_t *h, const char *)
    {
        static_cast<FakeWindow *>(ctx)->replies.push_back(h->count);
    }
};

}  // namespace gwtest
