// Typed fields of a request's JSON body, refused by name when of the wrong type.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/core/error.h"

namespace tessera::serve {

// body[name] as T. Throws InvalidInput "'name' must be <type>" when it is missing or of another
// type (nlohmann converts between number kinds silently: 2.5 is not an integer here).
template <typename T>
T field(const nlohmann::json& body, const char* name, const char* type) {
  try {
    const nlohmann::json& value = body.at(name);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      if (!value.is_number_integer()) fail<InvalidInput>("'{}' must be {}", name, type);
    }
    if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
      for (const auto& v : value) {
        if (!v.is_number_integer()) fail<InvalidInput>("'{}' must be {}", name, type);
      }
    }
    return value.get<T>();
  } catch (const nlohmann::json::exception&) {
    fail<InvalidInput>("'{}' must be {}", name, type);
  }
}

// body["nprobe"]: IVF lists probed, 0..2^20 (0, also when absent: the catalog's default).
inline int parse_nprobe(const nlohmann::json& body) {
  if (!body.contains("nprobe")) return 0;
  const int64_t nprobe = field<int64_t>(body, "nprobe", "an integer");
  if (nprobe < 0 || nprobe > 1 << 20) fail<InvalidInput>("'nprobe' must be 0..{}", 1 << 20);
  return static_cast<int>(nprobe);
}

// body["filter"]: a filter expression of at most `max_chars` characters; "" when absent, null or
// blank.
inline std::string parse_filter(const nlohmann::json& body, size_t max_chars) {
  if (!body.contains("filter") || body.at("filter").is_null()) return "";
  std::string filter = field<std::string>(body, "filter", "a string");
  if (filter.size() > max_chars) {
    fail<InvalidInput>("'filter' is {} characters long; the limit is {}", filter.size(), max_chars);
  }
  if (filter.find_first_not_of(" \t\r\n\v\f") == std::string::npos) filter.clear();
  return filter;
}

}  // namespace tessera::serve
