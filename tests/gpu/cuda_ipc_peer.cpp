// The other process of the cross-process IPC test (CUDA refuses to open a
// process' own handles). Reads commands on stdin, answers one line each:
//   MAP <blob as hex> <expected byte> <byte to write>
//       maps the blob through an IpcMappingCache, checks that the payload holds
//       the expected byte, overwrites it with the new one, and answers
//       "OK <hits> <misses> <stale>" (the cache's counters) or "ERR <why>"
//   QUIT
// Usage: cuda_ipc_peer <device>
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "gpuwire/cuda/copy.hpp"
#include "gpuwire/cuda/ipc_mapping_cache.hpp"
#include "gpuwire/cuda/pinned_pool.hpp"
#include "gpuwire/cuda/stream.hpp"
#include "ipc_wire.hpp"

using namespace gpuwire::cuda;

namespace {

std::string map_and_check(IpcMappingCache& cache, StreamPool& streams, PinnedPool& pinned, int device,
                          const std::string& hex, int expect, int next) {
  std::vector<uint8_t> bytes;
  IpcBlob blob;
  if (!gw_test::from_hex(hex, &bytes)) return "ERR hex";
  Status s = decode_ipc_blob(bytes.data(), bytes.size(), &blob);
  if (!s) return "ERR " + s.message();
  Result<IpcMapping> m = cache.acquire(0, blob, device);
  if (!m) return "ERR " + m.status().message();
  Result<TrackedStream*> ts = streams.next(device);
  if (!ts) return "ERR " + ts.status().message();
  Result<PinnedChunk> chunk = pinned.acquire();
  if (!chunk) return "ERR " + chunk.status().message();
  const size_t len = std::min<size_t>(blob.length, chunk->size());
  s = copy_async(chunk->data(), m->ptr(), len, (*ts)->stream());
  if (!s) return "ERR " + s.message();
  if (cudaMemsetAsync(m->ptr(), next, len, (*ts)->handle()) != cudaSuccess) return "ERR cudaMemsetAsync";
  Result<uint64_t> ticket = (*ts)->mark();
  if (!ticket) return "ERR " + ticket.status().message();
  auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!(*ts)->reached(*ticket)) {
    if (std::chrono::steady_clock::now() > until) return "ERR timeout: " + (*ts)->check().message();
  }
  const auto* p = static_cast<const uint8_t*>(chunk->data());
  for (size_t i = 0; i < len; ++i)
    if (p[i] != expect) return "ERR byte " + std::to_string(i) + " is " + std::to_string(p[i]);
  IpcCacheCounters c = cache.counters();
  return "OK " + std::to_string(c.hits) + " " + std::to_string(c.misses) + " " + std::to_string(c.stale);
}

}  // namespace

int main(int argc, char** argv) {
  const int device = argc > 1 ? std::atoi(argv[1]) : 0;
  Driver& drv = Driver::instance();
  if (!drv.available()) {
    std::cout << "ERR " << drv.unavailable_reason() << std::endl;
    return 1;
  }
  if (cudaSetDevice(device) != cudaSuccess) {
    std::cout << "ERR cudaSetDevice" << std::endl;
    return 1;
  }
  int rc = 0;
  {
    IpcMappingCache cache(drv);
    StreamPool streams;
    PinnedPoolConfig pcfg;
    pcfg.device = device;
    PinnedPool pinned(drv, pcfg);
    std::string line;
    while (std::getline(std::cin, line)) {
      std::istringstream in(line);
      std::string cmd, hex;
      int expect = 0, next = 0;
      in >> cmd;
      if (cmd == "QUIT") break;
      in >> hex >> expect >> next;
      std::string reply = map_and_check(cache, streams, pinned, device, hex, expect, next);
      if (reply.rfind("OK", 0) != 0) rc = 1;
      std::cout << reply << std::endl;
    }
    if (cache.counters().close_failures) rc = 1;
  }
  return rc;
}
