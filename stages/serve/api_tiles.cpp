// Api's pixel routes (api.h): a stored patch as JPEG, and a slide's DeepZoom descriptor, tiles and
// thumbnail, encoded once per generation into the tile cache.
#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/strings.h"
#include "common/slide/slide.h"
#include "common/store/store.h"
#include "stages/serve/api.h"
#include "stages/serve/deepzoom.h"
#include "stages/serve/http_errors.h"

namespace tessera::serve {

using nlohmann::json;

namespace {

constexpr int64_t kMaxTileReadPixels = int64_t{64} << 20;

Response jpeg_response(std::shared_ptr<const std::string> bytes) {
  Response r{200, "image/jpeg", *bytes, {}};
  r.headers.emplace_back("Cache-Control", "private, max-age=3600");
  return r;
}

// A whole decimal number of a request's path (digits only, within int64_t), or nullopt: every
// number taken from a path goes through here.
std::optional<int64_t> parse_id(const std::string& text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

Response Api::patch(const GenerationView& front, const std::string& id) {
  const auto patch_id = parse_id(id);
  if (!patch_id) fail<InvalidInput>("'{}' is not a patch id", id);
  const std::string key = fmt::format("p/{}/{}", front.generation(), *patch_id);
  if (auto hit = tiles_.get(key)) return jpeg_response(hit);
  const auto p = front.find(*patch_id);
  if (!p) throw NotFound(fmt::format("unknown patch id {}", *patch_id));
  std::string why;
  const Image8 image = front.pixels(*p, &why);
  if (image.pixels.empty()) {
    throw Unavailable(fmt::format("the pixels of patch {} cannot be read: {}", *patch_id, why));
  }
  const std::vector<uint8_t> jpeg = encode_jpeg(image.pixels.data(), image.width, image.height, 90);
  auto bytes = std::make_shared<const std::string>(jpeg.begin(), jpeg.end());
  tiles_.put(key, bytes);
  return jpeg_response(bytes);
}

Response Api::slide_resource(const GenerationView& front, const std::string& rest,
                             std::string& name) {
  std::string id;
  int level = -1;
  int64_t col = -1, row = -1;
  enum { kDzi, kTile, kThumbnail } kind;
  if (ends_with(rest, ".dzi")) {
    name = "dzi";
    kind = kDzi;
    id = rest.substr(0, rest.size() - 4);
  } else if (ends_with(rest, "/thumbnail.jpeg")) {
    name = "thumbnail";
    kind = kThumbnail;
    id = rest.substr(0, rest.size() - 15);
  } else {
    name = "tile";
    kind = kTile;
    const size_t files = rest.rfind("_files/");
    if (files == std::string::npos || !ends_with(rest, ".jpeg")) {
      throw NotFound(fmt::format("no slide resource '{}'", rest));
    }
    id = rest.substr(0, files);
    const std::string tile = rest.substr(files + 7, rest.size() - files - 7 - 5);  // L/C_R
    const size_t slash = tile.find('/'), under = tile.find('_');
    if (slash == std::string::npos || under == std::string::npos || under < slash) {
      fail<InvalidInput>("'{}' is not a tile name LEVEL/COL_ROW.jpeg", tile);
    }
    const auto l = parse_id(tile.substr(0, slash));
    const auto c = parse_id(tile.substr(slash + 1, under - slash - 1));
    const auto r = parse_id(tile.substr(under + 1));
    if (!l || !c || !r || *l > 62) fail<InvalidInput>("'{}' is not a tile name LEVEL/COL_ROW.jpeg", tile);
    level = static_cast<int>(*l);
    col = *c;
    row = *r;
  }
  const auto s = front.slide_index(id);
  if (!s) throw NotFound(fmt::format("unknown slide '{}'", id));
  const std::string key = fmt::format("t/{}/{}/{}/{}/{}", front.generation(), *s, kind == kThumbnail ? -1 : level, col, row);
  if (kind != kDzi) {
    if (auto hit = tiles_.get(key)) return jpeg_response(hit);
  }
  std::shared_ptr<const Slide> slide;
  try {
    slide = front.slide(*s);
  } catch (const Error& e) {
    throw Unavailable(fmt::format("slide '{}' cannot be opened: {}", id, e.what()));
  }
  const DeepZoom zoom(slide->width(), slide->height());
  if (kind == kDzi) {
    Response r{200, "application/xml", zoom.dzi(), {}};
    json size = {{"width", slide->width()}, {"height", slide->height()}};
    r.headers.emplace_back("X-Slide-Size", size.dump());
    return r;
  }
  if (kind == kThumbnail) {
    level = zoom.level_for(kTileSize);
    col = row = 0;
    // The whole slide in one tile when its longer side fits one.
    while (level > 0 && (zoom.columns(level) > 1 || zoom.rows(level) > 1)) --level;
  }
  if (!zoom.has_tile(level, col, row)) {
    throw NotFound(fmt::format("slide '{}' has no tile {}/{}_{} (levels 0..{})", id, level, col, row,
                               zoom.max_level()));
  }
  const TileRect t = zoom.tile(level, col, row);
  const std::vector<uint8_t> rgb = render_tile(*slide, zoom, level, col, row, kMaxTileReadPixels);
  const std::vector<uint8_t> jpeg = encode_jpeg(rgb.data(), t.w, t.h, 85);
  auto bytes = std::make_shared<const std::string>(jpeg.begin(), jpeg.end());
  tiles_.put(key, bytes);
  return jpeg_response(bytes);
}

}  // namespace tessera::serve
