// Quality-control images: a slide thumbnail with the tissue outline and the kept patches drawn on it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "common/slide/png_io.h"
#include "stages/patchgen/tissue.h"

namespace tessera::patchgen {

// Colours of the QC overlay (RGB).
inline constexpr std::array<uint8_t, 3> kQcContourRgb = {0, 255, 0};  // tissue outline
inline constexpr std::array<uint8_t, 3> kQcPatchRgb = {0, 0, 255};    // patch rectangles

// Draws the QC overlay on a copy of `thumbnail` (RGB, or gray which is expanded to RGB), whose
// pixel covers downsample_x by downsample_y level-0 pixels:
//  - each patch rectangle (x, y, w, h in level-0 pixels) as a 1-pixel blue outline;
//  - then the outlines of the mask's tissue regions and holes in green (2 pixels wide when the
//    thumbnail's long side exceeds 1000 pixels, else 1). The mask may be on any grid; it is
//    resampled onto the thumbnail's by level-0 position. An empty mask (width or height 0) draws no
//    outline, so a failed slide's QC image can show just the thumbnail and whatever patches exist.
// Throws InvalidInput when the thumbnail is empty or has another channel count, or when the
// downsamples are not positive.
Image8 render_qc(const Image8& thumbnail, double downsample_x, double downsample_y,
                 const TissueMask& mask, const std::vector<std::array<int64_t, 4>>& patch_rects);

// render_qc written as a PNG at `path` with write_png (atomic). Throws as render_qc, and IoError
// naming the path when the file cannot be written. Thread-safe for distinct paths.
void write_qc_png(const std::string& path, const Image8& thumbnail, double downsample_x,
                  double downsample_y, const TissueMask& mask,
                  const std::vector<std::array<int64_t, 4>>& patch_rects);

}  // namespace tessera::patchgen
