#include "stages/ingest/sources.h"

#include <algorithm>
#include <optional>
#include <random>
#include <unordered_set>

#include "common/core/error.h"

namespace tessera::ingest {

SourceReader::SourceReader(const Source& source)
    : source_(source),
      embeddings_(source.embeddings_path),
      index_(source.info.path) {
  dim_ = embeddings_.dim();
}

void SourceReader::read(int64_t first, int64_t n, Chunk& chunk) {
  chunk.values.resize(static_cast<size_t>(n) * dim_);
  embeddings_.read_values(chunk.values.data(), first, n);
  std::vector<int64_t> ids(n);
  embeddings_.read_ids(ids.data(), first, n);
  IndexRows rows = index_.read_range(first, n);
  for (int64_t i = 0; i < n; ++i) {
    if (ids[i] != rows.patch_id[i]) {
      fail<IoError>("'{}' row {} holds patch {}, but row {} of '{}' is patch {}: the embeddings "
                    "do not belong to this patch index (rerun embed)",
                    source_.embeddings_path, first + i, ids[i], first + i, source_.info.path,
                    rows.patch_id[i]);
    }
  }
  chunk.rows.patch_id = std::move(rows.patch_id);
  chunk.rows.slide = std::move(rows.slide);
  chunk.rows.coords = std::move(rows.coords);
  chunk.rows.tissue = std::move(rows.tissue);
}

std::vector<float> training_sample(const std::vector<Source>& sources, int64_t train_size,
                                   uint64_t seed) {
  int64_t total = 0;
  for (const Source& s : sources) total += s.info.rows;
  if (total == 0 || train_size <= 0) return {};
  const int64_t runs = (total + kTrainRun - 1) / kTrainRun;
  const int64_t wanted = std::min(runs, (train_size + kTrainRun - 1) / kTrainRun);
  // Floyd's sampling of `wanted` distinct runs out of `runs`, seeded.
  std::mt19937_64 rng(seed);
  std::unordered_set<int64_t> chosen;
  for (int64_t j = runs - wanted; j < runs; ++j) {
    const int64_t t = std::uniform_int_distribution<int64_t>(0, j)(rng);
    chosen.insert(chosen.count(t) ? j : t);
  }
  std::vector<int64_t> order(chosen.begin(), chosen.end());
  std::sort(order.begin(), order.end());
  std::vector<float> sample;
  size_t s = 0;
  int64_t base = 0;  // sequence number of the first row of sources[s]
  std::optional<SourceReader> reader;
  Chunk chunk;
  for (int64_t run : order) {
    int64_t first = run * kTrainRun;
    int64_t n = std::min(kTrainRun, total - first);
    while (n > 0) {
      while (first >= base + sources[s].info.rows) {
        base += sources[s].info.rows;
        ++s;
        reader.reset();
      }
      if (!reader) reader.emplace(sources[s]);
      const int64_t m = std::min(n, base + sources[s].info.rows - first);
      reader->read(first - base, m, chunk);
      sample.insert(sample.end(), chunk.values.begin(), chunk.values.end());
      first += m;
      n -= m;
    }
  }
  if (reader) {
    const int64_t rows = static_cast<int64_t>(sample.size()) / reader->dim();
    if (rows > train_size) sample.resize(static_cast<size_t>(train_size) * reader->dim());
  }
  return sample;
}

}  // namespace tessera::ingest
