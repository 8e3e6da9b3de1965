// Integer hashing for procedural content: cheap, stateless and identical on every platform, so a
// seed always renders the same slide.
#pragma once

#include <cstdint>

namespace tessera::synth {

// SplitMix64 finaliser: a bijective mix of all 64 bits.
inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Hash of a 2-D integer lattice point under `key` (a seed already mixed with a per-use salt).
inline uint64_t hash2(uint64_t key, int64_t x, int64_t y) {
  return mix64(key ^ mix64(static_cast<uint64_t>(x) * 0xd1b54a32d192ed03ULL +
                           static_cast<uint64_t>(y) * 0xaef17502108ef2d9ULL));
}

// Uniform double in [0, 1) from the top 53 bits of a hash.
inline double unit_double(uint64_t h) { return static_cast<double>(h >> 11) * 0x1.0p-53; }

// Derives an independent key for one use of the seed.
inline uint64_t salted(uint64_t seed, uint64_t salt) {
  return mix64(seed * 0x9e3779b97f4a7c15ULL ^ salt);
}

}  // namespace tessera::synth
