// Rank 0's merge: checks every rank marker, writes RUN/embed/<tag>/embeddings.h5 (every row in
// patch_id order, i.e. by slide, then y, then x) and features/<slide_id>.h5 per slide in the
// CLAM/TRIDENT layout, then _SUCCESS. Streams in blocks: memory stays bounded by the block size,
// not the cohort.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "stages/embed/config.h"
#include "common/store/index.h"

namespace tessera::embed {

inline constexpr int64_t kEmbedFormatVersion = 1;

// Not collective (rank 0). Throws IoError when a marker is invalid or the rank shards do not
// hold exactly the index's patches. Returns the _SUCCESS summary written.
nlohmann::json merge(const PatchIndex& index, const Config& config,
                     const nlohmann::json& model_fingerprint, int output_dim, int world_size,
                     const std::string& stage_dir, const std::string& fingerprint,
                     const std::string& start_time, double wait_s);

}  // namespace tessera::embed
