// The shards of an ingest output as query serves them: each process loads the shards it owns
// (all of them in one process; under mpirun the shards a cyclic partition gives its rank), checks
// them against the catalog, evaluates metadata filters over their rows, and searches them, the
// shards concurrently on threads. Results carry what a report needs of the owning shard's rows.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/stage/stage_options.h"
#include "common/store/vector_meta.h"
#include "common/vector/catalog.h"
#include "common/search/filter.h"

namespace tessera::search {

// What re-ranking (rerank.h) has read: stored vectors, and their bytes as stored (dim x 2 for
// fp16 stores, dim x 4 for fp32).
struct RerankCounters {
  int64_t rows = 0;
  int64_t bytes = 0;
};

// One search result with the row-level metadata of its vector.
struct Hit {
  float score = 0;
  int64_t patch_id = -1;
  int32_t slide = -1;
  int64_t x = 0, y = 0;
  float tissue = 0;
  int32_t shard = -1;
};

// The rows a filter allows in each loaded segment of a ShardSet (ShardSet::select), for filters
// that differ from query to query (serve).
struct RowSelection {
  std::vector<std::vector<int64_t>> allowed;  // per loaded segment: patch ids, ascending
  int64_t matching = 0;                       // rows allowed over the segments
};

// What restricts one query's results: the --filter expression and the exclusions, whose slides
// depend on the query.
struct QueryScope {
  int32_t exclude_slide = -1;                // leave out this slide's patches
  std::vector<uint8_t> excluded_slides;      // or these (per slide index, 1 = leave out)
  const RowSelection* selection = nullptr;   // when set: these rows instead of the set's filter
};

// The scope of a query from the stored patch of slide `slide` (an index into `slides`): its slide
// left out, and/or every slide of its patient (a slide without a patient id is its own patient).
QueryScope exclusion_scope(int32_t slide, bool exclude_same_slide, bool exclude_same_patient,
                           const VectorSlideTable& slides);

struct SearchParams {
  int k = 10;
  int nprobe = 0;
  int ef_search = 0;
  int batch_size = 0;  // queries per search call; 0 = all
  int threads = 1;     // shards searched concurrently
};

// The columns --filter may use, with their types: patch_id, x, y, tissue (per row); slide_id,
// patient_id, level, mpp, slide_mpp, patch_size, read_size (per slide); then the manifest's
// metadata columns.
std::vector<ColumnSchema> filter_columns(const VectorSlideTable& slides);

class ShardSet {
 public:
  // Loads the segments of `shards` (shard numbers of `catalog`) after checking their files at
  // `verify` against the catalog. Throws IoError naming a missing, damaged or inconsistent file
  // (dimension, rows) and InvalidInput for a filter that uses unknown columns.
  // With `rerank` > 0 and an index whose scores are approximate (VectorIndex::exact_scores:
  // PQ, SQ, IVF-PQ, HNSW-PQ, ...), search() asks each segment for rerank x k candidates and
  // re-ranks them exactly from the stored vectors (rerank.h; their embed outputs are checked
  // at `verify` here and throw as StoredVectors does). Exact indexes ignore it.
  ShardSet(const Catalog& catalog, const std::vector<int>& shards, bool mmap, VerifyLevel verify,
           const std::optional<Filter>& filter, int rerank = 0);
  ~ShardSet();
  ShardSet(ShardSet&&) noexcept;
  ShardSet& operator=(ShardSet&&) noexcept;

  int64_t rows() const;          // vectors in the loaded shards
  int64_t matching_rows() const; // of which the filter allows (rows() without a filter)

  // The rows of the loaded segments that `filter` allows (parsed against filter_columns of the
  // shards' slide table). Thread-safe with concurrent search().
  RowSelection select(const Filter& filter) const;

  // The re-rank factor searches use: the one given when the loaded index's scores are
  // approximate, else 0 (also for a set without shards).
  int rerank() const;
  // The stored vectors re-ranking has read so far (zeros without re-ranking).
  RerankCounters rerank_counters() const;

  // Searches `queries` (n x dim, row-major, normalised as the catalog says) in every loaded shard
  // and returns, per query, the best `params.k` hits over these shards (best first, ties by
  // ascending patch id) restricted by the filter and by `scopes` (one per query, or empty).
  // With re-ranking, each segment's rerank() x k candidates get exact scores and the best k of
  // them is kept, so the hits are those of the union of every shard's candidates, whatever the
  // number of ranks.
  // Memory: each search thread keeps one running best-k list per query (threads x n x k hits),
  // whatever the number of shards; with re-ranking also one batch's candidates (rerank x k per
  // query) and at most kRerankRows stored vectors.
  std::vector<std::vector<Hit>> search(const float* queries, int64_t n,
                                       const std::vector<QueryScope>& scopes,
                                       const SearchParams& params) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The hits one search round may hold when the user does not set --batch-size: a round's memory
// is about (threads + ranks + 2) x 48 bytes x this, plus its report text, whatever the number of
// queries.
inline constexpr int64_t kBatchHits = 65536;

// The queries searched per round: `requested` when > 0, else as many as keep queries x k within
// kBatchHits (at least 1, at most `queries`).
int64_t query_batch_size(int64_t requested, int64_t queries, int k);

// Merges per-process hit lists (each best first) into the best k, ties by ascending patch id.
std::vector<Hit> merge_hits(const std::vector<std::vector<Hit>>& lists, int k,
                            bool higher_is_better);

// Hits as bytes for gathering over ranks, and back.
std::string encode_hits(const std::vector<std::vector<Hit>>& hits);
std::vector<std::vector<Hit>> decode_hits(const std::string& bytes);

}  // namespace tessera::search
