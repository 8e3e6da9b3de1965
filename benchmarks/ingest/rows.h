// The rows of a synthetic run's embeddings.h5, in memory: what the raw FAISS builds add and the
// exact ground truth is searched over.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::ingest_bench {

struct Rows {
  int dim = 0;
  std::vector<float> values;  // count() x dim
  std::vector<int64_t> ids;   // patch ids
  int64_t count() const { return static_cast<int64_t>(ids.size()); }
};

// Every row of RUN/embed/<kTag>/embeddings.h5 with its patch ids, read as ingest reads them
// (kBlockRows at a time). Throws IoError when the file cannot be read.
Rows read_rows(const std::string& run);

}  // namespace tessera::ingest_bench
