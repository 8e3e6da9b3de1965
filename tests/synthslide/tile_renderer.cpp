#include "tests/synthslide/tile_renderer.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tests/synthslide/hash.h"
#include "tests/synthslide/pixel.h"

namespace tessera::synth {
namespace {

constexpr int kStromaPeriod = 512;  // level-0 px; textures repeat with lcm(512, 384) = 1536 px
constexpr int kDensityPeriod = 384;
constexpr int kNoisePeriod = 512;  // level-local px
constexpr int kNucleusCell = 24;   // one nucleus at most per 24 x 24 level-0 px
constexpr int kHoleShift = 9;      // one fat hole at most per 512 x 512 level-0 px
constexpr int kHoleCell = 1 << kHoleShift;
constexpr int kHoleMinRadius = 14;
constexpr int kHoleRadiusRange = 27;
constexpr double kHoleProbability = 0.3;
constexpr int kHoleClearance = 8;   // tissue must extend this far beyond a hole's rim
constexpr int kJitterVariants = 4;  // sample positions per column / row on reduced levels

constexpr Rgb kBackground = {238, 236, 240};
constexpr Rgb kStromaLight = {241, 182, 216};
constexpr Rgb kStromaDark = {204, 108, 164};
constexpr Rgb kNucleus = {104, 62, 152};
constexpr Rgb kFat = {244, 241, 244};

enum Salt : uint64_t {
  kSaltStroma = 0x5700,
  kSaltDensity = 0xde00,
  kSaltNoise = 0x4e00,
  kSaltJitter = 0x1a00,
  kSaltPick = 0x1b00,
  kSaltNucleus = 0x2c00,
  kSaltHole = 0x3d00,
  kSaltClass = 0x4f00,
};

// Tileable value noise on a period x period grid with lattice spacing (step_x, step_y), which must
// divide the period; values in [0, 1).
void add_periodic_noise(uint64_t key, int period, int step_x, int step_y, double amplitude,
                        std::vector<double>* out) {
  const int nx = period / step_x;
  const int ny = period / step_y;
  for (int y = 0; y < period; ++y) {
    const int ly = y / step_y;
    double fy = static_cast<double>(y % step_y) / step_y;
    fy = fy * fy * (3.0 - 2.0 * fy);
    for (int x = 0; x < period; ++x) {
      const int lx = x / step_x;
      double fx = static_cast<double>(x % step_x) / step_x;
      fx = fx * fx * (3.0 - 2.0 * fx);
      const double a = unit_double(hash2(key, lx, ly));
      const double b = unit_double(hash2(key, (lx + 1) % nx, ly));
      const double c = unit_double(hash2(key, lx, (ly + 1) % ny));
      const double d = unit_double(hash2(key, (lx + 1) % nx, (ly + 1) % ny));
      const double top = a + fx * (b - a);
      const double bottom = c + fx * (d - c);
      (*out)[static_cast<size_t>(y) * period + x] += amplitude * (top + fy * (bottom - top));
    }
  }
}

// Maps noise values to 0..255, stretching [lo, hi] to the full range.
std::vector<uint8_t> to_bytes(const std::vector<double>& values, double lo, double hi) {
  std::vector<uint8_t> bytes(values.size());
  std::transform(values.begin(), values.end(), bytes.begin(), [lo, hi](double v) {
    return static_cast<uint8_t>(std::lround(std::clamp((v - lo) / (hi - lo), 0.0, 1.0) * 255.0));
  });
  return bytes;
}

inline void put(uint8_t* px, int r, int g, int b) {
  px[0] = clamp_byte(r);
  px[1] = clamp_byte(g);
  px[2] = clamp_byte(b);
}

// A level-0 coordinate along one axis and everything derived from it alone.
struct AxisInfo {
  AxisSample field;
  int64_t pos = 0;     // the level-0 coordinate
  int32_t stroma = 0;  // texture index contribution (rows premultiplied by the period)
  int32_t nucleus_cell = 0;
  int32_t nucleus_offset = 0;
  int32_t hole_cell = 0;
  int32_t hole_offset = 0;
};

inline AxisInfo axis_info(const TissueLayout& layout, int64_t p, bool is_row) {
  AxisInfo a;
  a.field = is_row ? layout.axis_sample_y(p) : layout.axis_sample_x(p);
  a.pos = p;
  a.stroma = static_cast<int32_t>((p & (kStromaPeriod - 1)) * (is_row ? kStromaPeriod : 1));
  a.nucleus_cell = static_cast<int32_t>(p / kNucleusCell);
  a.nucleus_offset = static_cast<int32_t>(p % kNucleusCell);
  a.hole_cell = static_cast<int32_t>(p >> kHoleShift);
  a.hole_offset = static_cast<int32_t>(p & (kHoleCell - 1));
  return a;
}

struct Hole {
  bool present = false;
  int32_t cx = 0;
  int32_t cy = 0;
  int32_t r2 = 0;
};

// At most one elliptic nucleus per kNucleusCell square, entirely inside it.
struct Nucleus {
  bool present = false;
  int32_t cx = 0, cy = 0;            // centre, cell-relative
  int32_t rx2 = 0, ry2 = 0, rr = 0;  // squared semi-axes and their product
  int32_t shade = 0;
};

Nucleus make_nucleus(uint64_t key, const std::vector<uint8_t>& density_texture, int64_t cell_x,
                     int64_t cell_y) {
  const uint64_t h = hash2(key, cell_x, cell_y);
  const int density = density_texture[((cell_y * kNucleusCell) % kDensityPeriod) * kDensityPeriod +
                                      (cell_x * kNucleusCell) % kDensityPeriod];
  Nucleus n;
  if (static_cast<int>(h & 0xff) >= 50 + density / 2) return n;
  const auto rx = static_cast<int32_t>(4 + (h >> 8) % 5);
  const auto ry = static_cast<int32_t>(4 + (h >> 12) % 5);
  n.present = true;
  n.cx = rx + static_cast<int32_t>((h >> 16) % (kNucleusCell - 2 * rx));
  n.cy = ry + static_cast<int32_t>((h >> 24) % (kNucleusCell - 2 * ry));
  n.rx2 = rx * rx;
  n.ry2 = ry * ry;
  n.rr = n.rx2 * n.ry2;
  n.shade = static_cast<int32_t>((h >> 32) % 41) - 20;
  return n;
}

// Copies `count` background pixels of one noise row starting at column index `first`.
void copy_background(const uint8_t* background_row, int32_t first, int count, uint8_t* out) {
  while (count > 0) {
    const int run = std::min(count, kNoisePeriod - first);
    std::memcpy(out, background_row + 3 * first, static_cast<size_t>(run) * 3);
    out += 3 * run;
    count -= run;
    first = 0;
  }
}

// What one tile needs to shade tissue: the holes and nuclei over its level-0 footprint.
class TissueShader {
 public:
  TissueShader(const TissueLayout& layout, const std::vector<uint8_t>& stroma_texture,
               const std::vector<uint8_t>& density_texture, uint64_t seed, int64_t width,
               int64_t height, const AxisInfo& first_col, const AxisInfo& last_col,
               const AxisInfo& first_row, const AxisInfo& last_row, bool all_tissue, int64_t pixels,
               const ClassMap* classes, const std::array<int, 3>& stain)
      : layout_(layout),
        classes_(classes),
        stain_(stain),
        class_key_(salted(seed, kSaltClass)),
        stroma_texture_(stroma_texture),
        density_texture_(density_texture),
        threshold_(static_cast<float>(layout.threshold())),
        all_tissue_(all_tissue),
        nucleus_key_(salted(seed, kSaltNucleus)),
        hx0_(first_col.hole_cell),
        hy0_(first_row.hole_cell),
        nhx_(last_col.hole_cell - hx0_ + 1),
        nx0_(first_col.nucleus_cell),
        ny0_(first_row.nucleus_cell),
        nnx_(last_col.nucleus_cell - nx0_ + 1) {
    if (classes_ != nullptr) return;  // class tissue has neither legacy holes nor nuclei
    const int32_t nhy = last_row.hole_cell - hy0_ + 1;
    holes_.resize(static_cast<size_t>(nhx_) * nhy);
    const uint64_t hole_key = salted(seed, kSaltHole);
    for (int32_t hy = 0; hy < nhy; ++hy) {
      for (int32_t hx = 0; hx < nhx_; ++hx) {
        holes_[static_cast<size_t>(hy) * nhx_ + hx] =
            make_hole(hole_key, hx0_ + hx, hy0_ + hy, width, height);
        any_hole_ = any_hole_ || holes_[static_cast<size_t>(hy) * nhx_ + hx].present;
      }
    }
    const int64_t nny = last_row.nucleus_cell - ny0_ + 1;
    if (int64_t{nnx_} * nny <= pixels) {
      nuclei_.resize(static_cast<size_t>(nnx_ * nny));
      for (int64_t j = 0; j < nny; ++j) {
        for (int64_t i = 0; i < nnx_; ++i) {
          nuclei_[static_cast<size_t>(j * nnx_ + i)] =
              make_nucleus(nucleus_key_, density_texture_, nx0_ + i, ny0_ + j);
        }
      }
    }
  }

  // Writes the colour of the level-0 point (col, row) to px if it is tissue; returns false (and
  // writes nothing) if it is background. `lum` is the pixel's luminance noise in -6..6.
  bool shade(const AxisInfo& col, const AxisInfo& row, int lum, uint8_t* px) const {
    if (!all_tissue_ && !(layout_.interpolate(col.field, row.field) > threshold_)) return false;
    if (classes_ != nullptr) {
      shade_class(classes_->class_at(col.pos, row.pos), col.pos, row.pos, lum,
                  stroma_texture_[row.stroma + col.stroma], class_key_, stain_, px);
      return true;
    }
    if (any_hole_) {
      const Hole& hole =
          holes_[static_cast<size_t>(row.hole_cell - hy0_) * nhx_ + (col.hole_cell - hx0_)];
      const int32_t dx = col.hole_offset - hole.cx;
      const int32_t dy = row.hole_offset - hole.cy;
      if (hole.present && dx * dx + dy * dy < hole.r2) {
        put(px, kFat.r + lum / 2, kFat.g + lum / 2, kFat.b + lum / 2);
        return true;
      }
    }
    Nucleus computed;
    const Nucleus* nucleus = &computed;
    if (nuclei_.empty()) {
      computed = make_nucleus(nucleus_key_, density_texture_, col.nucleus_cell, row.nucleus_cell);
    } else {
      nucleus = &nuclei_[static_cast<size_t>(int64_t{row.nucleus_cell - ny0_} * nnx_ +
                                             (col.nucleus_cell - nx0_))];
    }
    if (nucleus->present) {
      const int32_t dx = col.nucleus_offset - nucleus->cx;
      const int32_t dy = row.nucleus_offset - nucleus->cy;
      if (dx * dx * nucleus->ry2 + dy * dy * nucleus->rx2 <= nucleus->rr) {
        const int shade = nucleus->shade + lum * 2;
        put(px, kNucleus.r + shade, kNucleus.g + shade * 3 / 4, kNucleus.b + shade);
        return true;
      }
    }
    const int t = stroma_texture_[row.stroma + col.stroma];
    put(px, kStromaLight.r + (((kStromaDark.r - kStromaLight.r) * t) >> 8) + lum,
        kStromaLight.g + (((kStromaDark.g - kStromaLight.g) * t) >> 8) + lum,
        kStromaLight.b + (((kStromaDark.b - kStromaLight.b) * t) >> 8) + lum);
    return true;
  }

 private:
  // A fat hole exists only where tissue surrounds it with some clearance.
  Hole make_hole(uint64_t key, int32_t cell_x, int32_t cell_y, int64_t width,
                 int64_t height) const {
    const uint64_t h = hash2(key, cell_x, cell_y);
    if (unit_double(h) >= kHoleProbability) return {};
    const int32_t r = kHoleMinRadius + static_cast<int32_t>((h >> 8) % kHoleRadiusRange);
    const int32_t cx = r + static_cast<int32_t>((h >> 20) % (kHoleCell - 2 * r));
    const int32_t cy = r + static_cast<int32_t>((h >> 36) % (kHoleCell - 2 * r));
    const int64_t ox = int64_t{cell_x} * kHoleCell + cx;
    const int64_t oy = int64_t{cell_y} * kHoleCell + cy;
    const int64_t reach = r + kHoleClearance;
    if (ox - reach < 0 || oy - reach < 0 || ox + reach >= width || oy + reach >= height) return {};
    if (!layout_.pixel_is_tissue(ox, oy)) return {};
    for (int k = 0; k < 8; ++k) {
      const double angle = k * 0.7853981633974483;
      if (!layout_.pixel_is_tissue(ox + std::lround(reach * std::cos(angle)),
                                   oy + std::lround(reach * std::sin(angle)))) {
        return {};
      }
    }
    return Hole{true, cx, cy, r * r};
  }

  const TissueLayout& layout_;
  const ClassMap* classes_;
  std::array<int, 3> stain_;
  uint64_t class_key_;
  const std::vector<uint8_t>& stroma_texture_;
  const std::vector<uint8_t>& density_texture_;
  float threshold_;
  bool all_tissue_;
  uint64_t nucleus_key_;
  int32_t hx0_, hy0_, nhx_;
  bool any_hole_ = false;
  std::vector<Hole> holes_;
  int32_t nx0_, ny0_, nnx_;
  std::vector<Nucleus> nuclei_;  // empty: computed per pixel (more cells than pixels)
};

}  // namespace

TileRenderer::TileRenderer(const TissueLayout& layout, int64_t width, int64_t height, uint64_t seed,
                           const ClassMap* classes, const std::array<int, 3>& stain)
    : layout_(layout),
      classes_(classes),
      stain_(stain),
      width_(width),
      height_(height),
      seed_(seed) {
  std::vector<double> stroma(static_cast<size_t>(kStromaPeriod) * kStromaPeriod, 0.0);
  add_periodic_noise(salted(seed, kSaltStroma + 0), kStromaPeriod, 64, 16, 0.45, &stroma);
  add_periodic_noise(salted(seed, kSaltStroma + 1), kStromaPeriod, 16, 4, 0.35, &stroma);
  add_periodic_noise(salted(seed, kSaltStroma + 2), kStromaPeriod, 4, 4, 0.20, &stroma);
  stroma_texture_ = to_bytes(stroma, 0.2, 0.8);

  std::vector<double> density(static_cast<size_t>(kDensityPeriod) * kDensityPeriod, 0.0);
  add_periodic_noise(salted(seed, kSaltDensity + 0), kDensityPeriod, 96, 96, 0.7, &density);
  add_periodic_noise(salted(seed, kSaltDensity + 1), kDensityPeriod, 32, 48, 0.3, &density);
  density_texture_ = to_bytes(density, 0.25, 0.75);

  const size_t noise_size = static_cast<size_t>(kNoisePeriod) * kNoisePeriod;
  pixel_noise_.resize(noise_size);
  pixel_jitter_.resize(noise_size);
  background_rgb_.resize(noise_size * 3);
  const uint64_t noise_key = salted(seed, kSaltNoise);
  const uint64_t pick_key = salted(seed, kSaltPick);
  for (size_t i = 0; i < noise_size; ++i) {
    const uint64_t h = mix64(noise_key ^ i);
    pixel_noise_[i] = static_cast<uint8_t>((h & 0xffff) * 13 >> 16);
    const int lum = static_cast<int>(((h >> 16) & 0xffff) * 7 >> 16) - 3;
    put(&background_rgb_[3 * i], kBackground.r + lum, kBackground.g + lum, kBackground.b + lum);
    pixel_jitter_[i] = static_cast<uint8_t>(mix64(pick_key ^ i));
  }
}

void TileRenderer::render(int level, int64_t level_width, int64_t level_height, int64_t tile_x,
                          int64_t tile_y, int tile_size, uint8_t* rgb) const {
  const int64_t span = int64_t{1} << level;
  const int cols_inside = static_cast<int>(std::clamp<int64_t>(level_width - tile_x, 0, tile_size));
  const int rows_inside =
      static_cast<int>(std::clamp<int64_t>(level_height - tile_y, 0, tile_size));
  const size_t row_bytes = static_cast<size_t>(tile_size) * 3;

  // Level-local noise indices (rows premultiplied by the period).
  std::vector<int32_t> noise_col(tile_size);
  std::vector<int32_t> noise_row(tile_size);
  for (int k = 0; k < tile_size; ++k) {
    noise_col[k] = static_cast<int32_t>((tile_x + k + 173 * level) % kNoisePeriod);
    noise_row[k] = static_cast<int32_t>((tile_y + k + 311 * level) % kNoisePeriod) * kNoisePeriod;
  }
  const auto background_row = [&](int y) {
    return &background_rgb_[static_cast<size_t>(noise_row[y]) * 3];
  };

  // The level-0 extent sampled by the tile: pixel q covers [q * span, (q + 1) * span).
  bool any = false;
  bool all = false;
  AxisInfo first_col, last_col, first_row, last_row;
  if (cols_inside > 0 && rows_inside > 0) {
    first_col = axis_info(layout_, tile_x * span, false);
    last_col = axis_info(layout_, std::min((tile_x + cols_inside) * span - 1, width_ - 1), false);
    first_row = axis_info(layout_, tile_y * span, true);
    last_row = axis_info(layout_, std::min((tile_y + rows_inside) * span - 1, height_ - 1), true);
    any = layout_.any_tissue(first_col.field.lo, first_row.field.lo, last_col.field.hi,
                             last_row.field.hi);
    all = any && layout_.all_tissue(first_col.field.lo, first_row.field.lo, last_col.field.hi,
                                    last_row.field.hi);
  }
  if (!any) {
    for (int y = 0; y < tile_size; ++y) {
      copy_background(background_row(y), noise_col[0], tile_size, rgb + y * row_bytes);
    }
    return;
  }

  const TissueShader shader(layout_, stroma_texture_, density_texture_, seed_, width_, height_,
                            first_col, last_col, first_row, last_row, all,
                            int64_t{cols_inside} * rows_inside, classes_, stain_);
  // On reduced levels each column and row gets kJitterVariants random level-0 positions within
  // its footprint and each pixel picks one of each at random: colour averages are unbiased and
  // there are no row or column streaks, at the cost of table lookups only.
  const int variants = level == 0 ? 1 : kJitterVariants;
  const uint64_t jitter_key = salted(seed_, kSaltJitter + level);
  const auto make_axis = [&](int64_t first, int inside, int64_t full_size, bool is_row) {
    std::vector<AxisInfo> axis(static_cast<size_t>(variants) * tile_size);
    for (int v = 0; v < variants; ++v) {
      for (int k = 0; k < inside; ++k) {
        const int64_t q = first + k;
        const int64_t jitter =
            level == 0 ? 0 : static_cast<int64_t>(hash2(jitter_key, q, v * 2 + is_row) % span);
        axis[static_cast<size_t>(v) * tile_size + k] =
            axis_info(layout_, std::min(q * span + jitter, full_size - 1), is_row);
      }
    }
    return axis;
  };
  const std::vector<AxisInfo> cols = make_axis(tile_x, cols_inside, width_, false);
  const std::vector<AxisInfo> rows = make_axis(tile_y, rows_inside, height_, true);
  for (int y = 0; y < tile_size; ++y) {
    uint8_t* out = rgb + y * row_bytes;
    const uint8_t* background = background_row(y);
    if (y >= rows_inside) {
      copy_background(background, noise_col[0], tile_size, out);
      continue;
    }
    for (int x = 0; x < tile_size; ++x) {
      uint8_t* px = out + 3 * x;
      const int32_t noise = noise_row[y] + noise_col[x];
      bool tissue = false;
      if (x < cols_inside) {
        const uint8_t pick = variants == 1 ? 0 : pixel_jitter_[noise];
        tissue = shader.shade(cols[(pick & (kJitterVariants - 1)) * tile_size + x],
                              rows[(pick >> 4 & (kJitterVariants - 1)) * tile_size + y],
                              static_cast<int>(pixel_noise_[noise]) - 6, px);
      }
      if (!tissue) std::memcpy(px, background + 3 * noise_col[x], 3);
    }
  }
}

}  // namespace tessera::synth
