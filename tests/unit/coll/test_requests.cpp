/* The collective engine's request set over the memory transport. */
#include "gw_catch.hpp"

#include <thread>

#include "common/requests.hpp"
#include "mem_transport.hpp"

using gpuwire::coll::Requests;

TEST_CASE("a request set waits for its messages in posting order", "[coll]")
{
    gwtest::MemWorld w(2);
    int got[3] = {-1, -1, -1};
    const int sent[3] = {7, 8, 9};
    {
        Requests r1(w.transport(1));
        for (int i = 0; i < 3; ++i) REQUIRE(0 == r1.recv(&got[i], sizeof(int), 0, 5));
        bool done = true;
        REQUIRE(0 == r1.test_all(&done));
        CHECK_FALSE(done);
        Requests r0(w.transport(0));
        for (int i = 0; i < 3; ++i) REQUIRE(0 == r0.send(&sent[i], sizeof(int), 1, 5));
        REQUIRE(0 == r0.wait_all());
        REQUIRE(0 == r1.wait_all());
        CHECK(0 == r1.size());
    }
    CHECK(got[0] == 7);
    CHECK(got[1] == 8);
    CHECK(got[2] == 9);
    CHECK(0 == w.leaks());
}

TEST_CASE("a request set cancels what it still holds", "[coll]")
{
    gwtest::MemWorld w(2);
    int x = 0;
    {
        Requests r(w.transport(0));
        REQUIRE(0 == r.recv(&x, sizeof(x), 1, 1));
        REQUIRE(0 == r.recv(&x, sizeof(x), 1, 2));
    }
    CHECK(0 == w.leaks());
    /* A message sent after the cancel finds no receive. */
    Requests s(w.transport(1));
    const int y = 3;
    REQUIRE(0 == s.send(&y, sizeof(y), 0, 1));
    REQUIRE(0 == s.wait_all());
    CHECK(1 == w.unreceived());
    CHECK(0 == x);
}

TEST_CASE("a truncated message fails its receive", "[coll]")
{
    gwtest::MemWorld w(2);
    char small[2];
    const char big[8] = {};
    Requests r(w.transport(1));
    REQUIRE(0 == r.recv(small, sizeof(small), 0, 0));
    std::thread t([&] {
        Requests s(w.transport(0));
        REQUIRE(0 == s.send(big, sizeof(big), 1, 0));
        REQUIRE(0 == s.wait_all());
    });
    CHECK(GW_CE_ERR == r.wait_all());
    t.join();
    CHECK(0 == w.leaks());
}
