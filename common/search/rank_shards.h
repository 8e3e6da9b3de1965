// What every rank of a resident search service (serve) holds of one generation of an index: its
// share of the shards (the cyclic partition of round.h), resident, and the slide table; and the
// collective search round over jobs that differ in k, nprobe, filter and exclusions.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mpi/comm.h"
#include "common/stage/stage_options.h"
#include "common/store/vector_meta.h"
#include "common/vector/catalog.h"
#include "common/search/filter.h"
#include "common/search/search_job.h"
#include "common/search/shard_set.h"

namespace tessera::search {

class RankShards {
 public:
  // Loads the shards rank `rank` of `ranks` owns of the index in `dir` (not collective), with
  // ShardSet's re-ranking of a compressed index's `rerank` x k candidates (0: none). Throws as
  // load_catalog and ShardSet do.
  RankShards(const std::string& dir, int rank, int ranks, bool mmap, VerifyLevel verify,
             int rerank = 0);

  const Catalog& catalog() const { return catalog_; }
  const VectorSlideTable& slides() const { return slides_; }
  const std::vector<ColumnSchema>& columns() const { return columns_; }
  int64_t rows() const { return shards_.rows(); }
  const std::vector<int>& owned() const { return owned_; }
  const ShardSet& shards() const { return shards_; }

  // This rank's best hits for every job, grouped into one search call per (k, nprobe, filter).
  // Filters are parsed against columns() (throws InvalidInput as Filter::parse does) and
  // their row selections kept for the next rounds (the last kFilterCache filters). Not
  // thread-safe.
  std::vector<std::vector<Hit>> search(const std::vector<SearchJob>& jobs, int threads);

  static constexpr size_t kFilterCache = 32;

 private:
  std::shared_ptr<const RowSelection> selection(const std::string& filter);

  Catalog catalog_;
  VectorSlideTable slides_;
  std::vector<ColumnSchema> columns_;
  std::vector<int> owned_;
  ShardSet shards_;
  std::list<std::pair<std::string, std::shared_ptr<const RowSelection>>> filters_;  // MRU first
};

// Collective. Every rank searches its shards for `jobs` and rank 0 merges the lists of every
// rank into each job's best k (gather_best_hits, round.h). Returns the hits on rank 0 (one list
// per job) and an empty vector on the other ranks. When the search fails on any rank, every rank
// throws the lowest failing rank's error, type and exit code kept (agree_on_failure).
std::vector<std::vector<Hit>> search_round(Comm& comm, RankShards& shards,
                                           const std::vector<SearchJob>& jobs, int threads);

}  // namespace tessera::search
