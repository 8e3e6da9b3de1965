#include "tests/synthslide/tissue_layout.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "tests/synthslide/hash.h"

namespace tessera::synth {
namespace {

constexpr int kOctaves = 3;
constexpr std::array<double, kOctaves> kFrequency = {3.0, 6.0, 12.0};  // per longest side
constexpr std::array<double, kOctaves> kAmplitude = {1.0, 0.5, 0.25};
constexpr double kFieldMax = 1.75;      // sum of the amplitudes
constexpr double kBorderMargin = 0.15;  // share of each side over which the field fades
constexpr double kBorderFloor = 0.3;    // field factor at the very border

double smoothstep(double t) { return t * t * (3.0 - 2.0 * t); }

// Value noise in [0, 1): hashed values on the integer lattice, smoothly interpolated.
double value_noise(uint64_t key, double u, double v) {
  const double fu = std::floor(u);
  const double fv = std::floor(v);
  const auto iu = static_cast<int64_t>(fu);
  const auto iv = static_cast<int64_t>(fv);
  const double su = smoothstep(u - fu);
  const double sv = smoothstep(v - fv);
  const double a = unit_double(hash2(key, iu, iv));
  const double b = unit_double(hash2(key, iu + 1, iv));
  const double c = unit_double(hash2(key, iu, iv + 1));
  const double d = unit_double(hash2(key, iu + 1, iv + 1));
  const double top = a + su * (b - a);
  const double bottom = c + su * (d - c);
  return top + sv * (bottom - top);
}

}  // namespace

TissueLayout::TissueLayout(int64_t width, int64_t height, int downsample, double tissue_fraction,
                           uint64_t seed)
    : grid_width_((width + downsample - 1) / downsample),
      grid_height_((height + downsample - 1) / downsample),
      downsample_(downsample),
      cells_(static_cast<size_t>(grid_width_ * grid_height_)) {
  const double longest = static_cast<double>(std::max(width, height));
  std::array<uint64_t, kOctaves> keys{};
  for (int o = 0; o < kOctaves; ++o) keys[o] = salted(seed, 0x7155'0000 + o);

  std::vector<int64_t> histogram(65536, 0);
  for (int64_t j = 0; j < grid_height_; ++j) {
    const double y = std::min((j + 0.5) * downsample, static_cast<double>(height));
    const double edge_y = std::min(y, height - y) / height;
    for (int64_t i = 0; i < grid_width_; ++i) {
      const double x = std::min((i + 0.5) * downsample, static_cast<double>(width));
      const double edge_x = std::min(x, width - x) / width;
      double field = 0.0;
      for (int o = 0; o < kOctaves; ++o) {
        field += kAmplitude[o] *
                 value_noise(keys[o], x / longest * kFrequency[o], y / longest * kFrequency[o]);
      }
      const double edge = std::clamp(std::min(edge_x, edge_y) / kBorderMargin, 0.0, 1.0);
      field *= kBorderFloor + (1.0 - kBorderFloor) * smoothstep(edge);
      const auto q =
          static_cast<uint16_t>(std::lround(std::clamp(field / kFieldMax, 0.0, 1.0) * 65535.0));
      cells_[index(i, j)] = q;
      ++histogram[q];
    }
  }

  // The highest threshold whose count of cells above it is closest to the requested share.
  const auto total = static_cast<int64_t>(cells_.size());
  const auto target = static_cast<int64_t>(std::llround(tissue_fraction * total));
  int64_t above = 0;  // cells with value > t
  int64_t best_error = target;
  int32_t threshold = 65535;
  for (int32_t t = 65534; t >= -1 && above < target; --t) {
    above += histogram[t + 1];
    const int64_t error = std::llabs(above - target);
    if (error < best_error) {
      best_error = error;
      threshold = t;
    }
  }

  // Filling enclosed background adds tissue; the tissue count after filling only falls as the
  // threshold rises, so bisect for the threshold whose filled count is closest to the target.
  std::vector<uint8_t> outside;
  const auto filled_count = [&](int32_t t) {
    outside = background_reaching_border(t);
    return total - std::count(outside.begin(), outside.end(), uint8_t{1});
  };
  if (filled_count(threshold) > target) {
    int32_t lo = threshold;  // filled_count(lo) > target
    int32_t hi = 65535;      // filled_count(hi) == 0 <= target
    while (hi - lo > 1) {
      const int32_t mid = lo + (hi - lo) / 2;
      (filled_count(mid) > target ? lo : hi) = mid;
    }
    threshold =
        std::llabs(filled_count(lo) - target) < std::llabs(filled_count(hi) - target) ? lo : hi;
    filled_count(threshold);
  }
  threshold_ = threshold;
  int64_t tissue = 0;
  for (size_t k = 0; k < cells_.size(); ++k) {
    if (!outside[k] && cells_[k] <= threshold_) cells_[k] = static_cast<uint16_t>(threshold_ + 1);
    tissue += cells_[k] > threshold_;
  }
  tissue_fraction_ = total > 0 ? static_cast<double>(tissue) / total : 0.0;
}

std::vector<uint8_t> TissueLayout::background_reaching_border(int32_t threshold) const {
  std::vector<uint8_t> outside(cells_.size(), 0);
  std::vector<uint32_t> stack;
  const auto visit = [&](int64_t i, int64_t j) {
    const size_t k = index(i, j);
    if (!outside[k] && cells_[k] <= threshold) {
      outside[k] = 1;
      stack.push_back(static_cast<uint32_t>(k));
    }
  };
  for (int64_t i = 0; i < grid_width_; ++i) {
    visit(i, 0);
    visit(i, grid_height_ - 1);
  }
  for (int64_t j = 0; j < grid_height_; ++j) {
    visit(0, j);
    visit(grid_width_ - 1, j);
  }
  while (!stack.empty()) {
    const int64_t k = stack.back();
    stack.pop_back();
    const int64_t i = k % grid_width_;
    const int64_t j = k / grid_width_;
    if (i > 0) visit(i - 1, j);
    if (i + 1 < grid_width_) visit(i + 1, j);
    if (j > 0) visit(i, j - 1);
    if (j + 1 < grid_height_) visit(i, j + 1);
  }
  return outside;
}

AxisSample TissueLayout::axis_sample(int64_t p, int64_t cells) const {
  const float u = (static_cast<float>(p) + 0.5f) / static_cast<float>(downsample_) - 0.5f;
  AxisSample s;
  if (u <= 0.0f) return s;
  const auto lo = static_cast<int64_t>(u);
  if (lo >= cells - 1) {
    s.lo = s.hi = static_cast<int32_t>(cells - 1);
    return s;
  }
  s.lo = static_cast<int32_t>(lo);
  s.hi = static_cast<int32_t>(lo + 1);
  s.weight = u - static_cast<float>(lo);
  return s;
}

bool TissueLayout::any_tissue(int64_t i0, int64_t j0, int64_t i1, int64_t j1) const {
  for (int64_t j = j0; j <= j1; ++j) {
    const uint16_t* row = &cells_[index(0, j)];
    for (int64_t i = i0; i <= i1; ++i) {
      if (row[i] > threshold_) return true;
    }
  }
  return false;
}

bool TissueLayout::all_tissue(int64_t i0, int64_t j0, int64_t i1, int64_t j1) const {
  for (int64_t j = j0; j <= j1; ++j) {
    const uint16_t* row = &cells_[index(0, j)];
    for (int64_t i = i0; i <= i1; ++i) {
      if (row[i] <= threshold_) return false;
    }
  }
  return true;
}

Image8 TissueLayout::mask() const {
  Image8 image{static_cast<int>(grid_width_), static_cast<int>(grid_height_), 1, {}};
  image.pixels.resize(cells_.size());
  std::transform(cells_.begin(), cells_.end(), image.pixels.begin(),
                 [this](uint16_t v) { return v > threshold_ ? uint8_t{255} : uint8_t{0}; });
  return image;
}

}  // namespace tessera::synth
