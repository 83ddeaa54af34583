#include "gpuwire/fabric/log_sink.hpp"

namespace gpuwire::fabric {

const char* log_level_name(LogLevel level) {
  switch (level) {
    case LogLevel::Error: return "error";
    case LogLevel::Warning: return "warning";
    case LogLevel::Info: return "info";
    case LogLevel::Debug: return "debug";
  }
  return "?";
}

bool OnceFilter::first_time(std::string_view key) {
  if (seen_.find(key) != seen_.end()) return false;
  seen_.emplace(key);
  return true;
}

void emit(const LogSink& sink, LogLevel level, std::string_view line) {
  if (sink) sink(level, line);
}

void emit_once(OnceFilter& once, std::string_view key, const LogSink& sink, LogLevel level,
               std::string_view line) {
  if (once.first_time(key)) emit(sink, level, line);
}

}  // namespace gpuwire::fabric
