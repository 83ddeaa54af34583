// Launcher: one worker thread that runs tasks in the order they were given.
// The delegated NVLink form hands it the kernel launch of a call whose last
// rank has just initiated it, so that the initiating call returns at once
// and the launch (buffer mappings, the kernel, its completion word: tens of
// microseconds under CUDA MPS) overlaps what the application does next.
//
// After a task the worker spins for `spin` before it sleeps, so that calls
// that come in quick succession do not pay a wake-up each. With `unbind`,
// the worker leaves the binding it inherits (a rank bound to one core would
// otherwise share that core with it, and the launch would wait for the
// application's own work) for every core the process's cpuset allows.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace gpuwire::cuda {

class Launcher {
 public:
  Launcher(std::chrono::microseconds spin, bool unbind);
  // Runs what is still queued, then joins the worker.
  ~Launcher();
  Launcher(const Launcher&) = delete;
  Launcher& operator=(const Launcher&) = delete;

  // Queues a task; it runs on the worker after every task given before it.
  void submit(std::function<void()> task);
  // Returns once every task submitted before the call has run.
  void drain();
  // Tasks run so far.
  uint64_t finished() const { return finished_.load(std::memory_order_acquire); }
  // Whether the worker left the inherited binding (unbind asked and allowed).
  bool unbound() const { return unbound_.load(std::memory_order_acquire); }

 private:
  void run(bool unbind);
  bool take(std::function<void()>& task);  // under mu_

  const std::chrono::microseconds spin_;
  std::mutex mu_;
  std::condition_variable wake_;     // the worker sleeps on it
  std::condition_variable drained_;  // drain() waits on it
  std::deque<std::function<void()>> queue_;
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> finished_{0};
  std::atomic<bool> unbound_{false};
  bool sleeping_ = false;  // under mu_
  bool stop_ = false;      // under mu_
  std::thread worker_;
};

}  // namespace gpuwire::cuda
