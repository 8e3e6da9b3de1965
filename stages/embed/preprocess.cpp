#include "stages/embed/preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

namespace tessera::embed {
namespace {

// One axis of a bilinear resize: for each output index, the two source indices and weights.
struct Taps {
  std::vector<int> lo, hi;
  std::vector<float> w_lo, w_hi;
};

Taps bilinear_taps(int src, int dst) {
  Taps taps;
  const float scale = static_cast<float>(src) / static_cast<float>(dst);
  for (int i = 0; i < dst; ++i) {
    const float real = std::max(scale * (static_cast<float>(i) + 0.5f) - 0.5f, 0.0f);
    const int lo = static_cast<int>(std::floor(real));
    const float lambda = std::clamp(real - static_cast<float>(lo), 0.0f, 1.0f);
    taps.lo.push_back(lo);
    taps.hi.push_back(lo < src - 1 ? lo + 1 : lo);
    taps.w_lo.push_back(1.0f - lambda);
    taps.w_hi.push_back(lambda);
  }
  return taps;
}

}  // namespace

void preprocess_reference(const uint8_t* rgb, int n, int src, int dst,
                          const std::array<float, 3>& mean, const std::array<float, 3>& std,
                          float* out) {
  const Taps taps = bilinear_taps(src, dst);
  const size_t src_pixels = static_cast<size_t>(src) * src;
  const size_t dst_pixels = static_cast<size_t>(dst) * dst;
  std::vector<float> plane(src_pixels);
  for (int b = 0; b < n; ++b) {
    const uint8_t* image = rgb + static_cast<size_t>(b) * src_pixels * 3;
    for (int c = 0; c < 3; ++c) {
      for (size_t p = 0; p < src_pixels; ++p)
        plane[p] = static_cast<float>(image[p * 3 + c]) / 255.0f;
      const auto at = [&](int y, int x) { return plane[static_cast<size_t>(y) * src + x]; };
      float* target = out + (static_cast<size_t>(b) * 3 + c) * dst_pixels;
      for (int y = 0; y < dst; ++y) {
        for (int x = 0; x < dst; ++x) {
          float v = 0;
          if (src == dst) {
            v = at(y, x);
          } else {
            const float top = taps.w_lo[x] * at(taps.lo[y], taps.lo[x]) +
                              taps.w_hi[x] * at(taps.lo[y], taps.hi[x]);
            const float bottom = taps.w_lo[x] * at(taps.hi[y], taps.lo[x]) +
                                 taps.w_hi[x] * at(taps.hi[y], taps.hi[x]);
            v = taps.w_lo[y] * top + taps.w_hi[y] * bottom;
          }
          target[static_cast<size_t>(y) * dst + x] = (v - mean[c]) / std[c];
        }
      }
    }
  }
}

}  // namespace tessera::embed
