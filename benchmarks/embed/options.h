// embed_bench's options (main.cpp): its own, and embed's passed through.
#pragma once

#include <cstdint>
#include <set>
#include <string>

#include "common/core/options.h"
#include "stages/embed/config.h"

namespace tessera::embed::driver {

constexpr double kTargetCpu = 0.85;
constexpr double kTargetCuda = 0.95;
constexpr const char* kUsage =
    "mpirun -np R embed_bench --model NAME|FILE.pt [--run RUN] [--patches N] [--reps N] "
    "[--warmup N] [--cache warm|fresh|drop] [--compare BEFORE.json] [--out FILE] [embed options]";

// embed options the benchmark sets itself.
const std::set<std::string> kSetByBench = {"run", "tag", "source", "overwrite",
                                           "progress-interval", "debug-kill-rank",
                                           "debug-kill-after"};

struct BenchOptions {
  std::string run;
  std::string slide;
  int64_t width = 0;
  int64_t height = 0;
  uint64_t slide_seed = 1;
  int64_t patches = 0;
  int chunk_patches = 64;
  int reps = 3;
  int warmup = 1;
  double target = 0;
  std::string cache;
  std::string compare;
  std::string out;
};

// The driver's options and embed's (those of kSetByBench left out).
po::options_description bench_options();
// embed's Config from the passed-through options plus the ones the benchmark sets.
Config embed_config(const po::variables_map& values, const std::string& run);
// Throws InvalidInput naming the option for a value out of range.
BenchOptions bench_options_from(const po::variables_map& v, const Config& config, int ranks);

}  // namespace tessera::embed::driver
