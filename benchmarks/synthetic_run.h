// Synthetic inputs shared by the benchmark drivers that build runs without slides (scale_bench,
// ingest_bench): a splitmix64 stream, a manifest of N slides and the plan of each, all pure
// functions of their arguments so every rank and every repetition sees the same cohort.
#pragma once

#include <cstdint>
#include <string>

#include "stages/patchgen/manifest.h"
#include "stages/patchgen/plan.h"

namespace tessera::bench {

// A 224 px patch at 0.5 um/px read from a 0.25 um/px level 0: 448 level-0 pixels per side.
inline constexpr int64_t kSyntheticFootprint = 448;
inline constexpr double kSyntheticSlideMpp = 0.25;

// splitmix64's finaliser: a well-mixed 64-bit value of x.
uint64_t splitmix64(uint64_t x);

// A uniform draw in (0, 1), a pure function of (seed, slide, draw).
double synthetic_uniform(uint64_t seed, int64_t slide, uint64_t draw);

// `slides` entries slide-00000, ... (patients two slides each, a "site" metadata column); paths
// under `dir` that are never opened.
patchgen::Manifest synthetic_manifest(int slides, const std::string& dir);

// The plan of slide k: `count` patches on a grid of ~4:3 aspect in (y, x) order at
// kSyntheticSlideMpp, tissue fractions in [0.25, 1). A pure function of (seed, k, count).
patchgen::SlidePlan synthetic_plan(uint64_t seed, int k, int64_t count);

}  // namespace tessera::bench
