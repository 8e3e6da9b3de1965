// Quality control: a slide thumbnail with the tissue outline and the kept patches drawn on it and a
// legend line, the same outlines and patches as GeoJSON for QuPath, and a cohort contact sheet.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/slide/png_io.h"
#include "stages/patchgen/tissue.h"

namespace tessera::patchgen {

// Colours of the QC overlay (RGB).
inline constexpr std::array<uint8_t, 3> kQcContourRgb = {0, 255, 0};  // tissue outline
inline constexpr std::array<uint8_t, 3> kQcPatchRgb = {0, 0, 255};    // patch rectangles

// Long side in pixels of the QC image's thumbnail (smaller slides are not enlarged); independent of
// --seg-downsample.
inline constexpr int kQcLongSide = 2048;

// Up to this many patches the GeoJSON has one Feature per patch; above it, one MultiPolygon
// Feature holds them all (QuPath handles one large annotation better than 10^5 small ones).
inline constexpr size_t kGeoJsonMaxPatchFeatures = 10000;

// Cell side in pixels of the cohort overview for few slides; it shrinks for many slides so that
// the sheet stays under kOverviewMaxPixels pixels, down to kOverviewMinCell.
inline constexpr int kOverviewMaxCell = 256;
inline constexpr int kOverviewMinCell = 64;
inline constexpr int64_t kOverviewMaxPixels = 48LL << 20;

// Draws the QC overlay on a copy of `thumbnail` (RGB, or gray which is expanded to RGB), whose
// pixel covers downsample_x by downsample_y level-0 pixels:
//  - each patch rectangle (x, y, w, h in level-0 pixels) as a 1-pixel blue outline;
//  - then the outlines of the mask's tissue regions and holes in green (2 pixels wide when the
//    thumbnail's long side exceeds 1000 pixels, else 1). The mask may be on any grid; it is
//    resampled onto the thumbnail's by level-0 position. An empty mask (width or height 0) draws no
//    outline, so a failed slide's QC image can show just the thumbnail and whatever patches exist.
//  - with a non-empty `legend`, a white band under the image holding it in black text (one line,
//    scaled down to fit the width), so the result is taller than the thumbnail.
// Throws InvalidInput when the thumbnail is empty or has another channel count, or when the
// downsamples are not positive.
Image8 render_qc(const Image8& thumbnail, double downsample_x, double downsample_y,
                 const TissueMask& mask, const std::vector<std::array<int64_t, 4>>& patch_rects,
                 const std::string& legend = "");

// The legend line of a slide's QC image: "<slide_id> | <n> patches kept | tissue <a> mm2".
std::string qc_legend(const std::string& slide_id, int64_t patches_kept, double tissue_mm2);

// render_qc written as a PNG at `path` with write_png (atomic). Throws as render_qc, and IoError
// naming the path when the file cannot be written. Thread-safe for distinct paths.
void write_qc_png(const std::string& path, const Image8& thumbnail, double downsample_x,
                  double downsample_y, const TissueMask& mask,
                  const std::vector<std::array<int64_t, 4>>& patch_rects,
                  const std::string& legend = "");

// The mask's tissue outlines and the patches as a GeoJSON FeatureCollection in level-0 pixel
// coordinates (QuPath's convention for imported annotations):
//  - one Feature per 8-connected tissue region: a Polygon whose first ring is the region's outer
//    boundary and whose further rings are its holes (cv::findContours with RETR_CCOMP on the mask,
//    vertices at the level-0 centres of the boundary mask pixels; a region of one or two pixels
//    per row and column gets its pixels' bounding square instead), rings closed;
//  - the patches (x, y, w, h in level-0 pixels) as one closed square Polygon Feature each, or, when
//    there are more than kGeoJsonMaxPatchFeatures, as one MultiPolygon Feature.
// Every Feature's properties are {"objectType": "annotation", "classification": {"name":
// "Tissue" or "Patch", "color": [r, g, b]}} with the QC PNG's colours. Tissue Features come first
// in findContours' order, then patches in the given order, so the output is deterministic. An
// empty mask gives no tissue Features.
nlohmann::json qc_geojson(const TissueMask& mask,
                          const std::vector<std::array<int64_t, 4>>& patch_rects);

// qc_geojson written compactly at `path` (atomic). Throws IoError naming the path. Thread-safe for
// distinct paths.
void write_qc_geojson(const std::string& path, const TissueMask& mask,
                      const std::vector<std::array<int64_t, 4>>& patch_rects);

// The cohort contact sheet: a grid of ceil(sqrt(n)) columns of square cells, one per slide in the
// given order, each holding `qc_dir/<id>.png` scaled to fit (aspect kept, area filter), centred
// horizontally and resting on the slide id, written in black on white below it; a slide without
// a QC image gets a gray cell saying so. Reads one
// image at a time (memory: the sheet plus one QC image). Written as a PNG at `path` (atomic).
// Throws IoError naming a file that cannot be read or written.
void write_qc_overview(const std::string& path, const std::string& qc_dir,
                       const std::vector<std::string>& slide_ids);

}  // namespace tessera::patchgen
