// Rank 0's consolidation: a streaming k-way merge of the rank shards (each sorted by patch_id)
// into RUN/patchgen/index.h5, with the slide table. Memory is bounded by a block of rows per rank
// and the slide table, whatever the number of patches; the pixels are not read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/patchgen/config.h"
#include "stages/patchgen/manifest.h"
#include "stages/patchgen/plan.h"

namespace tessera::patchgen {

// Not collective (rank 0 only). `markers` are the checked rank markers, by rank. Throws IoError
// when a shard does not hold what its marker says or the shards together do not hold exactly the
// planned patches of every successful slide. Returns the _SUCCESS fields: status, exit_code (3
// when any slide failed), counts, failed slides, summed timings, consolidate_s.
nlohmann::json consolidate(const Manifest& manifest, const PartPlan& part, const Config& config,
                           const std::string& stage_dir, const std::string& fingerprint,
                           const std::vector<nlohmann::json>& markers);

// Rows read from each shard per step of the merge.
inline constexpr uint64_t kMergeBlockRows = 16384;

}  // namespace tessera::patchgen
