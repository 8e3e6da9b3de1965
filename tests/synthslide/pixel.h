// The pixel arithmetic the synthetic slide painters share.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tessera::synth {

struct Rgb {
  int r, g, b;
};

inline uint8_t clamp_byte(int v) { return static_cast<uint8_t>(std::clamp(v, 0, 255)); }

}  // namespace tessera::synth
