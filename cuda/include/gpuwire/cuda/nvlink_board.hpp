// NvlBoard: the host memory the ranks of a delegated NVLink team share (a
// POSIX shared-memory segment, mapped by every rank and registered with CUDA
// so that a rank's stream can write into it). One entry per call, reused
// every kEntries calls: each rank's buffer descriptions, an arrival counter
// and a completion word.
//
//   arrived  how many ranks have posted to this entry, over all its uses:
//            the rank whose arrival makes it use * nranks + nranks launches.
//   done     (seq << 1) | failed of the entry's newest finished call: written
//            by the launching rank's stream after the kernel (or by its CPU
//            where it could not launch). Only grows.
//
// A rank posts call seq only once the entry's previous use (seq - kEntries)
// has finished, so an entry's descriptions are never overwritten while a
// launcher may still read them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gpuwire/cuda/status.hpp"

namespace gpuwire::cuda {

class NvlBoard {
 public:
  static constexpr uint64_t kEntries = 256;
  static constexpr size_t kDescBytes = 136;  // GW_COLL_BUF_DESC_BYTES

  // create: the segment is made (O_EXCL; a stale one of the same name is
  // replaced) and its header written; else an existing one is opened and its
  // header checked. Registered with CUDA on `device` either way.
  static Result<std::unique_ptr<NvlBoard>> open(const std::string& name, bool create, int nranks,
                                                int device);
  // Removes the name (every rank has mapped the segment by then); ignores a
  // name that is gone.
  static void unlink(const std::string& name);
  ~NvlBoard();
  NvlBoard(const NvlBoard&) = delete;
  NvlBoard& operator=(const NvlBoard&) = delete;

  uint64_t* arrived(uint64_t seq) const { return word(seq, 0); }
  uint64_t* done(uint64_t seq) const { return word(seq, 1); }
  // The done word's address for the GPU.
  uint64_t* done_device(uint64_t seq) const;
  char* in_desc(uint64_t seq, int rank) const { return desc(seq, 0, rank); }
  char* out_desc(uint64_t seq, int rank) const { return desc(seq, 1, rank); }
  int nranks() const { return nranks_; }

 private:
  NvlBoard() = default;
  char* entry(uint64_t seq) const;
  uint64_t* word(uint64_t seq, int k) const {
    return reinterpret_cast<uint64_t*>(entry(seq) + 64 * k);
  }
  char* desc(uint64_t seq, int k, int rank) const {
    return entry(seq) + 128 + (static_cast<size_t>(k) * nranks_ + rank) * kDescBytes;
  }

  char* base_ = nullptr;
  char* base_device_ = nullptr;
  size_t bytes_ = 0;
  size_t entry_bytes_ = 0;
  int nranks_ = 0;
  int device_ = -1;
  bool registered_ = false;
};

}  // namespace gpuwire::cuda
