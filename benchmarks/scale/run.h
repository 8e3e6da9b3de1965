// scale_bench's run (main.cpp): one repetition of every phase in a fresh run directory, each
// timed between barriers, and the hashes of its outputs.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "benchmarks/scale/cohort.h"
#include "benchmarks/scale/options.h"
#include "common/mpi/comm.h"
#include "stages/embed/config.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/manifest.h"

namespace tessera::scale {

// What every repetition shares.
struct Setup {
  BenchOptions o;
  Cohort cohort;
  patchgen::Manifest manifest;
  patchgen::Config patchgen;
  embed::Config embed;
  std::string fingerprint;
  nlohmann::json model_fingerprint;
};

// VmRSS of /proc/self/status in MiB (the resident set now), null when unreadable.
nlohmann::json current_rss_mb();

// Collective. One repetition in a fresh run directory `run_dir`; the record is complete on rank 0.
nlohmann::json repetition(int index, const Setup& s, const std::string& run_dir, Comm& comm,
                          nlohmann::json* shard_hashes);

// Rank 0: hashes of the last repetition's outputs. index_sha256 and pixels_sha256 (contents) do
// not depend on the number of ranks; features_xxh3 and embeddings_file_sha256 hash file bytes,
// which do.
nlohmann::json output_hashes(const Setup& s, const std::string& run_dir);

}  // namespace tessera::scale
