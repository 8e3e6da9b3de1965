// Untiled (stripped) 8-bit RGB TIFFs, which OpenSlide 3.4 does not open (small exports, some older
// scanners): the first directory is the only level, read through libtiff strip by strip (any
// compression libtiff decodes) into the direct reader's bounded tile cache, a strip being a tile
// as wide as the image.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/slide/tile_reader.h"

namespace tessera {

struct StripSlide {
  std::vector<std::pair<int64_t, int64_t>> dims;  // one level
  // openslide.vendor = "stripped-tiff"; tiff.XResolution, tiff.YResolution, tiff.ResolutionUnit
  // as OpenSlide names them, when the file has them.
  std::map<std::string, std::string> properties;
  std::unique_ptr<TileReader> reader;
};

// The largest decoded strip taken (bytes); a file with larger strips is refused (re-save it with
// smaller strips or tiled).
inline constexpr size_t kMaxStripBytes = size_t{256} << 20;

// Opens `path` when its first directory is a stripped, 8-bit, 3-sample, contiguous RGB (or YCbCr
// JPEG) image in top-left orientation whose strips are at most kMaxStripBytes decoded; otherwise
// nullptr with the reason in `why_not`. `cache_bytes` bounds the decoded strips kept (at least
// one); 0 keeps 2048 image rows plus four strips, at most kMaxDefaultTileCache bytes.
std::unique_ptr<StripSlide> open_strip_tiff(const std::string& path, size_t cache_bytes,
                                            std::string* why_not);

}  // namespace tessera
