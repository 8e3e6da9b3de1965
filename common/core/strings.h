// Small string helpers shared by every module (one definition each, one rule each).
#pragma once

#include <string>
#include <string_view>

namespace tessera {

// `s` without leading and trailing blanks (space, tab, CR, LF).
inline std::string trim(std::string_view s) {
  constexpr std::string_view kBlanks = " \t\r\n";
  const size_t begin = s.find_first_not_of(kBlanks);
  if (begin == std::string_view::npos) return {};
  return std::string(s.substr(begin, s.find_last_not_of(kBlanks) - begin + 1));
}

inline bool starts_with(std::string_view s, std::string_view prefix) {
  return s.size() >= prefix.size() && s.compare(0, prefix.size(), prefix) == 0;
}

inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace tessera
