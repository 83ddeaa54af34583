#include "gpuwire/cuda/launcher.hpp"

#include <pthread.h>
#include <sched.h>

#include <utility>

namespace gpuwire::cuda {

Launcher::Launcher(std::chrono::microseconds spin, bool unbind) : spin_(spin) {
  worker_ = std::thread([this, unbind] { run(unbind); });
}

Launcher::~Launcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_one();
  worker_.join();
}

void Launcher::submit(std::function<void()> task) {
  bool wake = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    wake = sleeping_;
  }
  // Counted once the lock is free: a spinning worker that sees the count
  // takes the lock at once, and finding it held would sleep in the kernel,
  // which would make this thread's unlock a wake-up system call.
  submitted_.fetch_add(1, std::memory_order_release);
  if (wake) wake_.notify_one();
}

void Launcher::drain() {
  const uint64_t want = submitted_.load(std::memory_order_acquire);
  std::unique_lock<std::mutex> lock(mu_);
  drained_.wait(lock, [&] { return finished_.load(std::memory_order_acquire) >= want; });
}

bool Launcher::take(std::function<void()>& task) {
  if (queue_.empty()) return false;
  task = std::move(queue_.front());
  queue_.pop_front();
  return true;
}

void Launcher::run(bool unbind) {
  if (unbind) {
    // Every core: the kernel keeps only those of the process's cpuset.
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &all);
    unbound_.store(pthread_setaffinity_np(pthread_self(), sizeof(all), &all) == 0,
                   std::memory_order_release);
  }
  std::function<void()> task;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!take(task)) {
        if (stop_) return;
        // Spin a while (without the lock) before sleeping.
        lock.unlock();
        const auto until = std::chrono::steady_clock::now() + spin_;
        const uint64_t seen = finished_.load(std::memory_order_relaxed);
        // The clock is read every 32 pauses: the spin stays light on a core
        // (or hyperthread) it may share with the application.
        for (unsigned i = 1; submitted_.load(std::memory_order_acquire) == seen; ++i) {
#if defined(__x86_64__) || defined(__i386__)
          __builtin_ia32_pause();
#endif
          if (0 == (i & 31) && std::chrono::steady_clock::now() >= until) break;
        }
        lock.lock();
        if (!take(task)) {
          if (stop_) return;
          sleeping_ = true;
          wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
          sleeping_ = false;
          if (!take(task)) return;  // stopping with nothing queued
        }
      }
    }
    task();
    task = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      finished_.fetch_add(1, std::memory_order_release);
    }
    drained_.notify_all();
  }
}

}  // namespace gpuwire::cuda
