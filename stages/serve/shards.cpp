#include "stages/serve/shards.h"

#include <map>
#include <tuple>

#include <fmt/format.h>

#include "common/core/error.h"

#include "common/stage/partition.h"
#include "common/vector/vector_index.h"

namespace tessera::serve {

namespace {

std::vector<int> owned_shards(int shards, int rank, int ranks) {
  std::vector<int> mine;
  const Partition owners = Partition::cyclic(shards, ranks);
  for (int64_t j = 0; j < owners.count(rank); ++j) {
    mine.push_back(static_cast<int>(owners.global_index(rank, j)));
  }
  return mine;
}

Catalog loaded(const std::string& dir) { return load_catalog(dir); }

}  // namespace

RankShards::RankShards(const std::string& dir, int rank, int ranks, bool mmap, VerifyLevel verify)
    : catalog_(loaded(dir)),
      slides_(read_vector_meta(catalog_.path(catalog_.shards.front().segments.at(0).meta.file),
                               false)
                  .slides),
      columns_(query::filter_columns(slides_)),
      owned_(owned_shards(static_cast<int>(catalog_.shards.size()), rank, ranks)),
      shards_(catalog_, owned_, mmap, verify, std::nullopt) {}

std::shared_ptr<const query::RowSelection> RankShards::selection(const std::string& filter) {
  for (auto it = filters_.begin(); it != filters_.end(); ++it) {
    if (it->first == filter) {
      filters_.splice(filters_.begin(), filters_, it);
      return it->second;
    }
  }
  auto s = std::make_shared<const query::RowSelection>(
      shards_.select(query::Filter::parse(filter, columns_)));
  filters_.emplace_front(filter, s);
  if (filters_.size() > kFilterCache) filters_.pop_back();
  return s;
}

std::vector<std::vector<query::Hit>> RankShards::search(const std::vector<SearchJob>& jobs,
                                                        int threads) {
  std::vector<std::vector<query::Hit>> out(jobs.size());
  // Jobs that share their parameters are searched in one call, as query searches its batch.
  std::map<std::tuple<int, int, std::string>, std::vector<size_t>> groups;
  for (size_t i = 0; i < jobs.size(); ++i) {
    groups[{jobs[i].k, jobs[i].nprobe, jobs[i].filter}].push_back(i);
  }
  const int dim = catalog_.dim;
  for (const auto& [key, members] : groups) {
    const auto& [k, nprobe, filter] = key;
    std::shared_ptr<const query::RowSelection> selection;
    if (!filter.empty()) selection = this->selection(filter);
    std::vector<float> queries;
    queries.reserve(members.size() * dim);
    bool scoped = selection != nullptr;
    for (size_t i : members) {
      queries.insert(queries.end(), jobs[i].vector.begin(), jobs[i].vector.end());
      scoped = scoped || jobs[i].exclude_slide >= 0 || jobs[i].exclude_patient_of >= 0;
    }
    std::vector<query::QueryScope> scopes;
    if (scoped) {
      for (size_t i : members) {
        const SearchJob& j = jobs[i];
        query::QueryScope scope;
        if (j.exclude_patient_of >= 0) {
          scope = query::exclusion_scope(j.exclude_patient_of, false, true, slides_);
        }
        scope.exclude_slide = j.exclude_slide;
        scope.selection = selection.get();
        scopes.push_back(std::move(scope));
      }
    }
    query::SearchParams params;
    params.k = k;
    params.nprobe = nprobe > 0 ? nprobe : catalog_.default_nprobe;
    params.threads = threads;
    std::vector<std::vector<query::Hit>> hits =
        shards_.search(queries.data(), static_cast<int64_t>(members.size()), scopes, params);
    for (size_t m = 0; m < members.size(); ++m) out[members[m]] = std::move(hits[m]);
  }
  return out;
}

std::vector<std::vector<query::Hit>> search_round(Comm& comm, RankShards& shards,
                                                  const std::vector<SearchJob>& jobs, int threads) {
  // A rank that fails still takes part in the gather, so that no rank waits for it; every rank
  // then throws the first failure (as InvalidInput when it was one).
  std::vector<std::vector<query::Hit>> local;
  std::string mine;
  try {
    local = shards.search(jobs, threads);
    mine = "h" + query::encode_hits(local);
  } catch (const InvalidInput& e) {
    mine = std::string("i") + e.what();
  } catch (const std::exception& e) {
    mine = std::string("e") + e.what();
  }
  const std::vector<std::string> all =
      comm.size() == 1 ? std::vector<std::string>{mine} : comm.allgather(mine);
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r][0] == 'h') continue;
    const std::string message = fmt::format("rank {}: {}", r, all[r].substr(1));
    if (all[r][0] == 'i') throw InvalidInput(message);
    throw Error(message);
  }
  if (comm.size() == 1) return local;
  if (comm.rank() != 0) return {};
  std::vector<std::vector<std::vector<query::Hit>>> lists;
  for (const auto& bytes : all) lists.push_back(query::decode_hits(bytes.substr(1)));
  const bool higher_is_better = shards.catalog().metric == "ip";
  for (size_t q = 0; q < jobs.size(); ++q) {
    std::vector<std::vector<query::Hit>> per_rank;
    for (auto& l : lists) per_rank.push_back(std::move(l.at(q)));
    local[q] = query::merge_hits(per_rank, jobs[q].k, higher_is_better);
  }
  return local;
}

}  // namespace tessera::serve
