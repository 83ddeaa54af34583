// The one path decision (engine/protocol.hpp): memory kind x locality x size.
#include "gw_catch.hpp"

#include "engine/protocol.hpp"
#include "gpuwire/engine.h"

using namespace gpuwire::engine;

TEST_CASE("protocol: host memory and empty messages go as host data", "[protocol]")
{
    PathConfig c;
    c.ucx_has_cuda = true;
    CHECK(choose_protocol(SendTraits{false, false, true}, 1 << 20, c) == Protocol::host);
    CHECK(choose_protocol(SendTraits{true, true, true}, 0, c) == Protocol::host);
}

TEST_CASE("protocol: CUDA IPC on this node from the threshold on", "[protocol]")
{
    PathConfig c;
    c.ipc_threshold = 4096;
    const SendTraits local{true, true, true};
    CHECK(choose_protocol(local, 4096, c) == Protocol::ipc);
    CHECK(choose_protocol(local, 4095, c) == Protocol::staged);
    c.ipc_enabled = false;
    CHECK(choose_protocol(local, 1 << 20, c) == Protocol::staged);
    // Not exportable (stream-ordered pool, managed memory): staged.
    c.ipc_enabled = true;
    CHECK(choose_protocol(SendTraits{true, false, true}, 1 << 20, c) == Protocol::staged);
}

TEST_CASE("protocol: a UCX that moves CUDA memory gets device pointers for other nodes only",
          "[protocol]")
{
    PathConfig c;
    c.ucx_has_cuda = true;
    CHECK(choose_protocol(SendTraits{true, true, false}, 8, c) == Protocol::ucx_device);
    CHECK(choose_protocol(SendTraits{true, false, false}, 1 << 20, c) == Protocol::ucx_device);
    // On this node: CUDA IPC, else the staged paths (shared slots), never UCX's.
    CHECK(choose_protocol(SendTraits{true, true, true}, 1 << 20, c) == Protocol::ipc);
    c.ipc_enabled = false;
    CHECK(choose_protocol(SendTraits{true, true, true}, 1 << 20, c) == Protocol::staged);
    CHECK(choose_protocol(SendTraits{true, false, true}, 8, c) == Protocol::staged);
    c.ucx_has_cuda = false;
    CHECK(choose_protocol(SendTraits{true, true, false}, 1 << 20, c) == Protocol::staged);
}

TEST_CASE("protocol: a pinned host sender copies into a same-node receiver's GPU memory itself",
          "[protocol]")
{
    // The engine's defaults: a pinned sender pushes (one DMA per piece into
    // the receiver's mapped buffer, as a device message into pinned host
    // memory is copied out of the sender's mapping); a CPU copy into a slot
    // would run at a fifth of that. Pageable memory stays on the slots.
    gw_engine_params_t p;
    gw_engine_params_init(&p);
    const PushConfig d{p.shared_push != 0, p.push_pageable_min};
    CHECK(push_host_message(true, 32 << 10, d));
    CHECK(push_host_message(true, size_t{64} << 20, d));
    CHECK_FALSE(push_host_message(false, 1 << 20, d));
    CHECK_FALSE(push_host_message(false, size_t{64} << 20, d));
    // The engine's defaults are PushConfig's.
    CHECK(d.enabled == PushConfig{}.enabled);
    CHECK(d.pageable_min == PushConfig{}.pageable_min);

    // pml_gpuwire_push_pageable_min: large pageable messages too.
    const PushConfig pageable{true, size_t{2} << 20};
    CHECK_FALSE(push_host_message(false, (size_t{2} << 20) - 1, pageable));
    CHECK(push_host_message(false, size_t{2} << 20, pageable));
    CHECK(push_host_message(true, 4096, pageable));
    // pml_gpuwire_shared_push 0: every host message through the slots.
    const PushConfig off{false, size_t{2} << 20};
    CHECK_FALSE(push_host_message(true, 1 << 20, off));
    CHECK_FALSE(push_host_message(false, size_t{64} << 20, off));
}
