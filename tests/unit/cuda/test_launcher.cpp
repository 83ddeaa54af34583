// Launcher (gpuwire/cuda/launcher.hpp): the worker thread of the delegated
// NVLink form. Tasks run in submission order, off the submitting thread,
// after a sleep as after a spin, all of them before the destructor returns,
// and drain() waits for exactly what was submitted before it.
#include <sched.h>

#include <atomic>
#include <thread>
#include <vector>

#include "gpuwire/cuda/launcher.hpp"
#include "gw_catch.hpp"

using gpuwire::cuda::Launcher;
using namespace std::chrono_literals;

TEST_CASE("launcher runs tasks in order, off the caller's thread", "[launcher]") {
  Launcher l(50us, false);
  std::vector<int> seen;
  std::mutex mu;
  std::atomic<int> off_thread{0};
  const auto me = std::this_thread::get_id();
  for (int i = 0; i < 1000; ++i) {
    l.submit([&, i] {
      std::lock_guard<std::mutex> g(mu);
      seen.push_back(i);
      if (std::this_thread::get_id() != me) off_thread.fetch_add(1);
    });
  }
  l.drain();
  REQUIRE(l.finished() == 1000);
  REQUIRE(off_thread.load() == 1000);
  REQUIRE(seen.size() == 1000);
  for (int i = 0; i < 1000; ++i) REQUIRE(seen[i] == i);
}

TEST_CASE("launcher wakes after sleeping", "[launcher]") {
  Launcher l(0us, false);  // no spin: every task after the pause finds it asleep
  std::atomic<int> ran{0};
  for (int round = 0; round < 20; ++round) {
    std::this_thread::sleep_for(2ms);
    l.submit([&] { ran.fetch_add(1); });
    l.drain();
    REQUIRE(ran.load() == round + 1);
  }
}

TEST_CASE("launcher's destructor runs what is queued", "[launcher]") {
  std::atomic<int> ran{0};
  {
    Launcher l(0us, false);
    l.submit([&] { std::this_thread::sleep_for(20ms); ran.fetch_add(1); });
    for (int i = 0; i < 10; ++i) l.submit([&] { ran.fetch_add(1); });
  }
  REQUIRE(ran.load() == 11);
}

TEST_CASE("launcher's drain waits for the tasks before it only", "[launcher]") {
  Launcher l(10us, false);
  std::atomic<bool> release{false};
  std::atomic<int> ran{0};
  l.submit([&] { ran.fetch_add(1); });
  l.drain();
  REQUIRE(ran.load() == 1);
  // A task that blocks until released: drain from another thread must wait.
  l.submit([&] {
    while (!release.load()) std::this_thread::yield();
    ran.fetch_add(1);
  });
  std::atomic<bool> drained{false};
  std::thread t([&] { l.drain(); drained = true; });
  std::this_thread::sleep_for(20ms);
  REQUIRE_FALSE(drained.load());
  release = true;
  t.join();
  REQUIRE(drained.load());
  REQUIRE(ran.load() == 2);
}

TEST_CASE("launcher with unbind leaves a one-core binding", "[launcher]") {
  cpu_set_t mine;
  REQUIRE(sched_getaffinity(0, sizeof(mine), &mine) == 0);
  if (CPU_COUNT(&mine) < 2) {
    WARN("one core allowed: nothing to leave");
    return;
  }
  // Bind this thread (the worker inherits it) to its first allowed core.
  int first = 0;
  while (!CPU_ISSET(first, &mine)) ++first;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(first, &one);
  REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof(one), &one) == 0);
  std::atomic<int> cores{0};
  {
    Launcher l(0us, true);
    l.submit([&] {
      cpu_set_t s;
      if (sched_getaffinity(0, sizeof(s), &s) == 0) cores = CPU_COUNT(&s);
    });
    l.drain();
    REQUIRE(l.unbound());
  }
  {
    Launcher kept(0us, false);
    std::atomic<int> kept_cores{0};
    kept.submit([&] {
      cpu_set_t s;
      if (sched_getaffinity(0, sizeof(s), &s) == 0) kept_cores = CPU_COUNT(&s);
    });
    kept.drain();
    REQUIRE(kept_cores.load() == 1);
  }
  REQUIRE(pthread_setaffinity_np(pthread_self(), sizeof(mine), &mine) == 0);
  REQUIRE(cores.load() == CPU_COUNT(&mine));
}
