// The embedding files embed writes and ingest, query, serve and aggregate read (layouts in
// docs/formats.md), their names, readers and writers:
//   shards/rank-NNNNN.h5   one per embed rank: its rows, in its order (EmbeddingShardWriter)
//   embeddings.h5          every row of the index in index order: virtual datasets over the
//                          rank shards (no copy), readable as ordinary datasets (h5py, HDF5 1.10+)
//                          (write_embeddings_file, EmbeddingsReader)
//   features/<slide>.h5    one per slide, CLAM/TRIDENT layout (slide_features.h)
// Dataset names live here once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera {

inline constexpr int64_t kEmbedFormatVersion = 2;

namespace embedding_names {
inline constexpr const char* kPatchId = "patch_id";      // int64 [n]
inline constexpr const char* kSlide = "slide";           // int32 [n]
inline constexpr const char* kCoords = "coords";         // int64 [n, 2]
inline constexpr const char* kEmbeddings = "embeddings"; // float32 | float16 [n, D]
inline constexpr const char* kFeatures = "features";     // float32 [n, D], per-slide files
}  // namespace embedding_names

// Paths of embed's exchanged files: relative to its stage directory (as sealed in its _SUCCESS)
// and joined to a stage directory `embed_dir`.
std::string embedding_shard_file(int rank);                   // shards/rank-NNNNN.h5
std::string embeddings_path(const std::string& embed_dir);   // embed_dir/embeddings.h5
std::string slide_features_dir(const std::string& embed_dir);  // embed_dir/features
std::string slide_features_file(const std::string& slide_id);  // features/<slide_id>.h5
std::string slide_features_path(const std::string& embed_dir, const std::string& slide_id);

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

// Where rows of one rank shard appear in embeddings.h5: `blocks` blocks of `block` rows, the
// first at row `first`, each `stride` rows after the previous; they are the shard's rows from
// `shard_first` on, in order (an HDF5 virtual mapping).
struct ShardRows {
  int rank = 0;
  int64_t first = 0;
  int64_t stride = 1;
  int64_t block = 1;
  int64_t blocks = 0;
  int64_t shard_first = 0;
};

// embeddings.h5's attributes on "/".
struct EmbeddingsAttributes {
  int output_dim = 0;
  std::string store_dtype;        // "fp32" or "fp16": the type of /embeddings
  std::string model_fingerprint;  // JSON text
  std::string config_fingerprint;
  std::string patchgen_fingerprint;
  int64_t patch_size = 0;
  double mpp = 0;
  std::string partition;          // the embed partition (PartitionSpec::to_string)
  int64_t num_shards = 0;
};

// Not collective. Writes EMBED_DIR/embeddings.h5 (under a temporary name, renamed when complete):
// /patch_id, /slide, /coords and /embeddings of `rows` rows, virtual datasets over the rank shards
// EMBED_DIR/shards/rank-NNNNN.h5 placed by `mappings` (one shard per element of `shard_rows`).
// First checks that shard r holds shard_rows[r] rows of dimension attributes.output_dim: throws
// IoError naming the shard when it does not, or naming the file on any I/O failure.
void write_embeddings_file(const std::string& embed_dir, int64_t rows,
                           const std::vector<int64_t>& shard_rows,
                           const std::vector<ShardRows>& mappings,
                           const EmbeddingsAttributes& attributes);

// Reads the rows of an embedding file: embeddings.h5 or one rank shard (the same datasets).
// Throws IoError naming the file when it cannot be opened, is of another format version, or its
// datasets are not [n] ids and [n, D] embeddings. Keeps the file open; move-only; not
// thread-safe.
class EmbeddingsReader {
 public:
  explicit EmbeddingsReader(const std::string& path);
  ~EmbeddingsReader();
  EmbeddingsReader(EmbeddingsReader&&) noexcept;
  EmbeddingsReader& operator=(EmbeddingsReader&&) noexcept;

  const std::string& path() const;
  int64_t rows() const;
  int dim() const;
  // Rows [first, first + n): patch ids into `ids` (n values), embeddings as float32 into
  // `values` (n x dim values, converted from float16 where stored so). Throw IoError naming the
  // file for rows past the end.
  void read_ids(int64_t* ids, int64_t first, int64_t n) const;
  void read_values(float* values, int64_t first, int64_t n) const;
  // The listed rows (strictly ascending) in one read each of /patch_id and /embeddings: their
  // ids into `ids` and their embeddings as float32 into `values` (rows.size() x dim), in list
  // order. Throws IoError naming the file for a row past the end or a damaged chunk, and Error
  // for a list that is not strictly ascending.
  void read_row_list(const std::vector<int64_t>& rows, int64_t* ids, float* values) const;
  // Bytes of one stored embedding: dim x 2 (fp16) or dim x 4 (fp32).
  int64_t row_bytes() const;
  // The attributes on "/" (embeddings.h5 only; a rank shard has fewer: throws IoError).
  EmbeddingsAttributes attributes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
