// Typed fields of a request's JSON body, refused by name when of the wrong type.
#pragma once

#include <cstdint>
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

}  // namespace tessera::serve
