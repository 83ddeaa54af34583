// Passive-target locks in shared memory (gpuwire/osc.h, ucx_glue/osc/lockword):
// the word's states, a rank's word mapped twice (as a peer on its node
// would), the target taking the same word for requests by message, and the
// origin's epochs on targets whose word it maps.
#include "gw_catch.hpp"

#include <sys/mman.h>

#include <cerrno>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "fake_window.hpp"

using gwtest::Ctl;
using gwtest::FakeWindow;

namespace {

constexpr int kExcl = GW_OSC_LOCK_EXCLUSIVE;
constexpr int kShared = GW_OSC_LOCK_SHARED;

bool name_exists(uint64_t id)
{
    char name[64];
    std::snprintf(name, sizeof(name), "/gwosc.%u.%u", static_cast<unsigned>(id >> 32),
                  static_cast<unsigned>(id & 0xffffffffu));
    int fd = shm_open(name, O_RDONLY, 0);
    if (fd >= 0) close(fd);
    return fd >= 0;
}

}  // namespace

TEST_CASE("a lock word: exclusive alone, shared together", "[osc][lockword]")
{
    int w = 0;
    CHECK(gw_osc_lock_try(&w, kShared));
    CHECK(gw_osc_lock_try(&w, kShared));
    CHECK(w == 2);
    CHECK_FALSE(gw_osc_lock_try(&w, kExcl));
    gw_osc_lock_release(&w);
    gw_osc_lock_release(&w);
    CHECK(w == 0);
    CHECK(gw_osc_lock_try(&w, kExcl));
    CHECK(w == -1);
    CHECK_FALSE(gw_osc_lock_try(&w, kExcl));
    CHECK_FALSE(gw_osc_lock_try(&w, kShared));
    gw_osc_lock_release(&w);
    CHECK(w == 0);
}

TEST_CASE("a rank's word is one word for every rank that maps it", "[osc][lockword]")
{
    // Rank 1 of 3 makes its word; rank 0 (the same process here) maps it
    // from the id, as a peer on the node does after the exchange.
    gw_osc_lockwords_t *own = nullptr, *peer = nullptr;
    uint64_t id = 0, id0 = 0;
    char why[256] = "";
    REQUIRE(0 == gw_osc_lockwords_create(3, 1, 0, true, &own, &id, why, sizeof(why)));
    INFO(why);
    REQUIRE(id != 0);
    REQUIRE(0 == gw_osc_lockwords_create(3, 0, 0, true, &peer, &id0, why, sizeof(why)));
    CHECK(id0 != id);
    gw_osc_lockwords_close(peer);
    CHECK_FALSE(name_exists(id0));  // closed before it was unlinked: the name goes too
    CHECK(GW_OSC_ERR_RANGE ==
          gw_osc_lockwords_create(3, 3, 0, true, &peer, &id0, why, sizeof(why)));
    CHECK(peer == nullptr);
    REQUIRE(0 == gw_osc_lockwords_create(3, 0, 0, true, &peer, &id0, why, sizeof(why)));
    REQUIRE(0 == gw_osc_lockwords_open(peer, 1, id, 0, true, why, sizeof(why)));
    CHECK(0 == gw_osc_lockwords_open(peer, 2, 0, 0, true, why, sizeof(why)));  // none: messages
    CHECK(GW_OSC_ERR_RANGE == gw_osc_lockwords_open(peer, 3, id, 0, true, why, sizeof(why)));
    int **mine = gw_osc_lockwords_table(own);
    int **theirs = gw_osc_lockwords_table(peer);
    REQUIRE(mine[1] != nullptr);
    CHECK(mine[0] == nullptr);
    REQUIRE(theirs[1] != nullptr);
    CHECK(theirs[1] != mine[1]);  // two mappings
    CHECK(theirs[0] != nullptr);  // rank 0's own
    CHECK(theirs[2] == nullptr);
    CHECK(*mine[1] == 0);
    CHECK(gw_osc_lock_try(theirs[1], kExcl));
    CHECK(*mine[1] == -1);
    CHECK_FALSE(gw_osc_lock_try(mine[1], kShared));
    gw_osc_lock_release(theirs[1]);
    CHECK(gw_osc_lock_try(mine[1], kShared));
    CHECK(*theirs[1] == 1);
    gw_osc_lock_release(mine[1]);

    // The name goes once every peer has mapped it; the mappings stay.
    CHECK(name_exists(id));
    gw_osc_lockwords_unlink(own);
    CHECK_FALSE(name_exists(id));
    char why2[256] = "";
    gw_osc_lockwords_t *late = nullptr;
    uint64_t id2 = 0;
    REQUIRE(0 == gw_osc_lockwords_create(3, 2, 0, true, &late, &id2, why2, sizeof(why2)));
    CHECK(-1 == gw_osc_lockwords_open(late, 1, id, 0, true, why2, sizeof(why2)));
    CHECK(std::string(why2).find("shm_open") != std::string::npos);
    CHECK(gw_osc_lock_try(theirs[1], kShared));
    CHECK(*mine[1] == 1);
    gw_osc_lockwords_close(late);
    gw_osc_lockwords_close(peer);
    gw_osc_lockwords_close(own);
    gw_osc_lockwords_close(nullptr);
}

TEST_CASE("the target takes its word for requests by message", "[osc][lockword]")
{
    FakeWindow w(3);
    int word = 0;
    w.s.lock_word = &word;
    // A same-node origin holds the word exclusively: a request by message
    // waits, and is granted when the target polls after the release.
    REQUIRE(gw_osc_lock_try(&word, kExcl));
    REQUIRE(0 == w.deliver(2, GW_OSC_LOCK, kShared));
    CHECK(w.take().empty());
    CHECK(w.s.nwaiters == 1);
    gw_osc_sync_grant_waiters(&w.s);
    CHECK(w.take().empty());
    gw_osc_lock_release(&word);
    gw_osc_sync_grant_waiters(&w.s);
    CHECK(w.take() == std::vector<Ctl>{Ctl{2, GW_OSC_GRANT, 0, 0}});
    CHECK(word == 1);
    CHECK(w.s.lock_state == 0);  // the word, not the private state
    // Beside it, a same-node origin takes it shared; not exclusively.
    CHECK(gw_osc_lock_try(&word, kShared));
    CHECK_FALSE(gw_osc_lock_try(&word, kExcl));
    gw_osc_lock_release(&word);
    // The unlock by message releases the word.
    REQUIRE(0 == w.deliver(2, GW_OSC_UNLOCK, 1, 0));
    CHECK(w.take() == std::vector<Ctl>{Ctl{2, GW_OSC_ACK, 1, 0}});
    CHECK(word == 0);
}

TEST_CASE("origin: a target whose word is mapped is locked without a message",
          "[osc][lockword]")
{
    FakeWindow w(3);
    int word1 = 0;
    std::vector<int *> words = {nullptr, &word1, nullptr};
    w.s.words = words.data();
    REQUIRE(0 == gw_osc_sync_lock(&w.s, kExcl, 1, true));
    CHECK(w.take().empty());
    CHECK(w.s.locked[1] == (1 | 4 | 8));
    CHECK(gw_osc_sync_in_word(&w.s, 1));
    CHECK_FALSE(gw_osc_sync_in_word(&w.s, 0));
    CHECK_FALSE(gw_osc_sync_in_word(&w.s, 7));
    // Nothing went as a message: the word is released at once (no unlock
    // message, none owed). With operations sent, a flush asks for their
    // acknowledgement first.
    CHECK(0 == gw_osc_sync_unlock_send(&w.s, 1));
    CHECK(w.take().empty());
    w.s.sent[1] = 2;
    CHECK(2 == gw_osc_sync_unlock_send(&w.s, 1));
    CHECK(w.take() == std::vector<Ctl>{Ctl{1, GW_OSC_FLUSH, 0, 2}});
    CHECK(w.s.unlocks_sent[1] == 0);
    gw_osc_sync_unlocked(&w.s, 1, false);
    // MPI_MODE_NOCHECK takes nothing.
    REQUIRE(0 == gw_osc_sync_lock(&w.s, kShared, 1, false));
    CHECK(w.s.locked[1] == 2);
    gw_osc_sync_unlocked(&w.s, 1, false);
    // lock_all: words where mapped, requests elsewhere.
    REQUIRE(0 == gw_osc_sync_lock_all(&w.s, true));
    CHECK(w.take() == std::vector<Ctl>{Ctl{0, GW_OSC_LOCK, kShared, 0},
                                       Ctl{2, GW_OSC_LOCK, kShared, 0}});
    CHECK(w.s.locked[1] == (2 | 4 | 8));
    CHECK(w.s.locked[2] == (2 | 4));
    w.s.words = nullptr;
}

TEST_CASE("a window's bytes after the word: one memory for every rank that maps it",
          "[osc][lockword]")
{
    // Rank 0 of 2 makes its segment with 3 pages and 5 bytes of window and
    // no lock word (osc_gpuwire_lock_word 0); rank 1 maps it.
    const uint64_t bytes = 3 * 4096 + 5;
    gw_osc_lockwords_t *own = nullptr, *peer = nullptr;
    uint64_t id = 0, id1 = 0;
    char why[256] = "";
    REQUIRE(0 == gw_osc_lockwords_create(2, 0, bytes, false, &own, &id, why, sizeof(why)));
    INFO(why);
    REQUIRE(id != 0);
    auto *mine = static_cast<unsigned char *>(gw_osc_lockwords_data(own, 0));
    REQUIRE(mine != nullptr);
    CHECK(reinterpret_cast<uintptr_t>(mine) % 4096 == 0);
    CHECK(gw_osc_lockwords_table(own)[0] == nullptr);  // no lock word taken in it
    CHECK(gw_osc_lockwords_data(own, 1) == nullptr);
    CHECK(gw_osc_lockwords_data(own, 2) == nullptr);
    CHECK(gw_osc_lockwords_data(nullptr, 0) == nullptr);
    CHECK(mine[bytes - 1] == 0);  // zeroed, touchable to its end
    mine[bytes - 1] = 0xab;

    REQUIRE(0 == gw_osc_lockwords_create(2, 1, 0, true, &peer, &id1, why, sizeof(why)));
    CHECK(gw_osc_lockwords_data(peer, 1) == nullptr);  // a word alone
    // Asking for more window than the segment holds: refused, named.
    CHECK(-1 == gw_osc_lockwords_open(peer, 0, id, bytes + 4096, false, why, sizeof(why)));
    CHECK(std::string(why).find("smaller than its window") != std::string::npos);
    REQUIRE(0 == gw_osc_lockwords_open(peer, 0, id, bytes, false, why, sizeof(why)));
    auto *theirs = static_cast<unsigned char *>(gw_osc_lockwords_data(peer, 0));
    REQUIRE(theirs != nullptr);
    CHECK(theirs != mine);
    CHECK(theirs[bytes - 1] == 0xab);
    theirs[0] = 7;
    CHECK(mine[0] == 7);
    CHECK(gw_osc_lockwords_table(peer)[0] == nullptr);
    gw_osc_lockwords_unlink(own);
    CHECK_FALSE(name_exists(id));
    CHECK(theirs[bytes - 1] == 0xab);  // the mappings outlive the name
    gw_osc_lockwords_close(peer);
    gw_osc_lockwords_close(own);
}

TEST_CASE("a window larger than /dev/shm has free gets no segment, and says why",
          "[osc][lockword]")
{
    gw_osc_lockwords_t *l = nullptr;
    uint64_t id = 1;
    char why[256] = "";
    REQUIRE(0 == gw_osc_lockwords_create(2, 0, uint64_t{1} << 50, true, &l, &id, why,
                                         sizeof(why)));
    REQUIRE(l != nullptr);
    CHECK(id == 0);  // none: the window is private memory, the locks go by message
    CHECK(std::string(why).find("bytes free in /dev/shm") != std::string::npos);
    CHECK(gw_osc_lockwords_data(l, 0) == nullptr);
    CHECK(gw_osc_lockwords_table(l)[0] == nullptr);
    gw_osc_lockwords_close(l);
}

TEST_CASE("fence counts: a barrier of the ranks whose segments are all mapped",
          "[osc][lockword][fence]")
{
    // Two ranks, each in its own table (as in two processes), each mapping
    // the other's segment from its id.
    gw_osc_lockwords_t *a = nullptr, *b = nullptr;
    uint64_t ida = 0, idb = 0;
    char why[256] = "";
    REQUIRE(0 == gw_osc_lockwords_create(2, 0, 0, true, &a, &ida, why, sizeof(why)));
    REQUIRE(0 == gw_osc_lockwords_create(2, 1, 4096, false, &b, &idb, why, sizeof(why)));
    REQUIRE(ida != 0);
    REQUIRE(idb != 0);
    // Not every segment mapped: no barrier by counts.
    CHECK_FALSE(gw_osc_fence_ready(a, 2));
    CHECK(gw_osc_fence_ready(a, 1));
    CHECK_FALSE(gw_osc_fence_reached(a, 2, 1));
    CHECK(gw_osc_fence_arrive(a, 1) == 0);  // rank 1's segment is not mapped in a
    REQUIRE(0 == gw_osc_lockwords_open(a, 1, idb, 4096, true, why, sizeof(why)));
    REQUIRE(0 == gw_osc_lockwords_open(b, 0, ida, 0, true, why, sizeof(why)));
    CHECK(gw_osc_fence_ready(a, 2));
    CHECK(gw_osc_fence_ready(b, 2));
    CHECK_FALSE(gw_osc_fence_ready(a, 3));
    CHECK_FALSE(gw_osc_fence_ready(nullptr, 2));
    CHECK(gw_osc_fence_arrive(nullptr, 0) == 0);
    CHECK_FALSE(gw_osc_fence_reached(a, 2, 0));

    // One fence by hand: rank 0 alone arrived is not enough.
    const uint64_t want = gw_osc_fence_arrive(a, 0);
    CHECK(want == 1);
    CHECK_FALSE(gw_osc_fence_reached(a, 2, want));
    CHECK(gw_osc_fence_arrive(b, 1) == 1);
    CHECK(gw_osc_fence_reached(a, 2, want));
    CHECK(gw_osc_fence_reached(b, 2, want));

    // Many fences from two threads: none leaves fence i before the other
    // has entered it, and what one wrote before a fence the other reads
    // after it.
    constexpr int kFences = 20000;
    volatile int entered[2] = {0, 0};
    int64_t *data = static_cast<int64_t *>(gw_osc_lockwords_data(a, 1));
    REQUIRE(data != nullptr);
    int early[2] = {0, 0}, stale[2] = {0, 0};
    auto run = [&](gw_osc_lockwords_t *l, int me) {
        int64_t *mine = me == 1 ? static_cast<int64_t *>(gw_osc_lockwords_data(l, 1)) : data;
        for (int i = 1; i <= kFences; i++) {
            mine[me] = i;  // a plain store into the shared window
            entered[me] = i;
            const uint64_t w = gw_osc_fence_arrive(l, me);
            while (!gw_osc_fence_reached(l, 2, w)) {
            }
            if (entered[1 - me] < i) early[me]++;
            if (__atomic_load_n(&mine[1 - me], __ATOMIC_RELAXED) < i) stale[me]++;
        }
    };
    std::thread ta(run, a, 0), tb(run, b, 1);
    ta.join();
    tb.join();
    CHECK(early[0] == 0);
    CHECK(early[1] == 0);
    CHECK(stale[0] == 0);
    CHECK(stale[1] == 0);
    gw_osc_lockwords_close(a);
    gw_osc_lockwords_close(b);
}
