// What every rank of serve holds of one generation of an index: its share of the shards (the
// cyclic partition query uses), resident, and the slide table; and the collective search round.
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
#include "stages/query/search.h"
#include "stages/serve/protocol.h"

namespace tessera::serve {

class RankShards {
 public:
  // Loads the shards rank `rank` of `ranks` owns of the index in `dir` (not collective). Throws
  // as load_catalog and query::ShardSet do.
  RankShards(const std::string& dir, int rank, int ranks, bool mmap, VerifyLevel verify);

  const Catalog& catalog() const { return catalog_; }
  const VectorSlideTable& slides() const { return slides_; }
  const std::vector<query::ColumnSchema>& columns() const { return columns_; }
  int64_t rows() const { return shards_.rows(); }
  const std::vector<int>& owned() const { return owned_; }

  // This rank's best hits for every job, grouped into one search call per (k, nprobe, filter).
  // Filters are parsed against columns() (throws InvalidInput as query::Filter::parse does) and
  // their row selections kept for the next rounds (the last kFilterCache filters). Not
  // thread-safe.
  std::vector<std::vector<query::Hit>> search(const std::vector<SearchJob>& jobs, int threads);

  static constexpr size_t kFilterCache = 32;

 private:
  std::shared_ptr<const query::RowSelection> selection(const std::string& filter);

  Catalog catalog_;
  VectorSlideTable slides_;
  std::vector<query::ColumnSchema> columns_;
  std::vector<int> owned_;
  query::ShardSet shards_;
  std::list<std::pair<std::string, std::shared_ptr<const query::RowSelection>>> filters_;  // MRU first
};

// Collective. Every rank searches its shards for `jobs` and rank 0 merges the lists of every
// rank into each job's best k as query does (ties by ascending patch id). Returns the hits on
// rank 0 (one list per job) and an empty vector on the other ranks. When the search fails on any
// rank, every rank throws its message (InvalidInput when it was one, else Error).
std::vector<std::vector<query::Hit>> search_round(Comm& comm, RankShards& shards,
                                                  const std::vector<SearchJob>& jobs, int threads);

}  // namespace tessera::serve
