// scale_bench's synthetic cohort (main.cpp): per-slide patch counts shaped like the paper's
// cohort, and what a run of it holds on disk and in memory.
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks/scale/options.h"

namespace tessera::scale {

// The synthetic cohort: per-slide patch counts drawn from a lognormal (the same draws at every
// scale), normalised so the full-scale counts sum to ~170M and the benchmark's to patches_total.
struct Cohort {
  std::vector<int64_t> counts;       // per slide, at the benchmark's scale (>= 1)
  std::vector<int64_t> full_counts;  // per slide, at the paper's scale
  int64_t total = 0;
  int64_t full_total = 0;
};

Cohort make_cohort(const BenchOptions& o);
// Total, mean, min, p50, p99 and max of per-slide patch counts.
nlohmann::json count_stats(std::vector<int64_t> v);
// Bytes the run directory will hold, per kind of file (estimate; HDF5 overheads not counted).
nlohmann::json disk_estimate(const BenchOptions& o, int64_t patches);

}  // namespace tessera::scale
