// Direct reading of tiled JPEG TIFF slides (generic tiled TIFF, Aperio SVS): libtiff reads the
// directories, tile offsets and shared JPEG tables once at open; tiles are then read with pread
// and decoded by libjpeg-turbo (its libjpeg API) straight to RGB, each at most once while it stays in the reader's
// cache, and regions are cut from the decoded tiles. Pixels equal OpenSlide's for the levels it
// accepts (same libjpeg-turbo, same IDCT and upsampling, white where OpenSlide is transparent):
// common/slide/tile_reader_test.cpp compares every pixel.
//
// Thread-safe: threads reading one slide share its cache, and a tile that several threads need at
// once is decoded by one of them while the others wait for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace tessera {

struct TileReaderStats {
  int64_t tiles_decoded = 0;  // JPEG decodes (a tile decoded again after eviction counts again)
  int64_t tile_hits = 0;      // tiles served from the cache
  int64_t bytes_read = 0;     // compressed bytes read from the file
  double read_s = 0;          // pread of compressed tiles
  double decode_s = 0;        // JPEG decoding
};

// The most decoded-tile bytes the default cache holds (see TileReader::open).
inline constexpr size_t kMaxDefaultTileCache = size_t{512} << 20;

class TileReader {
 public:
  // Opens `path` for direct reading when every level of `levels` (OpenSlide's level dimensions,
  // level 0 first) is a tiled directory of the file with those dimensions holding 8-bit, 3-sample,
  // contiguous JPEG tiles (YCbCr or RGB, decoded as the photometric says, as OpenSlide does) in top-left
  // orientation. Returns nullptr with the reason in `why_not` otherwise (the caller then reads
  // with OpenSlide). `cache_bytes` bounds the decoded tiles kept (at least one tile); 0 keeps three
  // tile rows of the widest level plus four tiles, at most kMaxDefaultTileCache bytes, so that
  // patches visited row by row decode each tile once, also when several threads read consecutive
  // batches of them (patches in flight spanning two patch rows touch up to three tile rows).
  static std::unique_ptr<TileReader> open(const std::string& path,
                                          const std::vector<std::pair<int64_t, int64_t>>& levels,
                                          size_t cache_bytes, std::string* why_not);
  ~TileReader();
  TileReader(const TileReader&) = delete;
  TileReader& operator=(const TileReader&) = delete;

  // Reads the w x h region whose top-left corner is (x, y) in `level`'s own pixels, as RGB
  // (w*h*3 bytes). Pixels outside the level, and in tiles the file does not store, are white (as
  // OpenSlide's transparent pixels after argb_to_rgb). Throws IoError naming the file, level and
  // tile on a read or decode failure, corrupt data that libjpeg would decode with a warning
  // included (OpenSlide returns such tiles damaged). May be called from several threads at once.
  void read_rgb(int level, int64_t x, int64_t y, int w, int h, uint8_t* rgb);

  TileReaderStats stats() const;

  // Tile width and height of `level`.
  std::pair<int, int> tile_size(int level) const;
  // The complete JPEG stream of one tile, as the reader decodes it (the shared JPEGTables spliced
  // in front of the tile's own stream); empty when the file does not store the tile. Read with
  // pread, not cached. Throws IoError as read_rgb does. For benchmarks of decoding alone.
  std::vector<uint8_t> jpeg_stream(int level, int64_t col, int64_t row) const;

 private:
  struct Impl;
  using TileBuffer = std::shared_ptr<const std::vector<uint8_t>>;
  explicit TileReader(std::unique_ptr<Impl> impl);
  // The decoded tile, held for the caller (the cache may evict it meanwhile); nullptr when the
  // file does not store it.
  TileBuffer tile(int level, int64_t col, int64_t row);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
