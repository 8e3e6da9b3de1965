// scale_bench's options (main.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "common/core/options.h"
#include "common/stage/partition.h"
#include "stages/patchgen/plan.h"

namespace tessera::scale {

// The paper's cohort.
constexpr int64_t kCohortSlides = 4185;
constexpr int64_t kCohortPatches = 170'000'000;
constexpr double kPi = 3.14159265358979323846;
// Bytes per patch a rank holds while it walks one slide: read_plan's coords (16) and tissue (4)
// vectors and the GridPatch list (24, padded).
constexpr int64_t kPlanBytesPerPatch = 16 + 4 + sizeof(patchgen::GridPatch);

constexpr const char* kUsage =
    "mpirun -np R scale_bench [--slides N] [--patches-total N] [--dim D] [--reps N] [--warmup N] "
    "[--scratch DIR] [--out FILE] [--keep]";

struct BenchOptions {
  int slides = 0;
  int64_t patches_total = 0;
  double count_sigma = 0;
  uint64_t seed = 0;
  int dim = 0;
  std::string store_dtype;
  int batch_size = 0;
  int patch_size = 0;
  Partition::Spec partition;
  Partition::Spec embed_partition;
  int reps = 0;
  int warmup = 0;
  std::string scratch;
  std::string out;
  bool keep = false;
};

po::options_description bench_options();
// Throws InvalidInput naming the option for a value out of range.
BenchOptions bench_options_from(const po::variables_map& v, int world_size);

}  // namespace tessera::scale
