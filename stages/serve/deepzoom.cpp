#include "stages/serve/deepzoom.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <opencv2/imgproc.hpp>

#include "common/core/error.h"
#include "common/slide/slide.h"

namespace tessera::serve {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

DeepZoom::DeepZoom(int64_t width, int64_t height) : width_(width), height_(height) {
  TESSERA_CHECK(width > 0 && height > 0, "DeepZoom of an empty image ({} x {})", width, height);
  max_level_ = 0;
  while ((int64_t{1} << max_level_) < std::max(width, height)) ++max_level_;
}

double DeepZoom::scale(int level) const { return std::ldexp(1.0, max_level_ - level); }

int64_t DeepZoom::level_width(int level) const {
  return std::max<int64_t>(1, ceil_div(width_, int64_t{1} << (max_level_ - level)));
}

int64_t DeepZoom::level_height(int level) const {
  return std::max<int64_t>(1, ceil_div(height_, int64_t{1} << (max_level_ - level)));
}

int64_t DeepZoom::columns(int level) const { return ceil_div(level_width(level), kTileSize); }
int64_t DeepZoom::rows(int level) const { return ceil_div(level_height(level), kTileSize); }

bool DeepZoom::has_tile(int level, int64_t col, int64_t row) const {
  return level >= 0 && level <= max_level_ && col >= 0 && row >= 0 && col < columns(level) &&
         row < rows(level);
}

TileRect DeepZoom::tile(int level, int64_t col, int64_t row) const {
  const int64_t x0 = std::max<int64_t>(0, col * kTileSize - kOverlap);
  const int64_t y0 = std::max<int64_t>(0, row * kTileSize - kOverlap);
  const int64_t x1 = std::min(level_width(level), (col + 1) * kTileSize + kOverlap);
  const int64_t y1 = std::min(level_height(level), (row + 1) * kTileSize + kOverlap);
  return {x0, y0, static_cast<int>(x1 - x0), static_cast<int>(y1 - y0)};
}

std::string DeepZoom::dzi() const {
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<Image xmlns=\"http://schemas.microsoft.com/deepzoom/2008\" Format=\"jpeg\" "
      "Overlap=\"{}\" TileSize=\"{}\"><Size Width=\"{}\" Height=\"{}\"/></Image>\n",
      kOverlap, kTileSize, width_, height_);
}

int DeepZoom::level_for(int side) const {
  for (int level = 0; level <= max_level_; ++level) {
    if (std::max(level_width(level), level_height(level)) >= side) return level;
  }
  return max_level_;
}

std::vector<uint8_t> render_tile(const Slide& slide, const DeepZoom& zoom, int level, int64_t col,
                                 int64_t row, int64_t max_read_pixels) {
  const TileRect t = zoom.tile(level, col, row);
  const double scale = zoom.scale(level);
  int best = 0;
  for (int l = 0; l < slide.level_count(); ++l) {
    if (slide.downsample(l) <= scale * (1 + 1e-9)) best = l;
  }
  const double ds = slide.downsample(best);
  const int64_t x0 = static_cast<int64_t>(std::llround(t.x * scale));
  const int64_t y0 = static_cast<int64_t>(std::llround(t.y * scale));
  // The tile's footprint in the chosen level, clipped to the level (the pyramid rounds up).
  const int rw = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(std::llround(t.w * scale / ds), slide.width(best) - std::llround(x0 / ds))));
  const int rh = static_cast<int>(std::max<int64_t>(
      1, std::min<int64_t>(std::llround(t.h * scale / ds), slide.height(best) - std::llround(y0 / ds))));
  if (static_cast<int64_t>(rw) * rh > max_read_pixels) {
    fail<InvalidInput>("tile {}/{}_{} would read {} x {} pixels of level {} of '{}' (limit {})",
                       level, col, row, rw, rh, best, slide.path(), max_read_pixels);
  }
  std::vector<uint8_t> region(static_cast<size_t>(rw) * rh * 3);
  slide.read_rgb(x0, y0, best, rw, rh, region.data());
  if (rw == t.w && rh == t.h) return region;
  std::vector<uint8_t> out(static_cast<size_t>(t.w) * t.h * 3);
  const cv::Mat src(rh, rw, CV_8UC3, region.data());
  cv::Mat dst(t.h, t.w, CV_8UC3, out.data());
  cv::resize(src, dst, dst.size(), 0, 0, rw > t.w ? cv::INTER_AREA : cv::INTER_LINEAR);
  return out;
}

}  // namespace tessera::serve
