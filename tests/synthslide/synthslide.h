// Synthetic whole-slide images for tests and benchmarks: a deterministic pyramidal tiled JPEG TIFF
// with H&E-like tissue that OpenSlide opens through its generic-tiff backend, plus the exact
// tissue ground truth as a coarse PNG mask.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera::synth {

struct SlideSpec {
  std::string path;   // output .tif; written via a temporary file in the same directory and rename
  int64_t width = 0;  // level-0 pixels
  int64_t height = 0;
  uint64_t seed = 1;
  double mpp = 0.5;               // microns per level-0 pixel
  int tile_size = 256;            // multiple of 16
  int jpeg_quality = 85;          // 1..100
  std::string mask_path;          // ground-truth PNG; "" = none
  int mask_downsample = 32;       // level-0 pixels per mask pixel (and per tissue-layout cell)
  double tissue_fraction = 0.35;  // approximate share of area covered by tissue; 0 = blank slide
  bool write_resolution = true;   // false: no resolution tags (a slide without mpp, for tests)
  bool force_bigtiff = false;     // BigTIFF even when the file is sure to stay below 2 GiB
  // Labelled tissue (tissue_classes.h): one region per entry, of that class (1..4); empty = the
  // default unlabelled H&E look, byte-identical to slides made before classes existed.
  std::vector<int> region_classes;
  std::string class_mask_path;         // class ground truth PNG (needs region_classes); "" = none
  std::array<int, 3> stain_offset{};   // RGB offset of class tissue (a patient's stain variation)
};

struct SlideSummary {
  std::vector<std::pair<int64_t, int64_t>> level_dims;  // (width, height) per level, level 0 first
  double tissue_fraction_actual = 0.0;                  // share of mask cells that are tissue
  uint64_t bytes = 0;                                   // size of the written TIFF
  bool bigtiff = false;
  std::array<double, 4> class_fractions{};  // share of tissue cells per class 1..4 (labelled)
};

// Dimensions of the pyramid for a width x height slide: level l is ceil(width / 2^l) x
// ceil(height / 2^l); levels are added until the largest dimension of the last one is < 1024.
std::vector<std::pair<int64_t, int64_t>> level_dimensions(int64_t width, int64_t height);

// Writes the slide described by `spec` (and its mask when spec.mask_path is set, its class mask
// when spec.class_mask_path is set: one pixel per mask cell, the class id 1..4 of tissue cells
// and 0 elsewhere).
//
// The TIFF holds one tiled, JPEG-compressed (YCbCr 4:2:0) RGB directory per pyramid level, reduced
// levels marked SubfileType=REDUCEDIMAGE. With write_resolution, every level carries
// XResolution = YResolution = 10000 / (mpp * 2^l) pixels per centimetre and ResolutionUnit =
// CENTIMETER. BigTIFF is used when the file could exceed 2 GiB. The same spec always yields a
// byte-identical file. Each level is rendered tile by tile straight from procedural functions,
// so memory stays at a few tens of MB whatever the size (the tissue layout takes 2 bytes per mask
// pixel). Single-threaded; calls for distinct paths may run concurrently.
//
// Throws InvalidInput for an invalid spec (non-positive or > 2^31 sizes, tile size not a multiple
// of 16, quality outside 1..100, mpp not positive, tissue fraction outside [0, 1], mask grid over
// 2^28 pixels, a class outside 1..4, a class mask without classes, a stain offset outside
// -64..64) and IoError naming the file when writing fails; no partial file is left at
// spec.path then.
SlideSummary write_slide(const SlideSpec& spec);

}  // namespace tessera::synth
