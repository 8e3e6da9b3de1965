// Exact re-ranking of a compressed index's candidates (PQ, SQ, IVF-PQ, HNSW-PQ: any index whose
// scores are approximate, VectorIndex::exact_scores): the vectors ingest added are read back from
// the embed outputs behind the index (each part's embeddings.h5, through the store's
// EmbeddingsReader), scored exactly with the index's metric, and the best k kept. ShardSet does
// this when it is given a re-rank factor; query and serve reach it only through ShardSet.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/stage/stage_options.h"
#include "common/vector/catalog.h"
#include "common/search/shard_set.h"

namespace tessera::search {

// query's and serve's --rerank: its default, its largest value, and its help text.
inline constexpr int kDefaultRerank = 4;
inline constexpr int kMaxRerank = 100;
inline constexpr const char* kRerankHelp =
    "compressed indexes (PQ, SQ, IVF-PQ, HNSW-PQ): search each shard for R x k candidates and "
    "re-rank them exactly with their stored vectors (embeddings.h5); 0: the index's approximate "
    "scores. Exact indexes (Flat, IVF-Flat, HNSW) ignore it";

// Stored vectors a re-ranking thread reads at once: its buffer is at most kRerankRows x dim
// floats (6 MB at 384-d), whatever the number of queries and candidates.
inline constexpr int64_t kRerankRows = 4096;

// The stored vectors behind an index. A patch id's row in its part's embeddings.h5 is its slide's
// first row in that part's patch index plus its ordinal (the id's lower 32 bits); every row read
// is checked to hold that patch id.
class StoredVectors {
 public:
  // Checks each part's embed output against its markers at `verify` (as PatchLookup does: full
  // hashes every byte of its rank shards, once), loads each part's slide table (O(slides)) and
  // opens its embeddings.h5. Throws IoError naming a damaged file, a missing one, or a dimension
  // other than the catalog's; InvalidInput when a part's patchgen output is not complete.
  StoredVectors(const Catalog& catalog, VerifyLevel verify);
  ~StoredVectors();
  StoredVectors(StoredVectors&&) noexcept;
  StoredVectors& operator=(StoredVectors&&) noexcept;

  // The vectors of `ids` (any order, repeats allowed; at most kRerankRows distinct) into `values`
  // (ids.size() x dim), as ingest added them: float32 from the stored fp16 or fp32, scaled to
  // unit length when the catalog says `normalize`. Rows are read in one sorted list per part.
  // Throws IoError naming the file when an id is not in the parts, its row holds another patch,
  // or a chunk is damaged. Thread-safe (reads are serialised).
  void read(const std::vector<int64_t>& ids, float* values) const;

  RerankCounters counters() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The exact score of `v` for query `q` (dim floats each): the inner product, or the squared L2
// distance, as FAISS scores; accumulated in double.
float exact_score(const float* q, const float* v, int dim, bool inner_product);

// Re-ranks the candidates of n queries (`candidates[i]`: hits of query i, any order) against the
// query vectors (`queries`, n x dim): each hit's score becomes its exact score, and each list
// keeps its best `k`, best first (ties by ascending patch id). Reads the candidates' vectors from
// `stored` in groups of queries of at most kRerankRows candidates. Throws as StoredVectors::read.
void rerank_hits(const StoredVectors& stored, const float* queries, int dim, bool inner_product,
                 int k, std::vector<std::vector<Hit>>& candidates);

}  // namespace tessera::search
