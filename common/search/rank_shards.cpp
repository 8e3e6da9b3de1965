#include "common/search/rank_shards.h"

#include <map>
#include <tuple>

#include "common/core/error.h"

#include "common/search/round.h"
#include "common/vector/vector_index.h"

namespace tessera::search {

namespace {

Catalog loaded(const std::string& dir) { return load_catalog(dir); }

}  // namespace

RankShards::RankShards(const std::string& dir, int rank, int ranks, bool mmap, VerifyLevel verify,
                       int rerank)
    : catalog_(loaded(dir)),
      slides_(read_vector_meta(catalog_.path(catalog_.shards.front().segments.at(0).meta.file),
                               false)
                  .slides),
      columns_(filter_columns(slides_)),
      owned_(owned_shards(static_cast<int>(catalog_.shards.size()), rank, ranks)),
      shards_(catalog_, owned_, mmap, verify, std::nullopt, rerank) {}

std::shared_ptr<const RowSelection> RankShards::selection(const std::string& filter) {
  for (auto it = filters_.begin(); it != filters_.end(); ++it) {
    if (it->first == filter) {
      filters_.splice(filters_.begin(), filters_, it);
      return it->second;
    }
  }
  auto s = std::make_shared<const RowSelection>(
      shards_.select(Filter::parse(filter, columns_)));
  filters_.emplace_front(filter, s);
  if (filters_.size() > kFilterCache) filters_.pop_back();
  return s;
}

std::vector<std::vector<Hit>> RankShards::search(const std::vector<SearchJob>& jobs,
                                                        int threads) {
  std::vector<std::vector<Hit>> out(jobs.size());
  // Jobs that share their parameters are searched in one call, as query searches its batch.
  std::map<std::tuple<int, int, std::string>, std::vector<size_t>> groups;
  for (size_t i = 0; i < jobs.size(); ++i) {
    groups[{jobs[i].k, jobs[i].nprobe, jobs[i].filter}].push_back(i);
  }
  const int dim = catalog_.dim;
  for (const auto& [key, members] : groups) {
    const auto& [k, nprobe, filter] = key;
    std::shared_ptr<const RowSelection> selection;
    if (!filter.empty()) selection = this->selection(filter);
    std::vector<float> queries;
    queries.reserve(members.size() * dim);
    bool scoped = selection != nullptr;
    for (size_t i : members) {
      queries.insert(queries.end(), jobs[i].vector.begin(), jobs[i].vector.end());
      scoped = scoped || jobs[i].exclude_slide >= 0 || jobs[i].exclude_patient_of >= 0;
    }
    std::vector<QueryScope> scopes;
    if (scoped) {
      for (size_t i : members) {
        const SearchJob& j = jobs[i];
        QueryScope scope;
        if (j.exclude_patient_of >= 0) {
          scope = exclusion_scope(j.exclude_patient_of, false, true, slides_);
        }
        scope.exclude_slide = j.exclude_slide;
        scope.selection = selection.get();
        scopes.push_back(std::move(scope));
      }
    }
    SearchParams params;
    params.k = k;
    params.nprobe = nprobe > 0 ? nprobe : catalog_.default_nprobe;
    params.threads = threads;
    std::vector<std::vector<Hit>> hits =
        shards_.search(queries.data(), static_cast<int64_t>(members.size()), scopes, params);
    for (size_t m = 0; m < members.size(); ++m) out[members[m]] = std::move(hits[m]);
  }
  return out;
}

std::vector<std::vector<Hit>> search_round(Comm& comm, RankShards& shards,
                                           const std::vector<SearchJob>& jobs, int threads) {
  // A rank that fails still takes part in the agreement, so no rank waits for it in the gather.
  std::vector<std::vector<Hit>> local;
  agree_on_failure(comm, [&] { local = shards.search(jobs, threads); });
  std::vector<int> k;
  for (const SearchJob& j : jobs) k.push_back(j.k);
  return gather_best_hits(comm, std::move(local), k, shards.catalog().metric == "ip");
}

}  // namespace tessera::search
