// The one path decision (engine/protocol.hpp): memory kind x locality x size.
#include "gw_catch.hpp"

#include "engine/protocol.hpp"

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
