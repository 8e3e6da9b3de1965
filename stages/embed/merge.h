// embed's finish, spread over the ranks: rank 0 writes RUN/embed/<tag>/embeddings.h5 as virtual
// datasets over the rank shards (metadata only: O(ranks), not O(rows x D)); then every rank writes
// the CLAM/TRIDENT feature files of its share of the slides, reading their rows through it.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/stage/partition.h"
#include "common/store/index.h"
#include "stages/embed/config.h"

namespace tessera::embed {

// Not collective (rank 0). Writes embeddings.h5 (under a temporary name, renamed when complete):
// /patch_id, /slide, /coords and /embeddings map row i of the index to the shard of
// partition.owner(i), row partition.local_index(i), with one mapping per rank (a regular
// hyperslab for the (block-)cyclic layouts). Throws IoError naming a shard that does not hold
// the rows the partition gives its rank.
void write_embeddings_file(const IndexInfo& info, const Partition& partition, int output_dim,
                           const Config& config, const nlohmann::json& model_fingerprint,
                           const std::string& stage_dir, const std::string& fingerprint);

// Not collective. Writes features/<slide_id>.h5 for the slides of the part with patches whose
// position among them is congruent to `rank` mod `world_size`, reading through embeddings.h5 in
// blocks, after checking that its patch ids are the index's. Returns the number of files written.
int64_t write_slide_features(const IndexInfo& info, const IndexReader& index, int rank,
                             int world_size, const nlohmann::json& model_fingerprint,
                             const std::string& stage_dir);

}  // namespace tessera::embed
