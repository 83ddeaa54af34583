// gw_host_buffer_alloc / gw_host_buffer_free: aligned, writable, and large
// buffers given back to the system at free (they must not stay resident).
#include "gw_catch.hpp"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "gpuwire/engine.h"

namespace {

long rss_kib()
{
    std::ifstream f("/proc/self/status");
    std::string line;
    while (std::getline(f, line)) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return -1;
}

} // namespace

TEST_CASE("host buffers are aligned and hold what is written", "[engine][host_buffer]")
{
    for (size_t n : {size_t{1}, size_t{100}, size_t{4096}, (size_t{128} << 10) - 1,
                     size_t{128} << 10, size_t{3} << 20}) {
        auto *p = static_cast<unsigned char *>(gw_host_buffer_alloc(n));
        REQUIRE(p != nullptr);
        CHECK(reinterpret_cast<uintptr_t>(p) % 64 == 0);
        std::memset(p, 0xA5, n);
        CHECK(p[0] == 0xA5);
        CHECK(p[n - 1] == 0xA5);
        gw_host_buffer_free(p);
    }
    gw_host_buffer_free(nullptr); // no effect
    CHECK(gw_host_buffer_alloc(SIZE_MAX - 8) == nullptr);
}

TEST_CASE("freed large host buffers leave the resident set", "[engine][host_buffer]")
{
    // Many rounds of 24 MiB buffers (below glibc's 32 MiB ceiling for its
    // dynamic mmap threshold), a small block kept live between them as the
    // application's memory would be: with malloc, the freed buffers would
    // come from the heap after the first round and stay resident.
    const long before = rss_kib();
    REQUIRE(before > 0);
    for (int round = 0; round < 8; ++round) {
        void *a = gw_host_buffer_alloc(size_t{24} << 20);
        void *b = gw_host_buffer_alloc(size_t{20} << 20);
        REQUIRE(a != nullptr);
        REQUIRE(b != nullptr);
        std::memset(a, 1, size_t{24} << 20);
        std::memset(b, 2, size_t{20} << 20);
        gw_host_buffer_free(a);
        gw_host_buffer_free(b);
    }
    const long after = rss_kib();
    CHECK(after - before < 8 * 1024); // well under one buffer
}
