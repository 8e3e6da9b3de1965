// The small generated cohorts end-to-end tests start from: synthetic slides and their manifest,
// then patchgen and embed run as a user runs them (through mpirun).
#pragma once

#include <cstdint>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "tests/e2e/e2e_util.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {

// The generated slides of a cohort: `dir`/s0.tif .. s<count-1>.tif, slide i of (width + i * step)
// x height level-0 pixels at 0.5 µm/px, drawn with seed (seed + i).
struct SlideSizes {
  int count = 2;
  int64_t width = 1200;
  int64_t step = 100;
  int64_t height = 1000;
  uint64_t seed = 90;
};

// Writes the slides of `sizes` into `dir` and `manifest_csv` as `dir`/m.csv; returns its path.
inline std::string write_cohort(const fs::path& dir, const SlideSizes& sizes,
                                const std::string& manifest_csv) {
  for (int i = 0; i < sizes.count; ++i) {
    synth::SlideSpec spec;
    spec.path = (dir / fmt::format("s{}.tif", i)).string();
    spec.width = sizes.width + sizes.step * i;
    spec.height = sizes.height;
    spec.seed = sizes.seed + static_cast<uint64_t>(i);
    spec.mpp = 0.5;
    synth::write_slide(spec);
  }
  const std::string manifest = (dir / "m.csv").string();
  write_text(manifest, manifest_csv);
  return manifest;
}

// patchgen (64 px patches) and embed (vit-tiny, batches of 8, one torch thread) of `manifest`
// into `run` under mpirun with `ranks` ranks, in `parts` cohort parts one after the other.
// Failure names the command that failed and carries its output.
inline ::testing::AssertionResult patch_and_embed(const std::string& patchgen,
                                                  const std::string& embed,
                                                  const std::string& manifest,
                                                  const std::string& run, int ranks, int parts) {
  for (int part = 0; part < parts; ++part) {
    const std::string split = parts > 1 ? fmt::format(" --part {} --parts {}", part, parts) : "";
    for (const std::string& command :
         {mpirun(ranks) + patchgen + " --manifest " + manifest + " --out " + run +
              " --patch-size 64" + split,
          mpirun(ranks) + embed + " --run " + run +
              " --model vit-tiny --batch-size 8 --torch-threads 1" + split}) {
      std::string log;
      if (run_command(command, &log) != 0) {
        return ::testing::AssertionFailure() << command << " failed:\n" << log;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace tessera::e2e
