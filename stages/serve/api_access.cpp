// Api's authentication (bearer token or the page's cookie) and the web page's static files (api.h).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/strings.h"
#include "stages/serve/api.h"

namespace tessera::serve {

namespace fs = std::filesystem;

namespace {

std::string content_type(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".png") return "image/png";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".json" || ext == ".map") return "application/json";
  return "application/octet-stream";
}

}  // namespace

bool constant_time_equal(const std::string& a, const std::string& b) {
  // The length is not secret; the content is compared in full whatever it holds.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

std::optional<std::string> cookie_value(const std::string& header, const std::string& name) {
  size_t at = 0;
  while (at <= header.size()) {
    const size_t end = std::min(header.find(';', at), header.size());
    const std::string_view pair(header.data() + at, end - at);
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && trim(pair.substr(0, eq)) == name) {
      return trim(pair.substr(eq + 1));
    }
    at = end + 1;
  }
  return std::nullopt;
}

std::map<std::string, std::string> Api::load_files(const std::string& dir) {
  if (!fs::is_regular_file(fs::path(dir) / "index.html")) {
    fail<IoError>("'{}' holds no index.html: build the web page (cmake --build BUILD --target "
                  "serve_web) or give --web-dir",
                  dir);
  }
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string rel = fs::relative(entry.path(), dir).generic_string();
    if (rel.rfind("npm/", 0) == 0) continue;  // the installer's own folder
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    files["/" + rel] = bytes.str();
  }
  return files;
}

bool Api::authorized(const Request& request) const {
  if (token_.empty()) return true;
  const std::string bearer = "Bearer ";
  if (request.authorization.rfind(bearer, 0) == 0 &&
      constant_time_equal(request.authorization.substr(bearer.size()), token_)) {
    return true;
  }
  // The page's own requests (tiles, thumbnails) carry the token as a cookie.
  const std::optional<std::string> cookie = cookie_value(request.cookie, "tessera_token");
  return cookie && constant_time_equal(*cookie, token_);
}

Response Api::static_file(const std::string& path) const {
  const auto it = files_.find(path == "/" ? "/index.html" : path);
  if (it == files_.end()) return error_response(404, fmt::format("no page file {}", path));
  return {200, content_type(it->first), it->second, {}};
}

}  // namespace tessera::serve
