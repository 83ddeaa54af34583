// NvlTeam: one rank's side of the NVLink collectives of one communicator
// (kernels and their contract: gpuwire/cuda/nvlink_coll.h).
//
// Life cycle, collective over the team's ranks:
//   open()     allocates this rank's workspace (flags + two slots) on its GPU,
//              a host-mapped error word and a stream that waits for the legacy
//              default stream; desc() describes it for the peers.
//   connect()  with every rank's description (rank order): checks that each
//              rank has a GPU of its own (or that the GPU they share runs
//              them under MPS), maps the peers' workspaces.
//   launch()   launches one call behind those launched before (its barrier
//              sequence and slot filled in here, the same on every rank
//              because calls come in the same order) and returns its ticket;
//              finished(ticket) tells, by one load of a host-mapped counter
//              the stream writes after the kernel, when it has run. Every
//              rank's kernel waits at its barrier for the others': a call is
//              launched only once every rank has initiated it (a kernel
//              spinning there also holds up the application's
//              cudaDeviceSynchronize).
//   run()      launches one call and waits for it (no completion signal:
//              the stream's synchronize is the wait).
//   launch_all() the delegated form (every rank on this GPU): one kernel
//              for the whole call on every rank's buffers, then a completion
//              word written for all ranks (gpu_device_team.cpp's board).
// A barrier that timed out leaves the flags of the ranks out of step: the
// team is then broken and every later run() fails at once.
//
// Threading: not synchronised; the communicator's collectives are serialised
// by MPI's rules (one collective at a time per communicator).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "gpuwire/cuda/driver.hpp"
#include "gpuwire/cuda/nvlink_coll.h"
#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

inline constexpr uint32_t kNvlTeamMagic = 0x4c564e47u;  // "GNVL" in memory order

// What one rank tells the others; host byte order (one node). Received bytes
// are accepted only through decode_nvl_team_desc().
struct NvlTeamDesc {
  uint32_t magic;
  uint16_t version;
  uint16_t ok;  // 1: the workspace exists and is exported; 0: this rank cannot take part
  int32_t device;
  uint32_t reserved;
  uint8_t uuid[16];
  IpcHandle workspace;
  uint64_t workspace_bytes;
  uint64_t slot_bytes;
};
static_assert(sizeof(NvlTeamDesc) == 112);

// A description saying "this rank cannot take part".
NvlTeamDesc unusable_nvl_team_desc();
// Copies untrusted bytes into *out if they form a description: exact size,
// magic, version, ok 0 or 1, and for ok 1 a workspace that holds the flags
// and two slots of slot_bytes.
Status decode_nvl_team_desc(const void* data, size_t size, NvlTeamDesc* out);

class NvlTeam {
 public:
  static Result<std::unique_ptr<NvlTeam>> open(DriverApi& driver, int device, int rank,
                                               int nranks, size_t slot_bytes,
                                               uint64_t timeout_ns);
  ~NvlTeam();
  NvlTeam(const NvlTeam&) = delete;
  NvlTeam& operator=(const NvlTeam&) = delete;

  const NvlTeamDesc& desc() const { return desc_; }
  // all: nranks descriptions in rank order, this rank's included. Ranks
  // sharing a GPU are refused unless allow_shared_gpu: their kernels then
  // take turns on the GPU (time slices of another process's context), so
  // every barrier waits for a context switch; correct, only for testing.
  Status connect(const NvlTeamDesc* all, size_t n, bool allow_shared_gpu = false);
  Result<uint64_t> launch(gw_nvl_call_t call);
  // Whether the call of ticket has finished on this GPU. One load; with
  // query, a stream that failed is found too (cudaStreamQuery, 1.5 us). An
  // error (a peer that did not arrive in time, a failed stream) breaks the team.
  Result<bool> finished(uint64_t ticket, bool query);
  Status run(gw_nvl_call_t call);
  // The delegated form: enqueues the whole call's kernel, then the write of
  // `value` into done_device (a host-mapped word, its device address).
  Status launch_all(const gw_nvl_all_call_t& call, uint64_t* done_device, uint64_t value);
  // A failed stream (cudaStreamQuery), else ok; waits for nothing.
  Status stream_status();
  // Waits until everything queued on the team's stream has run.
  Status wait_idle();

  int device() const { return device_; }
  int rank() const { return team_.rank; }
  int nranks() const { return team_.nranks; }
  size_t slot_bytes() const { return team_.slot_bytes; }
  const gw_nvl_team_t& params() const { return team_; }
  bool broken() const { return broken_; }

 private:
  NvlTeam(DriverApi& driver, int device) : driver_(driver), device_(device) {}
  void release();
  Status launch_kernel(gw_nvl_call_t call);
  Status signal(uint64_t ticket);

  DriverApi& driver_;
  const int device_;
  gw_nvl_team_t team_{};
  NvlTeamDesc desc_{};
  void* workspace_ = nullptr;
  // Host-mapped words: the kernels' error flag, then the completion
  // counter the stream writes after each call (done_host_ / done_device_).
  unsigned* error_host_ = nullptr;
  uint64_t* done_host_ = nullptr;
  uint64_t* done_device_ = nullptr;
  bool memop_ = false;  // cuStreamWriteValue64 works on this device
  void* stream_ = nullptr;
  std::vector<uintptr_t> mapped_;  // peers' workspaces, closed by release()
  uint64_t seq_ = 0;
  uint64_t calls_ = 0;
  bool broken_ = false;
};

}  // namespace gpuwire::cuda
