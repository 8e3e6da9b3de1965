#include "stages/status/read.h"

#include <algorithm>
#include <fstream>

#include "common/core/fs.h"
#include "common/core/utf8.h"

namespace tessera::status {

std::optional<nlohmann::json> read_json_noted(const std::string& path, std::string& problem) {
  try {
    return read_json_file(path);
  } catch (const std::exception& e) {
    // The parser's message quotes the bytes it read: shown escaped when they are not UTF-8.
    if (problem.empty()) problem = utf8_escaped(e.what());
    return std::nullopt;
  }
}

std::optional<nlohmann::json> last_progress(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff tail = std::min<std::streamoff>(size, 64 * 1024);
  in.seekg(size - tail);
  std::string text(static_cast<size_t>(tail), '\0');
  in.read(text.data(), tail);
  size_t end = text.size();
  while (end > 0) {
    size_t begin = text.rfind('\n', end - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    std::string line = text.substr(begin, end - begin);
    end = begin == 0 ? 0 : begin - 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      auto j = nlohmann::json::parse(line);
      if (j.is_object()) return j;
    } catch (const nlohmann::json::exception&) {
    }
  }
  return std::nullopt;
}

}  // namespace tessera::status
