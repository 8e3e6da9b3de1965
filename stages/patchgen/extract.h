// One rank's extraction: reads its share of the part's patch list from the slides and writes its
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
  double read_s = 0;             // reading patches: direct reader, or OpenSlide and ARGB->RGB
  double resize_s = 0;
  double encode_s = 0;           // JPEG encoding (encoding jpeg)
  double write_s = 0;            // HDF5 writes, flush and close
  double total_s = 0;
  // The direct tile reader (--reader), summed over the slides this rank read.
  int64_t direct_slides = 0;     // slides read with it (the others with OpenSlide)
  int64_t tiles_decoded = 0;
  int64_t tile_hits = 0;         // tiles cut from the cache instead of decoded again
  double tile_read_s = 0;        // pread of compressed tiles (part of read_s)
  double tile_decode_s = 0;      // JPEG decoding (part of read_s)
  int64_t openslide_fallbacks = 0;  // reads at sub-pixel level positions, left to OpenSlide
  nlohmann::json to_json() const;
};

// The shard of `rank` inside a stage directory, relative to it: shards/rank-NNNNN.h5.
std::string shard_file(int rank);

// Extracts the patches `rank` owns under config.partition (over `world_size` ranks) from the
// slides into its shard at `shard_path` (closed on return; the stage skeleton makes it durable and writes the
// marker). Reads the plan file of each slide it touches, one at a time. A slide that fails to read
// is recorded in the stats, its remaining patches skipped; with config.fail_fast the failure is
// thrown instead (exit code 3). A failure to write the shard is thrown as IoError naming it.
ExtractStats extract_rank(const Manifest& manifest, const PartPlan& part, const Config& config,
                          int rank, int world_size, const std::string& stage_dir,
                          const std::string& fingerprint, const std::string& shard_path);

}  // namespace tessera::patchgen
