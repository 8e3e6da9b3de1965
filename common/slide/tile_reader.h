// Direct reading of tiled slides: tiled JPEG TIFF (generic tiled TIFF, Aperio SVS), where libtiff reads the
// directories, tile offsets and shared JPEG tables once at open; tiles are then read with pread
// and decoded by libjpeg-turbo (its libjpeg API) straight to RGB, each at most once while it stays in the reader's
// cache, and regions are cut from the decoded tiles. DICOM whole-slide images
// (common/slide/dicom_slide.h) give their frames as tiles of the same reader, in JPEG, JPEG 2000
// (OpenJPEG) or uncompressed. Pixels equal OpenSlide's for the TIFF levels it
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

// How a level's tiles are stored.
enum class TileCodec {
  kJpeg,      // a JPEG stream (JPEGTables spliced in front when the level has them)
  kJpeg2000,  // a JPEG 2000 codestream or JP2 file, decoded by OpenJPEG
  kRaw,       // tile_w * tile_h * 3 bytes of interleaved 8-bit RGB
  kSource,    // decoded by the level's TileSource (libtiff for the strips of an untiled TIFF)
};

// Decodes the tiles of a level that another library reads (TileCodec::kSource). decode() is
// called for stored tiles only (size > 0), possibly from several threads at once; it fills
// tile_w * tile_h * 3 bytes of RGB or throws IoError.
class TileSource {
 public:
  virtual ~TileSource() = default;
  virtual void decode(int64_t tile, uint8_t* rgb) = 0;
};

// One level as byte ranges of a file: what TileReader::from_levels reads.
struct TileLevel {
  int64_t width = 0;
  int64_t height = 0;
  int tile_w = 0;
  int tile_h = 0;
  int64_t cols = 0;
  int64_t rows = 0;
  int file = 0;                   // index of the file in from_levels' `files`
  std::vector<int> tile_files;    // per tile, when the tiles lie in several files; else empty
  TileCodec codec = TileCodec::kJpeg;
  bool jpeg_rgb = false;          // kJpeg: decode the streams as RGB (else YCbCr), whatever their markers
  std::vector<uint64_t> offsets;  // per tile, row-major
  std::vector<uint64_t> sizes;    // 0: the file does not store the tile (white)
  std::vector<uint8_t> tables;    // kJpeg: JPEGTables without its EOI, or empty
  std::shared_ptr<TileSource> source;  // kSource: the decoder
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
  // A reader of levels described as byte ranges of `files` (level 0 first); `path` names the slide
  // in messages. The levels are checked (tile grid, offsets, one stored tile of each decodes);
  // nullptr with the reason in `why_not` otherwise. `cache_bytes` as for open().
  static std::unique_ptr<TileReader> from_levels(const std::string& path,
                                                 const std::vector<std::string>& files,
                                                 std::vector<TileLevel> levels, size_t cache_bytes,
                                                 std::string* why_not);
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
  // How `level`'s tiles are stored.
  TileCodec codec(int level) const;
  // The complete JPEG stream of one tile, as the reader decodes it (the shared JPEGTables spliced
  // in front of the tile's own stream); empty when the file does not store the tile. Read with
  // pread, not cached. Throws IoError as read_rgb does. For benchmarks of decoding alone; for a
  // level that is not kJpeg, the tile's stored bytes.
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
