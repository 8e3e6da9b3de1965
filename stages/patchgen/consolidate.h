// Rank 0's consolidation: verifies every rank marker against its shard, builds the patch index
// RUN/patchgen/index.h5 (sorted by patch_id, with the slide table) and finally _SUCCESS.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/patchgen/config.h"
#include "stages/patchgen/manifest.h"
#include "stages/patchgen/plan.h"

namespace tessera::patchgen {

// Not collective (rank 0 only). Throws IoError when a marker is invalid, a shard does not hold
// what its marker says, or the shards together do not hold exactly the planned patches. Returns
// the _SUCCESS summary that was written; its "exit_code" is 3 when any slide failed.
nlohmann::json consolidate(const Manifest& manifest, const std::vector<SlidePlan>& plans,
                           const Config& config, int world_size, const std::string& stage_dir,
                           const std::string& fingerprint, const std::string& start_time,
                           double wait_s);

}  // namespace tessera::patchgen
