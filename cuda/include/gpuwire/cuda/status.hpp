// Status, Result<T> and the logging sink of the cuda module.
//
// Contract:
// - Every fallible call returns Status (or Result<T>); nothing in this module
//   aborts, throws on a CUDA failure, or prints. Outputs are set only on success.
// - A Status of a failed CUDA call names the call (a string literal) and keeps
//   its native code (cudaError_t or CUresult, told apart by native_api()).
// - Status and Result are plain values: copy/move them freely between threads.
// - The log sink is process-wide. Set it before the first use of the module
//   (set_log_sink is not synchronised with concurrent logging); the sink itself
//   may be called from any thread that uses the module.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace gpuwire::cuda {

enum class Errc : uint8_t {
  ok = 0,
  no_device,         // no driver, no GPU, or built without CUDA
  not_supported,     // the memory or the device cannot do what was asked
  invalid_argument,  // a caller's or a peer's input is malformed
  busy,              // a bounded resource is exhausted for now: retry later
  driver,            // a CUDA call failed: call() names it, native() is its code
};

enum class NativeApi : uint8_t { none, runtime, driver };

class [[nodiscard]] Status {
 public:
  constexpr Status() = default;
  static constexpr Status error(Errc code, const char* call, int native = 0,
                                NativeApi api = NativeApi::none) {
    Status s;
    s.code_ = code;
    s.call_ = call;
    s.native_ = native;
    s.api_ = api;
    return s;
  }
  // A failed CUDA runtime (cudaError_t) or driver (CUresult) call.
  static constexpr Status runtime_error(const char* call, int err) {
    return error(Errc::driver, call, err, NativeApi::runtime);
  }
  static constexpr Status driver_error(const char* call, int err) {
    return error(Errc::driver, call, err, NativeApi::driver);
  }

  constexpr bool ok() const { return code_ == Errc::ok; }
  constexpr explicit operator bool() const { return ok(); }
  constexpr Errc code() const { return code_; }
  // The call or check that failed; "" when ok.
  constexpr const char* call() const { return call_ ? call_ : ""; }
  constexpr int native() const { return native_; }
  constexpr NativeApi native_api() const { return api_; }
  // One line, e.g. "cudaIpcOpenMemHandle: cudaErrorMapBufferObjectFailed (205)".
  std::string message() const;

 private:
  Errc code_ = Errc::ok;
  NativeApi api_ = NativeApi::none;
  int native_ = 0;
  const char* call_ = nullptr;  // always a string literal
};

const char* errc_name(Errc code);

// A value or the Status of why there is none. T may be move-only.
template <class T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(status) {      // NOLINT: implicit by design
    if (status_.ok()) status_ = Status::error(Errc::invalid_argument, "Result(ok status without value)");
  }

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  const Status& status() const { return status_; }

  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

enum class LogLevel : uint8_t { error, warn, info, debug };
using LogSink = void (*)(LogLevel level, const char* message, void* arg);

// nullptr (the default) drops all messages.
void set_log_sink(LogSink sink, void* arg);

namespace detail {
bool log_enabled();
void log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// Logs a failed Status at `level` with a context prefix, and returns it.
Status log_status(LogLevel level, const char* context, Status s);
// The same where nothing is left to return it to (destructors, clean-up).
inline void log_failure(LogLevel level, const char* context, const Status& s) {
  (void)log_status(level, context, s);
}
}  // namespace detail

}  // namespace gpuwire::cuda
