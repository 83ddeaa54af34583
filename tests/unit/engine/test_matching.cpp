// MPI matching rules on the engine's queues, without UCX.
#include "gw_catch.hpp"

#include "engine/matching.hpp"
#include "engine/wire.hpp"

#include <climits>
#include <cstddef>
#include <cstring>

using namespace gpuwire::engine;

namespace {
struct Posted {
    ListNode link;
    int32_t want_source;
    int32_t want_tag;
    int id;
};
struct Msg {
    ListNode link;
    int32_t source;
    int32_t tag;
    int id;
};
using Ctx = MatchContext<Posted, Msg>;
} // namespace

TEST_CASE("wildcards follow MPI rules", "[matching]")
{
    CHECK(tag_matches(GW_ANY_SOURCE, GW_ANY_TAG, 3, 7));
    CHECK(tag_matches(3, GW_ANY_TAG, 3, 0));
    CHECK_FALSE(tag_matches(2, GW_ANY_TAG, 3, 0));
    CHECK(tag_matches(GW_ANY_SOURCE, 7, 5, 7));
    CHECK_FALSE(tag_matches(GW_ANY_SOURCE, 7, 5, 8));
    // Negative tags belong to Open MPI's collectives: ANY_TAG must not take them.
    CHECK_FALSE(tag_matches(GW_ANY_SOURCE, GW_ANY_TAG, 0, -17));
    CHECK(tag_matches(0, -17, 0, -17));
}

TEST_CASE("a message takes the earliest posted receive that matches", "[matching]")
{
    Ctx c(4);
    Posted a{{}, 1, 5, 1}, b{{}, GW_ANY_SOURCE, 5, 2}, d{{}, GW_ANY_SOURCE, GW_ANY_TAG, 3};
    c.posted().push_back(&a);
    c.posted().push_back(&b);
    c.posted().push_back(&d);
    REQUIRE(c.posted().size() == 3);

    Posted *m = c.match_posted(2, 5); // not from 1: skips a, takes b
    REQUIRE(m);
    CHECK(m->id == 2);
    m = c.match_posted(1, 9); // tag 9: only the full wildcard
    REQUIRE(m);
    CHECK(m->id == 3);
    CHECK(c.match_posted(2, 5) == nullptr);
    m = c.match_posted(1, 5);
    REQUIRE(m);
    CHECK(m->id == 1);
    CHECK(c.posted().empty());
}

TEST_CASE("a receive takes the earliest unexpected message that matches", "[matching]")
{
    Ctx c(1);
    Msg m1{{}, 0, 1, 1}, m2{{}, 1, 1, 2}, m3{{}, 0, 2, 3}, m4{{}, 0, 1, 4}, neg{{}, 0, -3, 5};
    for (Msg *m : {&neg, &m1, &m2, &m3, &m4}) c.unexpected().push_back(m);

    CHECK(c.peek_unexpected(0, 1)->id == 1);
    CHECK(c.unexpected().size() == 5); // peeking takes nothing
    CHECK(c.match_unexpected(GW_ANY_SOURCE, GW_ANY_TAG)->id == 1); // skips the internal tag
    CHECK(c.match_unexpected(0, 1)->id == 4);                      // order kept per source
    CHECK(c.match_unexpected(GW_ANY_SOURCE, 1)->id == 2);
    CHECK(c.match_unexpected(0, -3)->id == 5);
    CHECK(c.match_unexpected(0, 1) == nullptr);
    CHECK(c.unexpected().size() == 1);
}

TEST_CASE("removing from the middle keeps the order of the rest", "[matching]")
{
    OrderedQueue<Posted> q;
    Posted p[5];
    for (int i = 0; i < 5; ++i) {
        p[i] = Posted{{}, 0, i, i};
        q.push_back(&p[i]);
    }
    q.remove(&p[2]);
    CHECK_FALSE(p[2].link.linked());
    std::vector<int> order;
    while (Posted *x = q.pop_front()) order.push_back(x->id);
    CHECK(order == std::vector<int>{0, 1, 3, 4});
}

TEST_CASE("internal tags below the UCX tag field fold back into its negative range", "[matching]")
{
    // Inside the field: unchanged, user and internal tags alike.
    for (int32_t t : {0, 7, kMaxTag, -1, -27, -31080, kFoldTop, kMinTag}) CHECK(fold_tag(t) == t);
    // libnbc's tags run from -27 down to -INT_MAX/2 + 1.
    const int32_t lowest = -(INT_MAX / 2) + 1;
    const int64_t span = int64_t(kFoldTop) - kMinTag + 1;
    for (int64_t t : {int64_t(kMinTag) - 1, int64_t(kMinTag) - 2, int64_t(kMinTag) - span,
                      int64_t(kMinTag) - span - 1, int64_t(lowest), int64_t(INT_MIN)}) {
        const int32_t f = fold_tag(int32_t(t));
        CHECK(f >= kMinTag);
        CHECK(f <= kFoldTop);
        // Consecutive tags stay distinct after the fold.
        CHECK(fold_tag(int32_t(t) + 1) != f);
    }
    CHECK(fold_tag(kMinTag - 1) == kFoldTop);
    CHECK(fold_tag(int32_t(int64_t(kMinTag) - span)) == kMinTag);
    // On the wire, folded as the engine's entry points fold: a send and a
    // receive of the same low tag meet, a receive for any tag never takes it,
    // and it differs from every small tag.
    for (int32_t t : {kMinTag - 1, lowest, lowest + 12345, kMinTag - 40000}) {
        const uint64_t sent = make_send_tag(3, 1, fold_tag(t));
        uint64_t want = 0, mask = 0;
        make_recv_tag(3, 1, fold_tag(t), false, want, mask);
        CHECK(((sent ^ want) & mask) == 0);
        make_recv_tag(3, -1, 0, true, want, mask);
        CHECK(((sent ^ want) & mask) != 0);
        CHECK(tag_of(sent) < kFoldTop + 1);
        CHECK(tag_of(sent) >= kMinTag);
        for (int32_t small : {-8, -17, -27, -31080, 5}) {
            make_recv_tag(3, 1, small, false, want, mask);
            CHECK(((sent ^ want) & mask) != 0);
        }
    }
}

TEST_CASE("a receive for one source and tag has UCX's full mask", "[matching]")
{
    // UCX finds such a receive's message in a hash bucket; any other mask
    // makes it scan every message it holds, of all communicators.
    uint64_t want = 0, mask = 0;
    for (int32_t tag : {0, 7, kMaxTag, -1, kMinTag}) {
        make_recv_tag(kMaxCtx - 1, kMaxRank, tag, false, want, mask);
        CHECK(mask == ~uint64_t(0));
        CHECK(want == make_send_tag(kMaxCtx - 1, kMaxRank, tag));
    }
    // Wildcards keep the bit that is always clear on the wire.
    make_recv_tag(5, -1, 3, false, want, mask);
    CHECK((mask & (uint64_t(1) << 63)) != 0);
    make_recv_tag(5, 2, 0, true, want, mask);
    CHECK((mask & (uint64_t(1) << 63)) != 0);
}

TEST_CASE("only a control message's size and magic make a control message", "[matching]")
{
    unsigned char b[sizeof(DeviceDescriptor)] = {};
    CHECK(control_kind(b, sizeof(ChunkedHeader)) == Control::none);
    CHECK(control_kind(b, sizeof(DeviceDescriptor)) == Control::none);
    std::memcpy(b, &kChunkedMagic, 4);
    CHECK(control_kind(b, sizeof(ChunkedHeader)) == Control::chunked);
    CHECK(control_kind(b, sizeof(ChunkedHeader) + 1) == Control::none);
    CHECK(control_kind(b, sizeof(DeviceDescriptor)) == Control::none);
    std::memcpy(b + offsetof(DeviceDescriptor, blob), &gpuwire::cuda::kIpcBlobMagic, 4);
    CHECK(control_kind(b, sizeof(DeviceDescriptor)) == Control::descriptor);
    CHECK(control_kind(b, sizeof(DeviceDescriptor) - 1) == Control::none);
}
