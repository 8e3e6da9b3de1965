#include "benchmarks/ingest/recall.h"

#include <algorithm>
#include <set>

#include "benchmarks/bench_report.h"
#include "common/vector/vector_index.h"

namespace tessera::ingest_bench {

std::vector<float> make_queries(const Options& o, const Mixture& mixture, const Rows& rows) {
  std::vector<float> q(static_cast<size_t>(o.queries) * rows.dim);
  const int64_t step = std::max<int64_t>(1, rows.count() / o.queries);
  for (int i = 0; i < o.queries; ++i) {
    const int64_t row = (i * step + step / 2) % rows.count();
    mixture.row(rows.ids[row], q.data() + static_cast<size_t>(i) * rows.dim, o.query_noise,
                static_cast<uint64_t>(i));
  }
  return q;
}

std::vector<int64_t> exact_neighbours(const Rows& rows, const float* queries, int count, int k,
                                      int threads, double* seconds) {
  set_vector_threads(threads);
  std::vector<int64_t> exact(static_cast<size_t>(count) * k);
  VectorIndex flat = VectorIndex::create("Flat", rows.dim, Metric::kInnerProduct);
  flat.add(rows.values.data(), rows.ids.data(), rows.count());
  std::vector<float> scores(exact.size());
  SearchOptions so;
  so.k = k;
  bench::Stopwatch watch;
  flat.search(queries, count, so, scores.data(), exact.data());
  *seconds = watch.seconds();
  return exact;
}

double recall_at_k(const nlohmann::json& answers, const std::vector<int64_t>& exact, int queries,
                   int k) {
  double found = 0;
  for (int q = 0; q < queries; ++q) {
    const std::set<int64_t> truth(exact.begin() + static_cast<size_t>(q) * k,
                                  exact.begin() + static_cast<size_t>(q + 1) * k);
    for (const auto& h : answers[q].at("hits")) found += truth.count(h.at("patch_id").get<int64_t>());
  }
  return found / (static_cast<double>(queries) * k);
}

}  // namespace tessera::ingest_bench
