#include "benchmarks/ingest/rows.h"

#include <algorithm>
#include <filesystem>

#include "benchmarks/ingest/options.h"
#include "common/store/embeddings.h"

namespace tessera::ingest_bench {

namespace fs = std::filesystem;

Rows read_rows(const std::string& run) {
  const EmbeddingsReader file(embeddings_path((fs::path(run) / "embed" / kTag).string()));
  Rows r;
  const int64_t n = file.rows();
  r.dim = file.dim();
  r.values.resize(static_cast<size_t>(n) * r.dim);
  r.ids.resize(static_cast<size_t>(n));
  for (int64_t at = 0; at < n; at += kBlockRows) {
    const int64_t m = std::min(kBlockRows, n - at);
    file.read_values(r.values.data() + static_cast<size_t>(at) * r.dim, at, m);
    file.read_ids(r.ids.data() + at, at, m);
  }
  return r;
}

}  // namespace tessera::ingest_bench
