#include "stages/patchgen/grid.h"

#include <cmath>

#include "common/core/error.h"

namespace tessera::patchgen {

LevelChoice choose_level(const std::vector<double>& downsamples, double mpp0, double target_mpp,
                         int patch_size, double tolerance) {
  TESSERA_CHECK(!downsamples.empty() && mpp0 > 0 && target_mpp > 0 && patch_size > 0,
                "choose_level: invalid arguments (levels {}, mpp0 {}, target {}, patch {})",
                downsamples.size(), mpp0, target_mpp, patch_size);
  int best = 0;
  for (int l = 0; l < static_cast<int>(downsamples.size()); ++l) {
    double mpp = mpp0 * downsamples[l];
    if (mpp <= target_mpp * (1 + tolerance) && mpp > mpp0 * downsamples[best]) best = l;
  }
  LevelChoice c;
  c.level = best;
  c.level_downsample = downsamples[best];
  c.level_mpp = mpp0 * c.level_downsample;
  if (std::abs(c.level_mpp - target_mpp) <= tolerance * target_mpp) {
    c.read_size = patch_size;
    c.resample = false;
  } else {
    c.read_size = std::max(1, static_cast<int>(std::lround(patch_size * target_mpp / c.level_mpp)));
    c.resample = c.read_size != patch_size;
  }
  c.footprint = c.read_size * c.level_downsample;
  return c;
}

int nearest_level(const std::vector<double>& downsamples, double target_downsample) {
  int best = 0;
  double best_distance = INFINITY;
  for (int l = 0; l < static_cast<int>(downsamples.size()); ++l) {
    double d = std::abs(std::log(downsamples[l] / target_downsample));
    if (d < best_distance - 1e-9) {
      best = l;
      best_distance = d;
    }
  }
  return best;
}

int segmentation_level(const std::vector<double>& downsamples, double seg_downsample) {
  if (downsamples.empty() || !(seg_downsample > 0)) {
    fail<InvalidInput>("segmentation_level: invalid arguments (levels {}, seg_downsample {})",
                       downsamples.size(), seg_downsample);
  }
  constexpr double kTolerance = 0.01;
  const int n = static_cast<int>(downsamples.size());
  int best = 0;
  for (int l = 0; l < n; ++l) {
    if (downsamples[l] <= seg_downsample * (1 + kTolerance) && downsamples[l] > downsamples[best]) {
      best = l;
    }
  }
  if (seg_downsample / downsamples[best] <= kMaxSegReadRatio) return best;
  int coarser = -1;
  for (int l = 0; l < n; ++l) {
    if (downsamples[l] > downsamples[best] &&
        (coarser < 0 || downsamples[l] < downsamples[coarser])) {
      coarser = l;
    }
  }
  return coarser < 0 ? best : coarser;
}

int64_t grid_positions(int64_t extent, double footprint, double stride0) {
  int64_t n = 0;
  while (std::llround(static_cast<double>(n) * stride0) + static_cast<int64_t>(std::ceil(footprint)) <=
         extent) {
    ++n;
  }
  return n;
}

std::vector<GridPatch> make_grid(int64_t width, int64_t height, const LevelChoice& level,
                                 int patch_size, int stride, double min_tissue,
                                 const TissueIntegral* tissue) {
  TESSERA_CHECK(stride > 0 && patch_size > 0 && level.footprint > 0,
                "make_grid: invalid stride {} or patch size {}", stride, patch_size);
  const double stride0 = stride * level.footprint / patch_size;
  const int64_t nx = grid_positions(width, level.footprint, stride0);
  const int64_t ny = grid_positions(height, level.footprint, stride0);
  std::vector<GridPatch> patches;
  for (int64_t j = 0; j < ny; ++j) {
    const int64_t y = std::llround(static_cast<double>(j) * stride0);
    for (int64_t i = 0; i < nx; ++i) {
      const int64_t x = std::llround(static_cast<double>(i) * stride0);
      double fraction = tissue ? tissue->fraction(static_cast<double>(x), static_cast<double>(y),
                                                  level.footprint, level.footprint)
                               : 1.0;
      if (fraction >= min_tissue) patches.push_back({x, y, static_cast<float>(fraction)});
    }
  }
  return patches;
}

}  // namespace tessera::patchgen
