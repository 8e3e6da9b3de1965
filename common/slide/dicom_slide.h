// DICOM whole-slide images (VL Whole Slide Microscopy Image Storage) as levels of the direct tile
// reader. DCMTK parses each instance's attributes; common/slide/dicom_scan.h finds the frames'
// byte ranges; TileReader then reads frames with pread and decodes them (JPEG baseline with
// libjpeg-turbo, JPEG 2000 with OpenJPEG, explicit VR little endian uncompressed as is).
//
// A slide is a folder holding the instances of one series, or one .dcm file. Levels are the
// VOLUME instances sorted by Total Pixel Matrix size, largest first; LABEL, OVERVIEW and THUMBNAIL
// instances are recognised and skipped. TILED_FULL frames fill the tile grid in order (and files
// without Dimension Organization Type are read so when their frame count matches the grid);
// TILED_SPARSE frames are placed by their Plane Position (Slide); tiles without a frame are
// white. With several focal planes or optical paths, the first of each is read (logged).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/slide/tile_reader.h"

namespace tessera {

struct DicomSlide {
  std::vector<std::pair<int64_t, int64_t>> dims;  // per level, level 0 first
  std::vector<double> downsamples;                // as OpenSlide computes them from dims
  // openslide.vendor = "dicom"; openslide.mpp-x/y (µm/px, from level 0's Pixel Measures; absent
  // without them); dicom.* (transfer syntax, dimension organization, series UID, levels' files).
  std::map<std::string, std::string> properties;
  std::unique_ptr<TileReader> reader;
};

// Whether `path` is taken as DICOM: a folder, or a file with the DICOM preamble ("DICM" at byte
// 128).
bool is_dicom_path(const std::string& path);

// Opens the DICOM slide at `path`. Throws IoError naming the path with the exact reason when it
// cannot be read (not a whole-slide image, no pyramid level, unsupported transfer syntax or pixel
// format, split concatenation, truncated file, ...). `cache_bytes` as for TileReader::open.
DicomSlide open_dicom_slide(const std::string& path, size_t cache_bytes);

}  // namespace tessera
