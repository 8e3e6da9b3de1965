// The writer side of index.h5 (its reader and dataset names: index.h). patchgen's rank 0 writes
// it once per part, streaming rows in patch_id order (a k-way merge of the rank shards) and then
// the slide table; readers find it complete only after commit_file renames it into place.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/store/index.h"

namespace tessera {

// index.h5's attributes on "/".
struct IndexAttributes {
  int patch_size = 0;
  double mpp = 0;
  std::string encoding;
  int num_shards = 0;
  std::string config_fingerprint;
  int part = 0;
  int parts = 1;
  int64_t overlap = 0;  // target pixels neighbouring patches share: max(0, patch_size - stride)
};

// Writes index.h5 at `path` (a temporary name; the caller commits it). Rows are buffered and
// appended in blocks; not thread-safe; move-only.
class IndexWriter {
 public:
  explicit IndexWriter(const std::string& path);
  ~IndexWriter();
  IndexWriter(IndexWriter&&) noexcept;
  IndexWriter& operator=(IndexWriter&&) noexcept;

  // Appends one row; rows must come in ascending patch_id order.
  void add(int64_t patch_id, int32_t slide, int64_t x, int64_t y, float tissue, int32_t shard,
           int64_t row);
  int64_t rows() const;
  // Writes the slide table (every column of `slides`, metadata included) and the attributes,
  // then closes the file. Throws IoError naming the file on failure.
  void finish(const SlideTable& slides, const IndexAttributes& attributes);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
