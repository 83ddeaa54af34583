// Cross-memory attach (gpuwire/osc.h, ucx_glue/osc/cma), on this process
// itself: the kernel's copies between address spaces work on one too.
#include "gw_catch.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpuwire/osc.h"

namespace {

uint64_t addr(const void *p) { return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p)); }

// A page that is mapped no more: any copy from or to it fails.
void *gone_page()
{
    void *p = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    REQUIRE(0 == munmap(p, 4096));
    return p;
}

}  // namespace

TEST_CASE("cross-memory attach: put and get of many pages, failures named", "[osc][cma]")
{
    char why[256] = "";
    const int self = static_cast<int>(getpid());
    int here = 5;
    if (gw_osc_cma_probe(self, addr(&here), why, sizeof(why)) != 0) {
        // A seccomp profile or Yama may forbid it: then the component keeps
        // the message path, and the probe must say why.
        CHECK(std::string(why).find("process_vm_readv") == 0);
        WARN("cross-memory attach not allowed here: " << why);
        return;
    }
    // More than the kernel moves in one call at worst, not page-aligned.
    const size_t n = (3u << 20) + 123;
    std::vector<char> src(n), window(n + 64, 0), back(n, 0);
    for (size_t i = 0; i < n; i++) src[i] = static_cast<char>(i * 7 + 1);
    const std::vector<char> expect = src;
    REQUIRE(0 == gw_osc_cma_copy(self, true, src.data(), addr(window.data() + 17), n, why,
                                 sizeof(why)));
    CHECK(std::memcmp(window.data() + 17, expect.data(), n) == 0);
    CHECK(std::memcmp(src.data(), expect.data(), n) == 0);  // a put only reads the local side
    CHECK(window[16] == 0);
    CHECK(window[17 + n] == 0);
    REQUIRE(0 == gw_osc_cma_copy(self, false, back.data(), addr(window.data() + 17), n, why,
                                 sizeof(why)));
    CHECK(std::memcmp(back.data(), expect.data(), n) == 0);
    CHECK(std::memcmp(window.data() + 17, expect.data(), n) == 0);
    CHECK(0 == gw_osc_cma_copy(self, true, src.data(), addr(window.data()), 0, why, sizeof(why)));

    void *gone = gone_page();
    CHECK(-1 == gw_osc_cma_probe(self, addr(gone), why, sizeof(why)));
    CHECK(std::string(why).find("process_vm_readv: ") == 0);
    CHECK(-1 == gw_osc_cma_copy(self, true, src.data(), addr(gone), 64, why, sizeof(why)));
    CHECK(std::string(why).find("process_vm_writev of 64 bytes to process") == 0);
    CHECK(-1 == gw_osc_cma_copy(self, false, back.data(), addr(gone), 64, why, sizeof(why)));
    CHECK(std::string(why).find("process_vm_readv of 64 bytes from process") == 0);
}

TEST_CASE("cross-memory attach: a process that is gone", "[osc][cma]")
{
    char why[256] = "";
    int here = 5;
    // Beyond the largest pid Linux hands out (4194304).
    CHECK(-1 == gw_osc_cma_probe(1 << 23, addr(&here), why, sizeof(why)));
    CHECK(std::string(why).find("process_vm_readv: ") == 0);
}
