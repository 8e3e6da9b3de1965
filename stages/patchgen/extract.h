// One rank's extraction: reads its share of the global patch list from the slides and writes its
// shard. Never communicates.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/patchgen/config.h"
#include "stages/patchgen/manifest.h"
#include "stages/patchgen/plan.h"

namespace tessera::patchgen {

struct ExtractStats {
  int64_t patches = 0;           // rows written to the shard
  int64_t planned = 0;           // patches assigned to this rank
  std::map<int, std::string> failed_slides;  // slides that failed while reading, with reason
  double read_s = 0;             // openslide_read_region and ARGB->RGB conversion
  double resize_s = 0;
  double encode_s = 0;           // JPEG encoding (encoding jpeg)
  double write_s = 0;            // HDF5 writes, flush and close
  double hash_s = 0;             // SHA-256 of the finished shard
  double total_s = 0;
  nlohmann::json to_json() const;
};

// Extracts the patches of `rank` (block-cyclic over `world_size`) into `shard_path` and writes
// the rank's marker to `marker_path` (atomically, after the shard is closed). A slide that fails
// to read is recorded in the stats and the marker, its remaining patches skipped; with
// config.fail_fast the failure is thrown instead (exit code 3). `manifest` and `plans` are
// indexed by manifest index.
ExtractStats extract_rank(const Manifest& manifest, const std::vector<SlidePlan>& plans,
                          const Config& config, int rank, int world_size,
                          const std::string& stage_dir, const std::string& fingerprint);

}  // namespace tessera::patchgen
