// MPI matching rules on the engine's queues, without UCX.
#include "gw_catch.hpp"

#include "engine/matching.hpp"

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
