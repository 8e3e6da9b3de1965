#include "benchmarks/scale/cohort.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "benchmarks/synthetic_run.h"

namespace tessera::scale {

using bench::synthetic_uniform;
using nlohmann::json;

Cohort make_cohort(const BenchOptions& o) {
  std::vector<double> w(static_cast<size_t>(o.slides));
  for (int k = 0; k < o.slides; ++k) {
    const double z = std::sqrt(-2 * std::log(synthetic_uniform(o.seed, k, 0))) *
                     std::cos(2 * kPi * synthetic_uniform(o.seed, k, 1));
    w[k] = std::exp(o.count_sigma * z);
  }
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  const double full_patches =
      static_cast<double>(kCohortPatches) * o.slides / static_cast<double>(kCohortSlides);
  Cohort c;
  for (double x : w) {
    c.counts.push_back(std::max<int64_t>(1, std::llround(x / sum * o.patches_total)));
    c.full_counts.push_back(std::max<int64_t>(1, std::llround(x / sum * full_patches)));
    c.total += c.counts.back();
    c.full_total += c.full_counts.back();
  }
  return c;
}

json count_stats(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) { return v[static_cast<size_t>(q * (v.size() - 1))]; };
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  return {{"total", static_cast<int64_t>(sum)}, {"mean", sum / v.size()}, {"min", v.front()},
          {"p50", at(0.5)}, {"p99", at(0.99)}, {"max", v.back()}};
}

json disk_estimate(const BenchOptions& o, int64_t patches) {
  const int64_t value_bytes = o.store_dtype == "fp16" ? 2 : 4;
  const int64_t pixels = int64_t{3} * o.patch_size * o.patch_size;
  const json per_patch = {{"plans", 20},
                          {"patchgen_shards", pixels + 32},
                          {"index", 44},
                          {"embed_shards", o.dim * value_bytes + 28},
                          {"features", int64_t{4} * o.dim + 16}};
  int64_t total = 0;
  for (const auto& [k, v] : per_patch.items()) total += v.get<int64_t>() * patches;
  return {{"bytes_per_patch", per_patch}, {"bytes", total}};
}

}  // namespace tessera::scale
