// SharedOutbox / SharedInbox (same-node staging through shared host memory):
// one process plays both sides through two mappings of one segment, against
// the fake driver's pinning. Slots, flags, reuse after release, the bound,
// checks on what a reader is told, and clean-up.
#include <dirent.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <set>
#include <string>

#include "fake_driver.hpp"
#include "gpuwire/cuda/shared_staging.hpp"
#include "gw_catch.hpp"

using namespace gw_test;

namespace {
constexpr size_t KiB = 1024;

// Names of this process's segments left in /dev/shm (there should be none).
int names_in_dev_shm() {
  const std::string prefix = "gpuwire-ss." + std::to_string(geteuid()) + "." + std::to_string(getpid()) + ".";
  int n = 0;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) n += std::strncmp(e->d_name, prefix.c_str(), prefix.size()) == 0;
    closedir(d);
  }
  return n;
}

bool fd_open(int fd) { return fcntl(fd, F_GETFD) != -1; }
}  // namespace

TEST_CASE("shared staging: a slot written by the owner is read and released by the reader",
          "[cuda][shared_staging]") {
  FakeDriver drv;
  auto out = SharedOutbox::create(&drv, 10 * KiB, 3, 1);
  REQUIRE(out.ok());
  SharedOutbox& o = **out;
  CHECK(o.slot_bytes() == 12 * KiB);  // rounded up to pages
  CHECK(o.slots() == 3);
  CHECK(drv.registered_live() == 1);
  CHECK(drv.last_host_device == 1);
  CHECK(o.id().pid == uint32_t(getpid()));

  SharedInbox in(&drv, 0);
  std::set<int> taken;
  for (int k = 0; k < 3; ++k) {
    const int s = o.acquire();
    REQUIRE(s >= 0);
    taken.insert(s);
    std::memset(o.slot(s), 'a' + s, o.slot_bytes());
    o.lend(s);
  }
  CHECK(taken.size() == 3);
  CHECK(o.acquire() == -1);  // every slot is with the reader
  CHECK(o.counters().busy == 1);
  CHECK(o.counters().lent == 3);  // the engine's pml_gpuwire_shared_chunks
  CHECK(o.lent_now() == 3);

  Result<const void*> p = in.slot(o.id(), 1, 12 * KiB);
  REQUIRE(p.ok());
  CHECK(*p != o.slot(1));  // a second mapping of the same memory
  const auto* bytes = static_cast<const unsigned char*>(*p);
  CHECK(bytes[0] == 'b');
  CHECK(bytes[12 * KiB - 1] == 'b');
  CHECK(in.segments() == 1);
  CHECK(drv.registered_live() == 2);  // the reader pins its mapping too

  in.release(o.id(), 1);
  CHECK(o.lent_now() == 2);
  CHECK(o.acquire() == 1);  // the released slot, and only it
  CHECK(o.acquire() == -1);
  o.abandon(1);
  CHECK(o.acquire() == 1);
}

TEST_CASE("shared staging: the reader refuses bad indices, sizes and unknown segments",
          "[cuda][shared_staging]") {
  FakeDriver drv;
  auto out = SharedOutbox::create(&drv, 4 * KiB, 2, 0);
  REQUIRE(out.ok());
  SharedInbox in(&drv, 0);
  CHECK(in.slot((*out)->id(), 2, 16).status().code() == Errc::invalid_argument);
  CHECK(in.slot((*out)->id(), 0, 4 * KiB + 1).status().code() == Errc::invalid_argument);
  CHECK(in.slot((*out)->id(), 0, 4 * KiB).ok());
  SharedSegmentId nobody{(*out)->id().pid, 100000};
  CHECK_FALSE(in.slot(nobody, 0, 16).ok());
  in.release(nobody, 0);          // ignored
  in.release((*out)->id(), 99);   // ignored
  CHECK(in.segments() == 1);
}

TEST_CASE("shared staging: a malformed segment is not mapped", "[cuda][shared_staging]") {
  const std::string name = "/gpuwire-ss-test." + std::to_string(getpid());
  int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  REQUIRE(fd >= 0);
  shm_unlink(name.c_str());
  REQUIRE(ftruncate(fd, 8192) == 0);
  void* m = mmap(nullptr, 8192, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  REQUIRE(m != MAP_FAILED);
  std::memset(m, 0xff, 8192);  // no magic, absurd sizes
  munmap(m, 8192);
  FakeDriver drv;
  SharedInbox in(&drv, 0);
  CHECK(in.slot(SharedSegmentId{uint32_t(getpid()), uint32_t(fd)}, 0, 16).status().code() ==
        Errc::invalid_argument);
  CHECK(in.segments() == 0);
  CHECK(drv.registered_live() == 0);
  close(fd);
}

TEST_CASE("shared staging: pinning failures and geometry are reported, nothing is left behind",
          "[cuda][shared_staging]") {
  FakeDriver drv;
  CHECK(SharedOutbox::create(&drv, 0, 2, 0).status().code() == Errc::invalid_argument);
  CHECK(SharedOutbox::create(&drv, 4096, 0, 0).status().code() == Errc::invalid_argument);
  CHECK(SharedOutbox::create(&drv, 4096, kSharedSlotsMax + 1, 0).status().code() ==
        Errc::invalid_argument);
  drv.fail_host_register = true;
  auto bad = SharedOutbox::create(&drv, 4096, 2, 0);
  CHECK_FALSE(bad.ok());
  CHECK(drv.registered_live() == 0);

  drv.fail_host_register = false;
  SharedSegmentId id;
  {
    auto out = SharedOutbox::create(&drv, 4096, 2, 0);
    REQUIRE(out.ok());
    id = (*out)->id();
    CHECK(names_in_dev_shm() == 0);  // reachable only through the open descriptor
    CHECK(fd_open(int(id.fd)));
    drv.fail_host_register = true;
    SharedInbox in(&drv, 0);
    CHECK_FALSE(in.slot(id, 0, 16).ok());
    CHECK(in.segments() == 0);
    drv.fail_host_register = false;
    {
      SharedInbox in2(&drv, 0);
      CHECK(in2.slot(id, 0, 16).ok());
      CHECK(drv.registered_live() == 2);
    }
    CHECK(drv.registered_live() == 1);  // the reader unpinned its mapping
  }
  CHECK_FALSE(fd_open(int(id.fd)));  // the owner closed its descriptor
  CHECK(drv.registered_live() == 0);
  CHECK(names_in_dev_shm() == 0);
}

TEST_CASE("shared staging: without a driver nothing is pinned and memcpy readers work",
          "[cuda][shared_staging]") {
  auto out = SharedOutbox::create(nullptr, 4096, 1, 0);
  REQUIRE(out.ok());
  const int s = (*out)->acquire();
  REQUIRE(s == 0);
  std::memcpy((*out)->slot(s), "payload", 8);
  (*out)->lend(s);
  SharedInbox in(nullptr, 0);
  Result<const void*> p = in.slot((*out)->id(), 0, 8);
  REQUIRE(p.ok());
  CHECK(std::memcmp(*p, "payload", 8) == 0);
  in.release((*out)->id(), 0);
  CHECK((*out)->acquire() == 0);
}

TEST_CASE("shared staging: another process reads a slot through /proc/<pid>/fd and gives it back",
          "[cuda][shared_staging]") {
  auto out = SharedOutbox::create(nullptr, 4096, 1, 0);
  REQUIRE(out.ok());
  SharedOutbox& o = **out;
  const int s = o.acquire();
  REQUIRE(s == 0);
  std::memcpy(o.slot(s), "from the parent", 16);
  o.lend(s);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    // No Catch2 in the child: its exit code is the verdict.
    SharedInbox in(nullptr, 0);
    Result<const void*> p = in.slot(o.id(), 0, 16);
    int rc = !p.ok() ? 2 : std::memcmp(*p, "from the parent", 16) != 0 ? 3 : 0;
    if (rc == 0) in.release(o.id(), 0);
    _exit(rc);
  }
  int status = -1;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(o.acquire() == 0);  // the child cleared the flag
}
