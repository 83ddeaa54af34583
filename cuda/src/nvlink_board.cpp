#include "gpuwire/cuda/nvlink_board.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "internal.hpp"

namespace gpuwire::cuda {

namespace {
constexpr uint64_t kBoardMagic = 0x4452414f424c564eull;  // "NVLBOARD"
constexpr size_t kHeaderBytes = 64;

struct Header {
  uint64_t magic;
  uint64_t nranks;
  uint64_t entries;
  uint64_t entry_bytes;
};

size_t entry_bytes_for(int nranks) {
  const size_t b = 128 + 2 * static_cast<size_t>(nranks) * NvlBoard::kDescBytes;
  return (b + 63) / 64 * 64;
}

// what: a static string naming the call; errno as the native code.
Status sys_error(const char* what, const std::string&) {
  return Status::error(Errc::not_supported, what, errno);
}
}  // namespace

char* NvlBoard::entry(uint64_t seq) const {
  return base_ + kHeaderBytes + (seq % kEntries) * entry_bytes_;
}

uint64_t* NvlBoard::done_device(uint64_t seq) const {
  return reinterpret_cast<uint64_t*>(base_device_ + (reinterpret_cast<char*>(done(seq)) - base_));
}

void NvlBoard::unlink(const std::string& name) { (void)shm_unlink(name.c_str()); }

Result<std::unique_ptr<NvlBoard>> NvlBoard::open(const std::string& name, bool create,
                                                 int nranks, int device) {
  if (nranks < 1 || nranks > 64) {
    return Status::error(Errc::invalid_argument, "NVLink board: ranks out of range");
  }
  std::unique_ptr<NvlBoard> b(new NvlBoard());
  b->nranks_ = nranks;
  b->device_ = device;
  b->entry_bytes_ = entry_bytes_for(nranks);
  b->bytes_ = kHeaderBytes + kEntries * b->entry_bytes_;
  int fd = -1;
  if (create) {
    fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    if (fd < 0 && errno == EEXIST) {
      // Left by a job that ended without removing it: this job's is new.
      (void)shm_unlink(name.c_str());
      fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
    }
    if (fd < 0) return sys_error("shm_open", name);
    if (ftruncate(fd, static_cast<off_t>(b->bytes_)) != 0) {
      Status s = sys_error("ftruncate", name);
      close(fd);
      (void)shm_unlink(name.c_str());
      return s;
    }
  } else {
    fd = shm_open(name.c_str(), O_RDWR, 0);
    if (fd < 0) return sys_error("shm_open", name);
    struct stat st {};
    if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != b->bytes_) {
      close(fd);
      return Status::error(Errc::invalid_argument, "NVLink board: segment of the wrong size");
    }
  }
  void* p = mmap(nullptr, b->bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  Status s = p == MAP_FAILED ? sys_error("mmap", name) : Status{};
  close(fd);
  if (!s) return s;
  b->base_ = static_cast<char*>(p);
  auto* h = reinterpret_cast<Header*>(b->base_);
  if (create) {
    // ftruncate zeroed the entries: no arrival, nothing done.
    h->nranks = static_cast<uint64_t>(nranks);
    h->entries = kEntries;
    h->entry_bytes = b->entry_bytes_;
    __atomic_store_n(&h->magic, kBoardMagic, __ATOMIC_RELEASE);
  } else if (__atomic_load_n(&h->magic, __ATOMIC_ACQUIRE) != kBoardMagic ||
             h->nranks != static_cast<uint64_t>(nranks) || h->entries != kEntries ||
             h->entry_bytes != b->entry_bytes_) {
    return Status::error(Errc::invalid_argument, "NVLink board: bad header");
  }
#if GPUWIRE_HAVE_CUDA
  DeviceGuard guard(device);
  if (!guard.status()) return guard.status();
  s = rt_check(cudaHostRegister(b->base_, b->bytes_, cudaHostRegisterMapped | cudaHostRegisterPortable),
               "cudaHostRegister");
  if (!s) return s;
  b->registered_ = true;
  void* dev = nullptr;
  s = rt_check(cudaHostGetDevicePointer(&dev, b->base_, 0), "cudaHostGetDevicePointer");
  if (!s) return s;
  b->base_device_ = static_cast<char*>(dev);
#else
  return no_cuda_status();
#endif
  return b;
}

NvlBoard::~NvlBoard() {
#if GPUWIRE_HAVE_CUDA
  if (registered_) {
    DeviceGuard guard(device_);
    detail::log_failure(LogLevel::warn, "NvlBoard", rt_check(cudaHostUnregister(base_), "cudaHostUnregister"));
  }
#endif
  if (base_ != nullptr) munmap(base_, bytes_);
}

}  // namespace gpuwire::cuda
