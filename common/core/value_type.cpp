#include "common/core/value_type.h"

#include <charconv>
#include <cmath>

namespace tessera {

namespace {

// Sets *integral when there is no fraction and no exponent.
bool decimal_syntax(std::string_view s, bool* integral) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
  const auto digits = [&] {
    const size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i - start;
  };
  size_t mantissa = digits();
  bool plain = true;
  if (i < s.size() && s[i] == '.') {
    ++i;
    mantissa += digits();
    plain = false;
  }
  if (mantissa == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    if (digits() == 0) return false;
    plain = false;
  }
  *integral = plain;
  return i == s.size();
}

// from_chars takes no leading '+'.
std::string_view without_plus(std::string_view s) {
  return !s.empty() && s[0] == '+' ? s.substr(1) : s;
}

}  // namespace

bool is_decimal_number(std::string_view text) {
  bool integral = false;
  return decimal_syntax(text, &integral);
}

std::optional<int64_t> parse_int64(std::string_view text) {
  bool integral = false;
  if (!decimal_syntax(text, &integral) || !integral) return std::nullopt;
  const std::string_view s = without_plus(text);
  int64_t value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return value;
}

std::optional<double> parse_double(std::string_view text) {
  bool integral = false;
  if (!decimal_syntax(text, &integral)) return std::nullopt;
  const std::string_view s = without_plus(text);
  double value = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), value);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(value)) return std::nullopt;
  return value;
}

ValueType infer_value_type(const std::vector<std::string>& values) {
  bool any = false;
  bool all_int = true;
  bool all_float = true;
  for (const std::string& v : values) {
    if (v.empty()) continue;
    any = true;
    if (all_int && !parse_int64(v)) all_int = false;
    if (!all_int && !parse_double(v)) {
      all_float = false;
      break;
    }
  }
  if (!any) return ValueType::kString;
  if (all_int) return ValueType::kInt;
  return all_float ? ValueType::kFloat : ValueType::kString;
}

}  // namespace tessera
