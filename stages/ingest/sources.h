// The embed parts an ingest run takes in, read chunk by chunk (embeddings.h5 against the patch
// index, checked row by row), and the deterministic sample of their rows that trains an index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/store/embeddings.h"
#include "common/store/index.h"
#include "common/store/vector_meta.h"

namespace tessera::ingest {

// One embed part taken in, with its patch index.
struct Source {
  int part = 0;
  std::string embed_dir;
  std::string patchgen_dir;
  std::string embeddings_path;
  nlohmann::json embed_success;
  IndexInfo info;
};

// Reads and checks one chunk of a source: rows [first, first + n) of embeddings.h5 and index.h5.
struct Chunk {
  std::vector<float> values;
  VectorRows rows;
};

class SourceReader {
 public:
  explicit SourceReader(const Source& source);
  int dim() const { return dim_; }

  // Throws IoError naming both files when a row of embeddings.h5 is not the index's patch.
  void read(int64_t first, int64_t n, Chunk& chunk);

 private:
  const Source& source_;
  EmbeddingsReader embeddings_;
  IndexReader index_;
  int dim_ = 0;
};

// Training samples runs of this many consecutive rows (embed's chunk of rows), so a sample of n
// rows reads about n / kTrainRun chunks instead of touching every chunk of the input.
inline constexpr int64_t kTrainRun = 256;

// At most `train_size` vectors of `sources` (row-major), from runs of kTrainRun consecutive rows
// chosen with `seed` (Floyd's sampling), in the sources' row order: the same sample for the same
// inputs, whatever the rank count.
std::vector<float> training_sample(const std::vector<Source>& sources, int64_t train_size,
                                   uint64_t seed);

}  // namespace tessera::ingest
