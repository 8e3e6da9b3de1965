// Tissue detection on slide thumbnails (CLAM-like saturation thresholding), external tissue masks,
// and tissue fractions under level-0 rectangles. Everything here is a pure function of its
// arguments except load_mask, which reads one file. All functions are thread-safe; a TissueIntegral
// may be queried from many threads once built.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/slide/png_io.h"

namespace tessera::patchgen {

// Parameters of detect_tissue. Each one is a patchgen option; the defaults follow CLAM.
struct TissueParams {
  // Level-0 pixels per thumbnail pixel that the caller should aim for when it picks the slide level
  // to detect on. detect_tissue itself uses the downsample it is given, not this value.
  double seg_downsample = 32;
  // Median filter kernel (odd, >= 1; 1 = off) applied to the HSV saturation channel.
  int median_blur = 7;
  // Saturation threshold: -1 = Otsu, else a fixed value in 0..255. Tissue is saturation > threshold.
  int threshold = -1;
  // Lower bound on the Otsu threshold, so that a blank (near-white, noisy) slide gives an empty
  // mask instead of half its noise. Not applied to a fixed threshold.
  int min_saturation = 15;
  // Diameter in thumbnail pixels of the elliptical morphological closing; 0 or 1 = off. Even
  // sizes are allowed and do not shift the mask.
  int close_kernel = 4;
  // Fill holes inside tissue (background regions not connected to the thumbnail border).
  bool fill_holes = true;
  // Connected tissue components (8-connected, after hole filling) whose area is below this many
  // level-0 square micrometres are dropped.
  double min_area_um2 = 10000;
  // With fill_holes: holes larger than this many level-0 square micrometres are kept as holes
  // (like CLAM's a_h); 0 = fill every hole. The default (a square of ~224 um) fills thresholding
  // speckle, fat vacuoles and small lumens but keeps large lumens and tears out of the tissue.
  double min_hole_area_um2 = 50000;
};

// A binary tissue mask on a regular grid over the slide. Pixel (x, y) covers the level-0 rectangle
// [x*downsample_x, (x+1)*downsample_x) x [y*downsample_y, (y+1)*downsample_y).
struct TissueMask {
  int width = 0;
  int height = 0;
  double downsample_x = 1;  // level-0 pixels per mask pixel
  double downsample_y = 1;
  std::vector<uint8_t> data;  // width * height values, row-major, 1 = tissue, 0 = background

  bool empty() const { return width == 0 || height == 0; }
  uint8_t at(int x, int y) const { return data[static_cast<size_t>(y) * width + x]; }
  int64_t tissue_pixels() const;  // number of pixels equal to 1
};

// Detects tissue on an RGB thumbnail whose pixel covers downsample_x by downsample_y level-0
// pixels, with mpp_level0 micrometres per level-0 pixel (used only to convert the area thresholds).
// Steps: RGB -> HSV, saturation, median blur, threshold (Otsu bounded below by min_saturation, or
// fixed), elliptical closing, hole filling, removal of small components. Returns a mask on the
// thumbnail's grid (same width, height and downsamples); a slide without tissue gives an all-zero
// mask. Throws InvalidInput when the thumbnail is not a non-empty 3-channel image, when
// downsamples or mpp_level0 are not positive and finite, or when a parameter is out of range
// (even median_blur, threshold > 255, negative close_kernel or areas).
TissueMask detect_tissue(const Image8& thumbnail_rgb, double downsample_x, double downsample_y,
                         double mpp_level0, const TissueParams& params);

// Loads an external tissue mask for a slide of slide_width x slide_height level-0 pixels.
// Accepted files: PNG (gray or RGB; nonzero in any channel = tissue), anything OpenSlide opens
// (its lowest-resolution level is read; nonzero in any of R, G, B = tissue, transparent = not
// tissue) and other TIFFs through libtiff (smallest directory, any layout libtiff's RGBA reader
// supports; nonzero in any of R, G, B = tissue). Masks larger than 16384 pixels on their long side
// are reduced by an integer factor, a reduced pixel being tissue when at least half of the pixels
// it covers are. The result's downsamples are slide_width / width and slide_height / height.
// Throws InvalidInput naming the file when it is missing, unreadable or of another format, or
// when its aspect ratio differs from the slide's by more than 2% (and by more than one mask pixel).
TissueMask load_mask(const std::string& path, int64_t slide_width, int64_t slide_height);

// The mask as an 8-bit gray image, 255 = tissue (for saving with write_png).
Image8 mask_to_image(const TissueMask& mask);

// Intersection over union of two masks' tissue. When the grids differ, b is resampled onto a's
// grid (nearest neighbour, by level-0 position). Two masks without tissue have IoU 1.
double iou(const TissueMask& a, const TissueMask& b);

// Summed-area table of a mask, for the tissue fraction of many rectangles in O(1) each.
//
// The mask is treated as a piecewise-constant function over level-0 coordinates (see TissueMask);
// fraction(x, y, w, h) is the exact integral of that function over the level-0 rectangle
// [x, x+w) x [y, y+h) divided by w*h. A mask pixel that the rectangle covers only partly counts in
// proportion to the overlapping area, and any part of the rectangle outside the mask's extent
// ([0, width*downsample_x) x [0, height*downsample_y)) counts as non-tissue. Results lie in [0, 1].
class TissueIntegral {
 public:
  TissueIntegral() = default;
  explicit TissueIntegral(const TissueMask& mask) { build(mask); }

  // Replaces the table with one for `mask`. O(width * height).
  void build(const TissueMask& mask);

  // Tissue fraction of the level-0 rectangle (x, y, w, h); 0 when w or h is not positive or
  // nothing was built. O(1), thread-safe.
  double fraction(double x, double y, double w, double h) const;

 private:
  double integral_at(double mx, double my) const;  // tissue area of [0,mx) x [0,my), mask units

  int width_ = 0;
  int height_ = 0;
  double downsample_x_ = 1;
  double downsample_y_ = 1;
  std::vector<double> sums_;  // (width_+1) * (height_+1) summed-area table
};

}  // namespace tessera::patchgen
