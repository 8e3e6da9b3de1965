// Renders tiles of any pyramid level of a synthetic H&E slide straight from procedural functions
// of level-0 coordinates, so no level is ever held in memory.
//
// Content: near-white noisy background (values about 233-243); tissue (as decided by the
// TissueLayout) is pink eosin stroma with fibrous texture, purple hematoxylin nuclei (elliptic
// blobs of 8-16 px), and occasional small white fat holes (radius 14-40 px) that lie entirely
// inside tissue and count as tissue in the ground truth.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "tests/synthslide/tissue_classes.h"
#include "tests/synthslide/tissue_layout.h"

namespace tessera::synth {

class TileRenderer {
 public:
  // `layout` must outlive the renderer. width x height are the level-0 dimensions. With
  // `classes` (which must outlive the renderer too), tissue is drawn by class (shade_class, with
  // the `stain` offset) instead of the default H&E look; without, the output is as before.
  TileRenderer(const TissueLayout& layout, int64_t width, int64_t height, uint64_t seed,
               const ClassMap* classes = nullptr, const std::array<int, 3>& stain = {0, 0, 0});

  // Fills `rgb` (tile_size * tile_size * 3 bytes, interleaved RGB) with the tile whose top-left
  // pixel is (tile_x, tile_y) in level `level` coordinates, where level l is the slide reduced by
  // 2^l. Each level-l pixel shows the content at one pseudo-random level-0 point of its
  // 2^l x 2^l footprint, so colour averages over a region are unbiased. Pixels outside the
  // level's level_width x level_height are background. Deterministic; const and thread-safe.
  void render(int level, int64_t level_width, int64_t level_height, int64_t tile_x, int64_t tile_y,
              int tile_size, uint8_t* rgb) const;

 private:
  const TissueLayout& layout_;
  const ClassMap* classes_;
  std::array<int, 3> stain_;
  int64_t width_;
  int64_t height_;
  uint64_t seed_;
  std::vector<uint8_t> stroma_texture_;   // kStromaPeriod^2, 0..255
  std::vector<uint8_t> density_texture_;  // kDensityPeriod^2, 0..255
  std::vector<uint8_t> pixel_noise_;      // kNoisePeriod^2 luminance offsets, 0..12
  std::vector<uint8_t> background_rgb_;   // kNoisePeriod^2 RGB background pixels
  std::vector<uint8_t> pixel_jitter_;     // kNoisePeriod^2 random bytes (sample position picks)
};

}  // namespace tessera::synth
