// Where the fabric layer's messages go.
//
// Library code never prints. Everything worth telling a user (a missing
// device, DCQCN switched off, a counter file that reads garbage) is handed as
// one line to a LogSink that the owner supplies; the engine forwards it to
// Open MPI's verbose output, tests collect it in a vector.
//
// Threading: a LogSink is called on the thread that called the fabric
// function; OnceFilter is not thread-safe (one owner, e.g. the progress thread).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <string_view>

namespace gpuwire::fabric {

enum class LogLevel { Error, Warning, Info, Debug };

const char* log_level_name(LogLevel level);

// Receives one line, no trailing newline. An empty LogSink is allowed and
// drops everything.
using LogSink = std::function<void(LogLevel level, std::string_view line)>;

// Remembers which keys were already reported, so a condition that holds on
// every poll (DCQCN off, a garbage counter) is reported once, not per poll.
class OnceFilter {
 public:
  // True the first time `key` is seen, false afterwards.
  bool first_time(std::string_view key);
  void forget_all() { seen_.clear(); }

 private:
  std::set<std::string, std::less<>> seen_;
};

// Sends `line` to `sink` if the sink is set.
void emit(const LogSink& sink, LogLevel level, std::string_view line);

// Sends `line` once per `key` (the key is usually the file the line names).
void emit_once(OnceFilter& once, std::string_view key, const LogSink& sink, LogLevel level,
               std::string_view line);

}  // namespace gpuwire::fabric
