// The embedding files embed writes and ingest reads (layouts in docs/formats.md):
//   shards/rank-NNNNN.h5   one per embed rank: its rows, in its order
//   embeddings.h5          every row of the index in index order: virtual datasets over the
//                          rank shards (no copy), readable as ordinary datasets (h5py, HDF5 1.10+)
//   features/<slide>.h5    one per slide (CLAM/TRIDENT layout)
// Dataset names live here once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace tessera {

inline constexpr int64_t kEmbedFormatVersion = 2;

namespace embedding_names {
inline constexpr const char* kPatchId = "patch_id";      // int64 [n]
inline constexpr const char* kSlide = "slide";           // int32 [n]
inline constexpr const char* kCoords = "coords";         // int64 [n, 2]
inline constexpr const char* kEmbeddings = "embeddings"; // float32 | float16 [n, D]
inline constexpr const char* kFeatures = "features";     // float32 [n, D], per-slide files
}  // namespace embedding_names

// Writes one embed rank's shard: the four datasets above, appended batch by batch, chunked with
// per-chunk checksums. Not thread-safe; move-only.
class EmbeddingShardWriter {
 public:
  EmbeddingShardWriter(const std::string& path, int dim, bool fp16, int rank,
                       const std::string& model_fingerprint);
  ~EmbeddingShardWriter();
  EmbeddingShardWriter(EmbeddingShardWriter&&) noexcept;
  EmbeddingShardWriter& operator=(EmbeddingShardWriter&&) noexcept;

  // Appends n rows: ids [n], slides [n], coords [2n], values [n * dim] (converted to float16
  // when the shard stores fp16).
  void append(const int64_t* ids, const int32_t* slides, const int64_t* coords,
              const float* values, size_t n);
  // Closes the file. Throws IoError naming it on failure.
  void close();
  int64_t rows() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
