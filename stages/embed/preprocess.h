// The reference definition of model input preprocessing, in plain scalar C++. Model::prepare does
// the same with libtorch kernels; tests hold the two against each other and against hand-computed
// values. Torch-free.
#pragma once

#include <array>
#include <cstdint>

namespace tessera::embed {

// Converts `n` square RGB patches of side `src` (uint8, interleaved, row-major: [n, src, src, 3])
// into normalised planar float input of side `dst` ([n, 3, dst, dst], written to `out`, which
// must hold n * 3 * dst * dst floats):
//   v = pixel / 255;  v = resize(v) when src != dst;  out = (v - mean[c]) / std[c]
// resize is bilinear with align_corners = false and no antialiasing, i.e. exactly
// torch.nn.functional.interpolate(mode="bilinear", align_corners=False, antialias=False): output
// pixel i samples source coordinate (i + 0.5) * src / dst - 0.5, clamped below at 0, between its
// two neighbours (the upper one clamped to the last pixel). Downscaling by more than 2x therefore
// skips source pixels (aliasing): extract patches at the model's input size where possible.
// Preconditions (unchecked): n >= 0, src >= 1, dst >= 1, std entries non-zero. Thread-safe.
void preprocess_reference(const uint8_t* rgb, int n, int src, int dst,
                          const std::array<float, 3>& mean, const std::array<float, 3>& std,
                          float* out);

}  // namespace tessera::embed
