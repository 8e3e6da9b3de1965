// Path helpers of tessera-status, which looks at a run as it is on disk and never throws on what
// it finds there.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace tessera::status {

inline std::string join_path(const std::string& a, const std::string& b) {
  return (std::filesystem::path(a) / b).string();
}

// Whether `path` is a directory (following links); false when it cannot be told.
inline bool is_dir(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec);
}

}  // namespace tessera::status
