// synthslide --format dicom: the DICOM whole-slide image twin of a synthetic TIFF slide, one VL
// Whole Slide Microscopy Image instance per pyramid level in one series (a folder), written with
// DCMTK. The frames come from the TIFF written first by write_slide, so that the twins' pixels are
// equal by construction:
//   - JPEG baseline: each frame is the TIFF tile's complete JPEG stream (JPEGTables spliced in
//     front, exactly the stream the direct reader decodes for the TIFF), photometric YBR_FULL_422;
//   - JPEG 2000: each frame is the TIFF tile's decoded pixels, encoded losslessly (reversible 5/3
//     wavelet, no colour transform, photometric RGB), so it decodes to the same pixels;
//   - uncompressed (explicit VR little endian): the decoded pixels as they are.
// TILED_FULL stores every tile in row-major order. TILED_SPARSE stores the tiles column by column
// with their Plane Position (Slide) and leaves out tiles whose pixels are all white (the reader
// paints absent tiles white, so pixels stay equal).
#pragma once

#include <cstdint>
#include <string>

#include "tests/synthslide/synthslide.h"

namespace tessera::synth {

enum class DicomCodec { kJpeg, kJpeg2000, kRaw };

struct DicomSpec {
  std::string dir;                    // output folder, created; files level-<N>.dcm
  DicomCodec codec = DicomCodec::kJpeg;
  bool sparse = false;                // TILED_SPARSE instead of TILED_FULL
  bool write_spacing = true;          // false: no Pixel Measures (a converter's file, for tests)
  bool write_organization = true;     // false: no Dimension Organization Type (ditto)
};

struct DicomSummary {
  int levels = 0;
  int64_t frames = 0;          // frames written over all levels
  int64_t omitted_tiles = 0;   // TILED_SPARSE: all-white tiles left out
};

// "jpeg", "j2k" or "raw"; throws InvalidInput otherwise.
DicomCodec parse_dicom_codec(const std::string& text);

// Writes the DICOM series of the slide `spec` (whose TIFF is at spec.path, written by
// write_slide). The same spec always gives byte-identical files (UIDs derive from the seed).
// Throws IoError naming the file when writing fails.
DicomSummary write_dicom_series(const SlideSpec& spec, const DicomSpec& dicom);

}  // namespace tessera::synth
