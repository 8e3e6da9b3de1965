// patchgen_bench's options (main.cpp): its own, and patchgen's passed through.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "common/core/options.h"
#include "stages/patchgen/config.h"

namespace tessera::patchgen::driver {

// Targets (docs/performance.md): patchgen with the direct reader >= 3x the OpenSlide loop and >=
// 0.5 of the decode limit; with the OpenSlide reader >= 0.95 of the loop.
constexpr double kTargetDirect = 3.0;
constexpr double kTargetDecode = 0.5;
constexpr double kTargetOpenSlide = 0.95;
// DICOM through the direct reader within 10 % of the same slide as TIFF (issue 20).
constexpr double kTargetDicom = 0.9;
constexpr const char* kUsage =
    "mpirun -np R patchgen_bench --work DIR [--slide FILE] [--reps N] [--warmup N] [--out FILE] "
    "[patchgen options]";

// patchgen options the benchmark sets itself.
const std::set<std::string> kSetByBench = {"manifest", "out", "overwrite", "fail-fast",
                                           "debug-kill-rank", "debug-kill-after"};

struct BenchOptions {
  std::string slide;
  int64_t width = 0;
  int64_t height = 0;
  uint64_t seed = 1;
  double slide_mpp = 0.5;
  std::string work;
  int reps = 3;
  int warmup = 1;
  std::string out;
  std::string compare;
  std::string cache;
  std::vector<std::string> modes;
  std::string dicom;      // twin variant (jpeg-full, jpeg-sparse, j2k-full, j2k-sparse) or ""
  std::string dicom_dir;  // its folder, beside the slide
};

const std::vector<std::string> kModes = {"patchgen", "patchgen_openslide", "reference",
                                         "decode_limit", "patchgen_dicom"};

// The driver's options and patchgen's (those of kSetByBench left out).
po::options_description bench_options();
// Throws InvalidInput naming the option for a value out of range.
BenchOptions bench_options_from(const po::variables_map& v, int world_size);
// patchgen's Config from the passed-through options plus the ones the benchmark sets.
Config patchgen_config(const po::variables_map& values, const std::string& manifest,
                       const std::string& out);

}  // namespace tessera::patchgen::driver
