// What the tests of the one-sided engine's GPU door and direct path share
// (test_device_door.cpp, test_direct.cpp): the fake device opened through the
// engine, the lines it logged, which ranks share the node, a rank's window.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fake_gpu.hpp"
#include "gpuwire/osc_direct.h"
#include "gw_catch.hpp"

namespace osctest {

using gwtest::FakeGpu;

inline std::vector<std::pair<int, std::string>> lines;  // (verbosity, line) the engine logged

inline void capture(int verbosity, const char *msg) { lines.emplace_back(verbosity, msg); }

inline bool logged(int verbosity, const std::string &text)
{
    for (const auto &l : lines) {
        if (l.first == verbosity && l.second == text) return true;
    }
    return false;
}

// The fake device opened through the engine, closed at the end.
struct Opened {
    FakeGpu g;
    Opened()
    {
        lines.clear();
        gw_osc_log_set(capture);
        char why[64];
        REQUIRE(gw_osc_dev_open(why, sizeof(why)) == 2);
    }
    ~Opened()
    {
        gw_osc_dev_close();
        gw_osc_log_set(nullptr);
    }
};

// Which ranks share this node (peer ids 100 + rank).
struct Peers {
    std::vector<bool> local;
    static bool on_node(void *ctx, int t, uint32_t *id)
    {
        *id = 100 + static_cast<uint32_t>(t);
        return static_cast<Peers *>(ctx)->local[static_cast<size_t>(t)];
    }
};

inline gw_osc_win_self_t self_of(int rank, void *base, uint64_t size, int gpu, int disp_unit = 1)
{
    return gw_osc_win_self_t{rank, static_cast<char *>(base), size, disp_unit, gpu};
}

inline gw_osc_win_desc_t describe(const gw_osc_win_self_t &s, bool enabled = true)
{
    gw_osc_win_desc_t d;
    gw_osc_direct_describe(enabled, &s, &d);
    return d;
}

}  // namespace osctest
