#include "gpuwire/cuda/status.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>

#include "internal.hpp"

namespace gpuwire::cuda {

const char* errc_name(Errc code) {
  switch (code) {
    case Errc::ok: return "ok";
    case Errc::no_device: return "no_device";
    case Errc::not_supported: return "not_supported";
    case Errc::invalid_argument: return "invalid_argument";
    case Errc::busy: return "busy";
    case Errc::driver: return "driver";
  }
  return "?";
}

namespace {
// The names of CUDA's error codes, from driver.cpp (set_error_namer);
// "CUDA_ERROR" until it is set.
std::atomic<detail::ErrorNamer> g_namer{nullptr};
}  // namespace

void detail::set_error_namer(ErrorNamer namer) { g_namer.store(namer, std::memory_order_release); }

std::string Status::message() const {
  if (ok()) return "ok";
  char buf[256];
  if (api_ == NativeApi::none) {
    if (native_ != 0)
      std::snprintf(buf, sizeof buf, "%s: %s (%d)", call(), errc_name(code_), native_);
    else
      std::snprintf(buf, sizeof buf, "%s: %s", call(), errc_name(code_));
  } else {
    const detail::ErrorNamer namer = g_namer.load(std::memory_order_acquire);
    std::snprintf(buf, sizeof buf, "%s: %s (%d)", call(),
                  namer != nullptr ? namer(api_, native_) : "CUDA_ERROR", native_);
  }
  return buf;
}

namespace {
std::atomic<LogSink> g_sink{nullptr};
std::atomic<void*> g_sink_arg{nullptr};
}  // namespace

void set_log_sink(LogSink sink, void* arg) {
  g_sink_arg.store(arg, std::memory_order_relaxed);
  g_sink.store(sink, std::memory_order_release);
}

namespace detail {

bool log_enabled() { return g_sink.load(std::memory_order_acquire) != nullptr; }

void log(LogLevel level, const char* fmt, ...) {
  LogSink sink = g_sink.load(std::memory_order_acquire);
  if (!sink) return;
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  sink(level, buf, g_sink_arg.load(std::memory_order_relaxed));
}

Status log_status(LogLevel level, const char* context, Status s) {
  if (!s.ok() && log_enabled()) log(level, "%s: %s", context, s.message().c_str());
  return s;
}

}  // namespace detail
}  // namespace gpuwire::cuda
