// A small streaming JSON writer: objects, arrays, strings (escaped), numbers,
// booleans and null, pretty-printed with two spaces. The caller keeps
// begin/end calls balanced; keys are given only inside objects.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuwire::info {

class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  void begin_object(std::string_view key = {}) { open(key, '{'); }
  void end_object() { close('}'); }
  void begin_array(std::string_view key = {}) { open(key, '['); }
  void end_array() { close(']'); }

  void string(std::string_view key, std::string_view v) {
    item(key);
    quote(v);
  }
  void boolean(std::string_view key, bool v) {
    item(key);
    out_ += v ? "true" : "false";
  }
  void number(std::string_view key, long long v) {
    item(key);
    out_ += std::to_string(v);
  }
  void number(std::string_view key, double v) {
    item(key);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    out_ += buf;
  }
  void null(std::string_view key) {
    item(key);
    out_ += "null";
  }
  void optional_string(std::string_view key, const std::string& v) {
    if (v.empty()) null(key);
    else string(key, v);
  }
  void optional_boolean(std::string_view key, const std::optional<bool>& v) {
    if (v) boolean(key, *v);
    else null(key);
  }
  void optional_number(std::string_view key, const std::optional<int>& v) {
    if (v) number(key, static_cast<long long>(*v));
    else null(key);
  }
  void strings(std::string_view key, const std::vector<std::string>& v) {
    begin_array(key);
    for (const auto& s : v) string({}, s);
    end_array();
  }

 private:
  void item(std::string_view key) {
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
      out_ += '\n';
      out_.append(2 * first_.size(), ' ');
    }
    if (!key.empty()) {
      quote(key);
      out_ += ": ";
    }
  }
  void open(std::string_view key, char c) {
    item(key);
    out_ += c;
    first_.push_back(true);
  }
  void close(char c) {
    bool empty = first_.back();
    first_.pop_back();
    if (!empty) {
      out_ += '\n';
      out_.append(2 * first_.size(), ' ');
    }
    out_ += c;
  }
  // Length of the valid UTF-8 sequence at s[i], or 0 when it is not one.
  static size_t utf8_length(std::string_view s, size_t i) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
    if (n == 0 || i + n > s.size()) return 0;
    for (size_t k = 1; k < n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 0;
    }
    return n;
  }
  void quote(std::string_view s) {
    out_ += '"';
    for (size_t i = 0; i < s.size(); ++i) {
      const auto c = static_cast<unsigned char>(s[i]);
      if (c >= 0x80) {
        size_t n = utf8_length(s, i);
        if (n == 0) {
          out_ += "\\ufffd";  // not UTF-8: replaced, so the output stays valid JSON
        } else {
          out_.append(s.substr(i, n));
          i += n - 1;
        }
        continue;
      }
      switch (c) {
        case '"': out_ += "\\\""; break;
        case '\\': out_ += "\\\\"; break;
        case '\n': out_ += "\\n"; break;
        case '\r': out_ += "\\r"; break;
        case '\t': out_ += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out_ += buf;
          } else {
            out_ += static_cast<char>(c);
          }
      }
    }
    out_ += '"';
  }

  std::string& out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
};

}  // namespace gpuwire::info
