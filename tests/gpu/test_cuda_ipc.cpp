// CUDA IPC between two processes ([gpu]): this process exports, cuda_ipc_peer
// maps through IpcMappingCache, checks and rewrites the payload. A buffer freed
// and re-allocated here must be seen fresh there.
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "gpuwire/cuda/ipc_exporter.hpp"
#include "gpuwire/cuda/memory_classifier.hpp"
#include "gw_catch.hpp"
#include "ipc_wire.hpp"

#if GPUWIRE_HAVE_CUDA
#include <cuda_runtime_api.h>

extern char** environ;

using namespace gpuwire::cuda;

namespace {

class Peer {
 public:
  explicit Peer(int device) {
    int in[2], out[2];
    REQUIRE(pipe(in) == 0);
    REQUIRE(pipe(out) == 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, in[0], 0);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_addclose(&fa, in[1]);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    std::string dev = std::to_string(device);
    char* argv[] = {const_cast<char*>(GW_IPC_PEER), dev.data(), nullptr};
    REQUIRE(posix_spawn(&pid_, GW_IPC_PEER, &fa, nullptr, argv, environ) == 0);
    posix_spawn_file_actions_destroy(&fa);
    close(in[0]);
    close(out[1]);
    to_ = in[1];
    from_ = out[0];
  }
  ~Peer() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    close(to_);
    close(from_);
  }
  std::string ask(const std::string& line) {
    std::string msg = line + "\n";
    REQUIRE(write(to_, msg.data(), msg.size()) == static_cast<ssize_t>(msg.size()));
    std::string reply;
    char c;
    pollfd p{from_, POLLIN, 0};
    while (true) {
      if (poll(&p, 1, 60000) <= 0) return "ERR peer silent";
      if (read(from_, &c, 1) != 1) return "ERR peer gone";
      if (c == '\n') return reply;
      reply.push_back(c);
    }
  }
  int quit() {
    const char q[] = "QUIT\n";
    (void)!write(to_, q, sizeof q - 1);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  }

 private:
  pid_t pid_ = -1;
  int to_ = -1, from_ = -1;
};

struct Counts {
  uint64_t hits = 0, misses = 0, stale = 0;
};

Counts parse_ok(const std::string& reply) {
  INFO(reply);
  REQUIRE(reply.rfind("OK ", 0) == 0);
  Counts c;
  std::istringstream(reply.substr(3)) >> c.hits >> c.misses >> c.stale;
  return c;
}

std::string map_line(MemoryClassifier& cls, IpcExporter& ex, void* buf, size_t off, size_t len, int expect,
                     int next) {
  MemoryInfo info;
  REQUIRE(cls.classify(static_cast<char*>(buf) + off, len, info).ok());
  IpcBlob blob;
  Status s = ex.export_range(info, static_cast<char*>(buf) + off, len, &blob);
  INFO(s.message());
  REQUIRE(s.ok());
  return "MAP " + gw_test::to_hex(&blob, sizeof blob) + " " + std::to_string(expect) + " " +
         std::to_string(next);
}

void expect_bytes(void* dev, size_t off, size_t len, uint8_t value) {
  std::vector<uint8_t> host(len);
  REQUIRE(cudaMemcpy(host.data(), static_cast<char*>(dev) + off, len, cudaMemcpyDeviceToHost) == cudaSuccess);
  size_t bad = 0;
  while (bad < len && host[bad] == value) ++bad;
  INFO("first byte not " << int(value) << " at " << bad);
  CHECK(bad == len);
}

void run_ipc(int peer_device) {
  Driver& d = Driver::instance();
  MemoryClassifier cls(d);
  IpcExporter ex(d);
  Peer peer(peer_device);
  const size_t size = 4 << 20, off = 4096, len = 1 << 20;

  void* buf = nullptr;
  REQUIRE(cudaMalloc(&buf, size) == cudaSuccess);
  REQUIRE(cudaMemset(buf, 0x11, size) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the peer reads on its own stream
  Counts c1 = parse_ok(peer.ask(map_line(cls, ex, buf, off, len, 0x11, 0x12)));
  CHECK(c1.misses == 1);
  expect_bytes(buf, off, len, 0x12);  // the peer wrote through its mapping

  Counts c2 = parse_ok(peer.ask(map_line(cls, ex, buf, off + len, len, 0x11, 0x13)));
  CHECK(c2.hits == 1);  // same allocation: mapped once
  CHECK(c2.misses == 1);

  // Free and re-allocate: the peer still maps the old allocation.
  REQUIRE(cudaFree(buf) == cudaSuccess);
  void* again = nullptr;
  REQUIRE(cudaMalloc(&again, size) == cudaSuccess);
  REQUIRE(cudaMemset(again, 0x21, size) == cudaSuccess);
  REQUIRE(cudaDeviceSynchronize() == cudaSuccess);  // the peer reads on its own stream
  Counts c3 = parse_ok(peer.ask(map_line(cls, ex, again, off, len, 0x21, 0x22)));
  CHECK(c3.misses == 2);
  if (again == buf)
    CHECK(c3.stale == 1);
  else
    WARN("re-allocation came back elsewhere; stale mappings withdrawn: " << c3.stale);
  expect_bytes(again, off, len, 0x22);
  CHECK(ex.counters().misses == 2);

  CHECK(peer.quit() == 0);
  REQUIRE(cudaFree(again) == cudaSuccess);
}

}  // namespace

TEST_CASE("ipc: another process maps, reads and writes; re-allocation is seen", "[gpu][cuda][ipc]") {
  REQUIRE(Driver::instance().available());
  SECTION("peer on the same GPU") { run_ipc(0); }
  SECTION("peer on the other GPU") {
    if (Driver::instance().device_count() < 2) {
      WARN("one GPU: skipped");
    } else {
      run_ipc(1);
    }
  }
}

#endif
