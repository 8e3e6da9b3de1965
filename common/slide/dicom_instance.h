// One DICOM instance's attributes as the whole-slide reader needs them, parsed with DCMTK after
// common/slide/dicom_scan.h has bounded what DCMTK meets (nesting depth, encoding), and checked
// against their VRs' ranges and the file's size before any is multiplied or allocated by.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

// One instance (file) of a DICOM series, as far as the reader needs it.
struct DicomInstance {
  std::string file;
  std::string sop_class, series, flavor, transfer, photometric, organization, concatenation;
  int64_t total_w = 0, total_h = 0;
  int64_t tile_w = 0, tile_h = 0;  // Columns, Rows: at most 65535 (check_claims)
  int64_t frames = 1;
  int samples = 0, bits = 0, planar = 0;
  int64_t focal_planes = 1, optical_paths = 1, concatenation_total = 0;
  int64_t concatenation_number = 0, concatenation_frame_offset = 0;
  // A concatenation joined into one level: its parts' files and frame counts, in frame order
  // (empty for a single file).
  std::vector<std::string> part_files;
  std::vector<int64_t> part_frames;
  double spacing_row_mm = 0, spacing_col_mm = 0;
  // Per frame, when the file has per-frame Plane Position (Slide): 1-based column and row of the
  // frame's top-left pixel, and whether it is in the first focal plane and optical path.
  std::vector<std::pair<int64_t, int64_t>> positions;
  std::vector<bool> first_plane;
};

// Parses `file` up to its Pixel Data. Throws IoError naming the file when it cannot be parsed
// (truncated, damaged, sequences nested over kMaxDicomNesting, a transfer syntax that is big
// endian, deflated or unknown), is not a whole-slide image, or claims counts or sizes out of range
// (Rows or Columns over 65535, a Total Pixel Matrix side over 2^32 - 1, more frames than bytes).
DicomInstance read_dicom_instance(const std::string& file);

// `uid` followed by DCMTK's name for it, "1.2.840.10008.1.2.4.80 (JPEGLSLossless)", or `uid`.
std::string dicom_uid_name(const std::string& uid);

}  // namespace tessera
