// A request's JSON body, checked at one edge before anything recurses over it, and its typed
// fields, refused by name when of the wrong type.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/core/error.h"

namespace tessera::serve {

// Arrays and objects a body may nest (the deepest documented body nests 3).
inline constexpr int kMaxBodyDepth = 32;

// The body as a JSON object. Throws InvalidInput when it holds a NUL byte (nothing may follow the
// object), nests arrays and objects deeper than kMaxBodyDepth (counted on the bytes, before the
// parser or anything that walks the parsed value recurses), is not JSON or not an object.
inline nlohmann::json parse_body(const std::string& body) {
  if (const size_t nul = body.find('\0'); nul != std::string::npos) {
    fail<InvalidInput>("the body holds a NUL byte (at byte {})", nul);
  }
  int depth = 0;
  bool in_string = false, escaped = false;
  for (const char c : body) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxBodyDepth) {
        fail<InvalidInput>("the body nests arrays and objects deeper than {} levels", kMaxBodyDepth);
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    fail<InvalidInput>("the body is not JSON: {}", e.what());
  }
  if (!j.is_object()) fail<InvalidInput>("the body must be a JSON object");
  return j;
}

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
    // nlohmann also converts booleans to numbers: true is not 1.0 here.
    if constexpr (std::is_same_v<T, std::vector<float>> || std::is_same_v<T, std::vector<double>>) {
      if (!value.is_array()) fail<InvalidInput>("'{}' must be {}", name, type);
      for (const auto& v : value) {
        if (!v.is_number()) fail<InvalidInput>("'{}' must be {}", name, type);
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
