// PNG reading and writing through libpng (OpenCV's imgcodecs is deliberately not used: it pulls a
// serial HDF5 and GDAL into the process).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

// An 8-bit image with 1 (gray) or 3 (RGB) interleaved channels, rows contiguous.
struct Image8 {
  int width = 0;
  int height = 0;
  int channels = 0;
  std::vector<uint8_t> pixels;  // width * height * channels bytes
};

// Writes `image` as an 8-bit PNG at `path` (via a temporary file and rename).
// Throws IoError naming the path on failure. Thread-safe for distinct paths.
void write_png(const std::string& path, const Image8& image);

// Reads any PNG (palette, 16-bit and alpha are converted) into 8-bit gray (channels=1) or RGB
// (channels=3) as stored; gray+alpha becomes gray, RGBA becomes RGB. Throws IoError naming the
// path when the file is missing or not a valid PNG. With max_pixels > 0, throws InvalidInput
// naming the path and the size when the header gives more than max_pixels pixels, before any
// pixel memory is allocated.
Image8 read_png(const std::string& path, uint64_t max_pixels = 0);

}  // namespace tessera
