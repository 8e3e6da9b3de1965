// The patch store: one HDF5 shard per patchgen rank (writer) and random access to patches by
// (shard, row) for later stages (reader). The layout is documented in docs/formats.md.
//
// Shard file RUN/patchgen/shards/rank-NNNNN.h5:
//   /patches   uint8 [N,S,S,3] chunked (encoding "raw"), or vlen uint8 [N], one JPEG per patch
//              (encoding "jpeg")
//   /patch_id  int64 [N]     slide_index << 32 | ordinal within the slide, (y, x) order
//   /slide     int32 [N]     manifest index of the slide
//   /coords    int64 [N,2]   level-0 x, y of the patch's top-left corner
//   /tissue    float32 [N]   tissue fraction under the patch footprint
//   attributes on /: format_version, patch_size, mpp, encoding, jpeg_quality, compression,
//   chunk_patches, rank, world_size. Fixed-size datasets carry Fletcher32 checksums per chunk.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

inline constexpr int64_t kStoreFormatVersion = 2;

// Dataset names of a patch shard (listed above). They live here once.
namespace shard_names {
inline constexpr const char* kPatches = "patches";
inline constexpr const char* kPatchesXxh3 = "patches_xxh3";
inline constexpr const char* kPatchId = "patch_id";
inline constexpr const char* kSlide = "slide";
inline constexpr const char* kCoords = "coords";
inline constexpr const char* kTissue = "tissue";
}  // namespace shard_names

struct StoreLayout {
  int patch_size = 224;
  double mpp = 0.5;
  std::string encoding = "raw";  // "raw" or "jpeg"
  int jpeg_quality = 90;
  int deflate_level = 0;         // 0: no compression (raw encoding only)
  int chunk_patches = 64;        // patches per HDF5 chunk and per write
};

// Parses "none", "deflate" (level 4) or "deflate:N" (1..9) into a deflate level; InvalidInput
// otherwise.
int parse_compression(const std::string& text);

// Writes one shard. Patches given one at a time are buffered and written one chunk at a time, so
// at most chunk_patches patches are held in memory. Not thread-safe; all HDF5 calls of the process must
// come from one thread.
class ShardWriter {
 public:
  ShardWriter(const std::string& path, const StoreLayout& layout, int rank, int world_size);
  ~ShardWriter();
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  // Adds one patch of patch_size^2 RGB pixels (JPEG-encoded here when the encoding is "jpeg").
  void add(int64_t patch_id, int32_t slide, int64_t x, int64_t y, float tissue, const uint8_t* rgb);
  // Adds `n` consecutive patches: `rgb` holds n * patch_size^2 RGB pixels, `xy` n (x, y) pairs.
  // With the raw encoding the pixels are written from `rgb` directly, not copied into a chunk
  // buffer (HDF5 writes a part of a chunk straight to the file); the shard holds the same rows as
  // after n calls of add().
  void add_rows(size_t n, const int64_t* patch_ids, const int32_t* slides, const int64_t* xy,
                const float* tissue, const uint8_t* rgb);
  // Adds one patch already encoded as a JPEG of patch_size^2 (encoding "jpeg" only), so that the
  // encoding can run on other threads (patchgen's reader threads).
  void add_encoded(int64_t patch_id, int32_t slide, int64_t x, int64_t y, float tissue,
                   std::vector<uint8_t> jpeg);
  // Writes the buffered patches, flushes and closes the file. Throws IoError on failure.
  void close();
  int64_t rows() const { return rows_; }
  double encode_seconds() const { return encode_s_; }
  double write_seconds() const { return write_s_; }

 private:
  struct Impl;
  // Buffers one row's columns (its pixels or blob are buffered already); flushes a full chunk.
  void add_columns(int64_t patch_id, int32_t slide, int64_t x, int64_t y, float tissue);
  void flush_buffer();
  std::unique_ptr<Impl> impl_;
  int64_t rows_ = 0;
  double encode_s_ = 0;
  double write_s_ = 0;
};

// The non-pixel columns of a shard, read together.
struct ShardColumns {
  std::vector<int64_t> patch_id;
  std::vector<int32_t> slide;
  std::vector<int64_t> coords;  // x0, y0, x1, y1, ...
  std::vector<float> tissue;
};

// A rank's patch shard, relative to the patchgen stage directory: shards/rank-NNNNN.h5.
std::string patch_shard_file(int rank);

// Read access to one shard. Not thread-safe (HDF5).
class ShardReader {
 public:
  explicit ShardReader(const std::string& path);
  ~ShardReader();
  ShardReader(ShardReader&&) noexcept;
  ShardReader& operator=(ShardReader&&) noexcept;

  const std::string& path() const;
  int64_t rows() const;
  int patch_size() const;
  const std::string& encoding() const;
  ShardColumns read_columns() const;
  // Rows [first, first + n) of the non-pixel columns (a reader that streams a shard). Throws
  // IoError naming the shard for rows past its end.
  ShardColumns read_columns(int64_t first, int64_t n) const;
  // Reads the listed rows (ascending, unique) as RGB into `rgb` (rows.size() * S*S*3 bytes),
  // decoding JPEG when needed; consecutive rows are read in one HDF5 call.
  void read_patches(const std::vector<uint64_t>& rows, uint8_t* rgb) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// JPEG encoding and decoding of one RGB patch (libturbojpeg, 4:4:4). Throw IoError on failure.
std::vector<uint8_t> encode_jpeg(const uint8_t* rgb, int width, int height, int quality);
void decode_jpeg(const uint8_t* data, size_t size, int width, int height, uint8_t* rgb);

}  // namespace tessera
