// The number parser behind every numeric sysfs attribute the fabric layer
// reads (ucx_glue/fabric: parse_unsigned), and the natural order it sorts
// sysfs folder names by (natural_less, which std::sort requires to be a
// strict weak order).
//
// Input: three NUL-separated strings; the whole input is also parsed as one.
#include <cctype>
#include <charconv>

#include "fuzz_target.hpp"
#include "gpuwire/fabric/sysfs.hpp"

namespace {

using gpuwire::fabric::natural_less;
using gpuwire::fabric::parse_unsigned;

// The documented grammar, written independently: optional whitespace, one or
// more decimal digits, optional whitespace, and a value that fits 64 bits.
std::optional<uint64_t> reference_unsigned(std::string_view text) {
  auto space = [](char c) { return std::isspace(static_cast<unsigned char>(c)) != 0; };
  while (!text.empty() && space(text.front())) text.remove_prefix(1);
  while (!text.empty() && space(text.back())) text.remove_suffix(1);
  if (text.empty()) return std::nullopt;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
  }
  uint64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

void check_parse(std::string_view text) {
  const auto got = parse_unsigned(text);
  const auto want = reference_unsigned(text);
  GW_FUZZ_REQUIRE(got.has_value() == want.has_value());
  if (got) GW_FUZZ_REQUIRE(*got == *want);
}

bool equivalent(std::string_view a, std::string_view b) {
  return !natural_less(a, b) && !natural_less(b, a);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using gpuwire::fuzz::as_text;
  check_parse(as_text(data, size));
  const auto f = gpuwire::fuzz::split_fields(data, size, 3);
  for (const auto field : f) check_parse(field);

  const std::string_view a = f[0];
  const std::string_view b = f.size() > 1 ? f[1] : std::string_view("mlx5_10");
  const std::string_view c = f.size() > 2 ? f[2] : std::string_view("mlx5_2");
  // Irreflexive, asymmetric, transitive, and incomparability is transitive.
  GW_FUZZ_REQUIRE(!natural_less(a, a));
  GW_FUZZ_REQUIRE(!(natural_less(a, b) && natural_less(b, a)));
  const std::string_view v[3] = {a, b, c};
  for (int i = 0; i < 3; ++i) {
    for (int j = 0; j < 3; ++j) {
      for (int k = 0; k < 3; ++k) {
        if (natural_less(v[i], v[j]) && natural_less(v[j], v[k])) {
          GW_FUZZ_REQUIRE(natural_less(v[i], v[k]));
        }
        if (equivalent(v[i], v[j]) && equivalent(v[j], v[k])) {
          GW_FUZZ_REQUIRE(equivalent(v[i], v[k]));
        }
      }
    }
  }
  return 0;
}
