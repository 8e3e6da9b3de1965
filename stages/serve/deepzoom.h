// DeepZoom (the pyramid OpenSeadragon reads: a .dzi descriptor and _files/<level>/<col>_<row>
// tiles) over a whole-slide image. Level L of the pyramid is the slide scaled by 2^(L - max), the
// highest level being level 0 of the slide; tiles are kTileSize pixels plus kOverlap pixels on each
// inner edge.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {
class Slide;
}

namespace tessera::serve {

inline constexpr int kTileSize = 254;
inline constexpr int kOverlap = 1;

// A tile's region in its level's pixels.
struct TileRect {
  int64_t x = 0, y = 0;
  int w = 0, h = 0;
};

class DeepZoom {
 public:
  DeepZoom(int64_t width, int64_t height);
  int max_level() const { return max_level_; }
  int64_t level_width(int level) const;
  int64_t level_height(int level) const;
  int64_t columns(int level) const;
  int64_t rows(int level) const;
  // True when (level, col, row) names a tile of the pyramid.
  bool has_tile(int level, int64_t col, int64_t row) const;
  // The tile's region in level `level`'s pixels, overlap included. Requires has_tile.
  TileRect tile(int level, int64_t col, int64_t row) const;
  // Level-0 pixels per pixel of `level`.
  double scale(int level) const;
  // The descriptor (XML) OpenSeadragon reads, tiles as JPEG.
  std::string dzi() const;
  // The lowest level whose longer side is at least `side` pixels (the whole slide in one tile for
  // side <= kTileSize), for thumbnails.
  int level_for(int side) const;

 private:
  int64_t width_, height_;
  int max_level_;
};

// Renders tile (level, col, row) of `slide`'s pyramid as RGB: the region is read from the slide
// level with the largest downsample not above the tile's scale and resized (area averaging).
// Throws InvalidInput when the region to read exceeds `max_read_pixels`, IoError as Slide::read_rgb.
std::vector<uint8_t> render_tile(const Slide& slide, const DeepZoom& zoom, int level, int64_t col,
                                 int64_t row, int64_t max_read_pixels);

}  // namespace tessera::serve
