// A window's synchronisation state (gpuwire/osc.h, ucx_glue/osc/sync): the
// target's lock and its queue, flush and unlock acknowledgements by counts,
// PSCW, the origin's epochs, and the handling of messages.
#include "gw_catch.hpp"

#include <vector>

#include "fake_window.hpp"

using gwtest::Ctl;
using gwtest::FakeWindow;

namespace {

constexpr int kExcl = GW_OSC_LOCK_EXCLUSIVE;
constexpr int kShared = GW_OSC_LOCK_SHARED;

Ctl grant(int peer) { return Ctl{peer, GW_OSC_GRANT, 0, 0}; }
Ctl ack(int peer, bool unlock, uint64_t count) { return Ctl{peer, GW_OSC_ACK, unlock, count}; }

}  // namespace

TEST_CASE("the target grants locks first come, first served", "[osc][sync]")
{
    FakeWindow w(4);
    REQUIRE(0 == w.deliver(1, GW_OSC_LOCK, kShared));
    CHECK(w.take() == std::vector<Ctl>{grant(1)});
    CHECK(w.s.lock_state == 1);
    // An exclusive request waits for the shared holder; a shared one behind
    // it waits too, although it would fit beside the holder.
    REQUIRE(0 == w.deliver(2, GW_OSC_LOCK, kExcl));
    REQUIRE(0 == w.deliver(3, GW_OSC_LOCK, kShared));
    CHECK(w.take().empty());
    CHECK(w.s.nwaiters == 2);
    // Rank 1 unlocks (aux 1: it held the lock) with nothing sent: the lock
    // goes to rank 2 alone, then the acknowledgement.
    REQUIRE(0 == w.deliver(1, GW_OSC_UNLOCK, 1, 0));
    CHECK(w.take() == std::vector<Ctl>{grant(2), ack(1, true, 0)});
    CHECK(w.s.lock_state == -1);
    CHECK(w.s.nwaiters == 1);
    REQUIRE(0 == w.deliver(2, GW_OSC_UNLOCK, 1, 0));
    CHECK(w.take() == std::vector<Ctl>{grant(3), ack(2, true, 0)});
    CHECK(w.s.lock_state == 1);
    CHECK(w.s.nwaiters == 0);
}

TEST_CASE("shared requests in the queue are granted together", "[osc][sync]")
{
    FakeWindow w(4);
    REQUIRE(0 == w.deliver(0, GW_OSC_LOCK, kExcl));
    REQUIRE(0 == w.deliver(1, GW_OSC_LOCK, kShared));
    REQUIRE(0 == w.deliver(2, GW_OSC_LOCK, kShared));
    REQUIRE(0 == w.deliver(3, GW_OSC_LOCK, kExcl));
    CHECK(w.take() == std::vector<Ctl>{grant(0)});
    REQUIRE(0 == w.deliver(0, GW_OSC_UNLOCK, 1, 0));
    CHECK(w.take() == std::vector<Ctl>{grant(1), grant(2), ack(0, true, 0)});
    CHECK(w.s.lock_state == 2);
    REQUIRE(0 == w.deliver(1, GW_OSC_UNLOCK, 1, 0));
    CHECK(w.take() == std::vector<Ctl>{ack(1, true, 0)});
    REQUIRE(0 == w.deliver(2, GW_OSC_UNLOCK, 1, 0));
    CHECK(w.take() == std::vector<Ctl>{grant(3), ack(2, true, 0)});
}

TEST_CASE("a queue longer than its first allocation keeps its order", "[osc][sync]")
{
    FakeWindow w(40);
    REQUIRE(0 == w.deliver(0, GW_OSC_LOCK, kExcl));
    for (int o = 1; o < 40; o++) REQUIRE(0 == w.deliver(o, GW_OSC_LOCK, kExcl));
    CHECK(w.s.nwaiters == 39);
    w.take();
    for (int o = 0; o < 39; o++) {
        REQUIRE(0 == w.deliver(o, GW_OSC_UNLOCK, 1, 0));
        CHECK(w.take() == std::vector<Ctl>{grant(o + 1), ack(o, true, 0)});
    }
}

TEST_CASE("an unlock under MPI_MODE_NOCHECK releases no lock", "[osc][sync]")
{
    FakeWindow w(3);
    REQUIRE(0 == w.deliver(1, GW_OSC_LOCK, kExcl));
    w.take();
    // Rank 2 never asked (aux 0): the exclusive holder keeps the lock.
    REQUIRE(0 == w.deliver(2, GW_OSC_UNLOCK, 0, 0));
    CHECK(w.take() == std::vector<Ctl>{ack(2, true, 0)});
    CHECK(w.s.lock_state == -1);
}

TEST_CASE("a flush is acknowledged once its count is applied", "[osc][sync]")
{
    FakeWindow w(2);
    REQUIRE(0 == w.deliver(1, GW_OSC_PUT));
    REQUIRE(0 == w.deliver(1, GW_OSC_FLUSH, 0, 3));
    CHECK(w.take().empty());
    REQUIRE(0 == w.deliver(1, GW_OSC_ACC));
    CHECK(w.take().empty());
    REQUIRE(0 == w.deliver(1, GW_OSC_GET));
    CHECK(w.take() == std::vector<Ctl>{ack(1, false, 3)});
    CHECK(w.s.applied[1] == 3);
    CHECK(w.applied == std::vector<std::pair<int, uint32_t>>{
                           {1, GW_OSC_PUT}, {1, GW_OSC_ACC}, {1, GW_OSC_GET}});
    // Answered once: a later operation sends nothing.
    REQUIRE(0 == w.deliver(1, GW_OSC_PUT));
    CHECK(w.take().empty());
    // An unlock whose count is applied already is acknowledged at once, with
    // the count applied.
    REQUIRE(0 == w.deliver(1, GW_OSC_UNLOCK, 0, 4));
    CHECK(w.take() == std::vector<Ctl>{ack(1, true, 4)});
}

TEST_CASE("an unlock waits for the holder's operations before it releases", "[osc][sync]")
{
    FakeWindow w(3);
    REQUIRE(0 == w.deliver(1, GW_OSC_LOCK, kExcl));
    REQUIRE(0 == w.deliver(2, GW_OSC_LOCK, kExcl));
    w.take();
    REQUIRE(0 == w.deliver(1, GW_OSC_UNLOCK, 1, 2));
    CHECK(w.take().empty());
    CHECK(w.s.lock_state == -1);
    REQUIRE(0 == w.deliver(1, GW_OSC_PUT));
    REQUIRE(0 == w.deliver(1, GW_OSC_CAS));
    CHECK(w.take() == std::vector<Ctl>{grant(2), ack(1, true, 2)});
}

TEST_CASE("PSCW: the exposure ends once every origin completed and was applied",
          "[osc][sync]")
{
    FakeWindow w(4);
    const int group[] = {1, 3};
    REQUIRE(0 == gw_osc_sync_post(&w.s, group, 2));
    CHECK(w.take() ==
          std::vector<Ctl>{Ctl{1, GW_OSC_POST, 0, 0}, Ctl{3, GW_OSC_POST, 0, 0}});
    CHECK_FALSE(gw_osc_sync_exposure_done(&w.s, group, 2));
    REQUIRE(0 == w.deliver(1, GW_OSC_COMPLETE, 0, 0));
    CHECK_FALSE(gw_osc_sync_exposure_done(&w.s, group, 2));
    REQUIRE(0 == w.deliver(3, GW_OSC_COMPLETE, 0, 1));
    CHECK_FALSE(gw_osc_sync_exposure_done(&w.s, group, 2));  // its put not yet applied
    REQUIRE(0 == w.deliver(3, GW_OSC_PUT));
    CHECK(gw_osc_sync_exposure_done(&w.s, group, 2));
    // The next epoch forgets the last one's completions.
    REQUIRE(0 == gw_osc_sync_post(&w.s, group, 2));
    CHECK_FALSE(gw_osc_sync_exposure_done(&w.s, group, 2));
    // The origin side: POSTs counted, COMPLETE carries the count sent.
    REQUIRE(0 == w.deliver(2, GW_OSC_POST));
    CHECK(w.s.posts[2] == 1);
    w.s.sent[2] = 5;
    w.take();
    const int targets[] = {2};
    REQUIRE(0 == gw_osc_sync_complete(&w.s, targets, 1));
    CHECK(w.take() == std::vector<Ctl>{Ctl{2, GW_OSC_COMPLETE, 0, 5}});
}

TEST_CASE("post and complete answer the first failed send", "[osc][sync]")
{
    FakeWindow w(3);
    const int group[] = {0, 1, 2};
    w.send_rc = -7;
    CHECK(-7 == gw_osc_sync_post(&w.s, group, 3));
    CHECK(w.take().size() == 3);  // every rank is still told
    CHECK(-7 == gw_osc_sync_complete(&w.s, group, 3));
    CHECK(w.take().size() == 3);
}

TEST_CASE("origin: lock epochs are checked and asked for", "[osc][sync]")
{
    FakeWindow w(3);
    CHECK(GW_OSC_ERR_RANGE == gw_osc_sync_lock(&w.s, kExcl, 3, true));
    CHECK(GW_OSC_ERR_RANGE == gw_osc_sync_lock(&w.s, kExcl, -1, true));
    CHECK(GW_OSC_ERR_SYNC == gw_osc_sync_unlock_check(&w.s, 1, false));
    CHECK(GW_OSC_ERR_SYNC == gw_osc_sync_flush_check(&w.s, 1));
    REQUIRE(0 == gw_osc_sync_lock(&w.s, kExcl, 1, true));
    CHECK(w.take() == std::vector<Ctl>{Ctl{1, GW_OSC_LOCK, kExcl, 0}});
    CHECK(w.s.locked[1] == (1 | 4));
    CHECK(GW_OSC_ERR_SYNC == gw_osc_sync_lock(&w.s, kShared, 1, true));
    CHECK(GW_OSC_ERR_SYNC == gw_osc_sync_lock_all(&w.s, true));
    REQUIRE(0 == gw_osc_sync_lock(&w.s, kShared, 2, false));  // MPI_MODE_NOCHECK
    CHECK(w.take().empty());
    CHECK(w.s.locked[2] == 2);
    CHECK(0 == gw_osc_sync_flush_check(&w.s, 2));
    CHECK(GW_OSC_ERR_RANGE == gw_osc_sync_flush_check(&w.s, 5));
    CHECK(0 == gw_osc_sync_unlock_check(&w.s, 1, false));
    CHECK(GW_OSC_ERR_SYNC == gw_osc_sync_unlock_check(&w.s, -1, true));

    // Nothing sent as a message: the unlock goes, but is not waited for.
    CHECK(0 == gw_osc_sync_unlock_send(&w.s, 2));
    CHECK(w.take() == std::vector<Ctl>{Ctl{2, GW_OSC_UNLOCK, 0, 0}});
    gw_osc_sync_unlocked(&w.s, 2, false);
    CHECK(w.s.locked[2] == 0);
    // Two operations went to rank 1: its unlock carries the count and the
    // origin waits for the second unlock acknowledgement ever.
    w.s.sent[1] = 2;
    w.s.unlocks_sent[1] = 1;
    CHECK(2 == gw_osc_sync_unlock_send(&w.s, 1));
    CHECK(w.take() == std::vector<Ctl>{Ctl{1, GW_OSC_UNLOCK, 1, 2}});
    REQUIRE(0 == w.deliver(1, GW_OSC_ACK, 1, 2));
    CHECK(w.s.unlocks[1] == 1);
    CHECK(w.s.acked[1] == 2);
    // An older acknowledgement never lowers the count.
    REQUIRE(0 == w.deliver(1, GW_OSC_ACK, 0, 1));
    CHECK(w.s.acked[1] == 2);
    CHECK(w.s.unlocks[1] == 1);
}

TEST_CASE("origin: a flush goes only when operations are unacknowledged", "[osc][sync]")
{
    FakeWindow w(2);
    REQUIRE(0 == gw_osc_sync_lock_all(&w.s, true));
    CHECK(w.take() == std::vector<Ctl>{Ctl{0, GW_OSC_LOCK, kShared, 0},
                                       Ctl{1, GW_OSC_LOCK, kShared, 0}});
    CHECK(w.s.lock_all);
    CHECK(GW_OSC_ERR_SYNC == gw_osc_sync_lock(&w.s, kShared, 0, true));
    CHECK(GW_OSC_ERR_SYNC == gw_osc_sync_lock_all(&w.s, true));
    CHECK(GW_OSC_ERR_SYNC == gw_osc_sync_unlock_check(&w.s, 1, false));
    CHECK(0 == gw_osc_sync_unlock_check(&w.s, -1, true));
    CHECK(0 == gw_osc_sync_flush_send(&w.s, 1));
    CHECK(w.take().empty());
    w.s.sent[1] = 3;
    CHECK(3 == gw_osc_sync_flush_send(&w.s, 1));
    CHECK(w.take() == std::vector<Ctl>{Ctl{1, GW_OSC_FLUSH, 0, 3}});
    REQUIRE(0 == w.deliver(1, GW_OSC_ACK, 0, 3));
    CHECK(3 == gw_osc_sync_flush_send(&w.s, 1));
    CHECK(w.take().empty());
    gw_osc_sync_unlocked(&w.s, -1, true);
    CHECK_FALSE(w.s.lock_all);
    CHECK(w.s.locked[0] == 0);
    CHECK(w.s.locked[1] == 0);
    CHECK(0 == gw_osc_sync_lock_all(&w.s, false));
    CHECK(w.take().empty());
    CHECK(w.s.locked[1] == 2);
}

TEST_CASE("messages: grants and posts counted, replies handed on, bad ones dropped",
          "[osc][sync]")
{
    FakeWindow w(2);
    REQUIRE(0 == w.deliver(1, GW_OSC_GRANT));
    REQUIRE(0 == w.deliver(1, GW_OSC_GRANT));
    CHECK(w.s.grants[1] == 2);
    REQUIRE(0 == w.deliver(0, GW_OSC_REPLY, 0, 42));
    CHECK(w.replies == std::vector<uint64_t>{42});
    CHECK(w.s.applied[0] == 0);  // a reply is no operation applied
    CHECK(GW_OSC_ERR_KIND == w.deliver(1, 99));
    CHECK(GW_OSC_ERR_KIND == w.deliver(1, 0));
    gw_osc_hdr_t h{};
    h.kind = GW_OSC_PUT;
    CHECK(GW_OSC_ERR_SHORT ==
          gw_osc_sync_handle(&w.s, 1, reinterpret_cast<const char *>(&h), sizeof(h) - 1));
    CHECK(w.applied.empty());
    CHECK(w.s.applied[1] == 0);
    CHECK(w.take().empty());
}
