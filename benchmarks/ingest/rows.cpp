#include "benchmarks/ingest/rows.h"

#include <algorithm>
#include <filesystem>

#include "benchmarks/ingest/options.h"
#include "common/h5/h5.h"
#include "common/store/embeddings.h"
#include "common/store/files.h"

namespace tessera::ingest_bench {

namespace fs = std::filesystem;

Rows read_rows(const std::string& run) {
  h5::File file = h5::File::open((fs::path(run) / "embed" / kTag / kEmbeddingsFile).string(),
                                 h5::Mode::kRead);
  h5::Dataset values = file.open_dataset(embedding_names::kEmbeddings);
  h5::Dataset ids = file.open_dataset(embedding_names::kPatchId);
  Rows r;
  const auto dims = values.dims();
  const auto n = static_cast<int64_t>(dims.at(0));
  r.dim = static_cast<int>(dims.at(1));
  r.values.resize(static_cast<size_t>(n) * r.dim);
  r.ids.resize(static_cast<size_t>(n));
  for (int64_t at = 0; at < n; at += kBlockRows) {
    const int64_t m = std::min(kBlockRows, n - at);
    values.read_rows_as_floats(r.values.data() + static_cast<size_t>(at) * r.dim, at, m);
    ids.read_rows(r.ids.data() + at, at, m);
  }
  return r;
}

}  // namespace tessera::ingest_bench
