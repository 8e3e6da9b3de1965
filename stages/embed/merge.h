// embed's finish, spread over the ranks: rank 0 writes RUN/embed/<tag>/embeddings.h5 as virtual
// datasets over the rank shards (metadata only: O(ranks), not O(rows x D)); then every rank writes
// the per-slide files of its share of the slides (features/ and the CLAM and TRIDENT layouts of
// docs/formats.md), reading their rows through it; rank 0 writes the status table slides.csv.
// The exchanged files (embeddings.h5, features/<slide_id>.h5, the .pt tensors) are written
// through common/store; this file decides what goes in them.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/stage/partition.h"
#include "common/store/index.h"
#include "stages/embed/config.h"
#include "stages/embed/peer_formats.h"

namespace tessera::embed {

// Not collective (rank 0). Writes embeddings.h5 (under a temporary name, renamed when complete):
// /patch_id, /slide, /coords and /embeddings map row i of the index to the shard of
// partition.owner(i), row partition.local_index(i), with one mapping per rank (a regular
// hyperslab for the (block-)cyclic layouts). Throws IoError naming a shard that does not hold
// the rows the partition gives its rank.
void write_embeddings_file(const IndexInfo& info, const Partition& partition, int output_dim,
                           const Config& config, const nlohmann::json& model_fingerprint,
                           const std::string& stage_dir, const std::string& fingerprint);

// How the per-slide files are written.
struct SlideFilesSpec {
  PeerLayouts peers;    // which peer layouts besides features/
  std::string encoder;  // TRIDENT encoder name: folder features_<encoder>/, attribute `encoder`
  int64_t overlap = 0;  // target pixels neighbouring patches share (patchgen's stride)
};

// Not collective. For the slides of the part with an outcome kPatches or kEmpty (see
// peer_formats.h) whose position among them is congruent to `rank` mod `world_size`, writes
// features/<slide_id>.h5 and, as `spec.peers` asks, clam/pt_files/<slide_id>.pt,
// clam/h5_files/<slide_id>.h5 and features_<encoder>/<slide_id>.h5 (hard links to the features
// file), clam/patches/<slide_id>.h5 and patches/<slide_id>_patches.h5; each file under a
// temporary name, renamed when complete. An empty slide gets [0, D] features and [0, 2] coords.
// Rows are read through embeddings.h5 in blocks after checking that its patch ids are the
// index's. Returns the number of slides written (empty ones included); appends every file it
// wrote (relative to the stage directory) to `written` when given.
int64_t write_slide_features(const IndexInfo& info, const IndexReader& index, int rank,
                             int world_size, const nlohmann::json& model_fingerprint,
                             const SlideFilesSpec& spec, const std::string& stage_dir,
                             std::vector<std::string>* written = nullptr);

// Not collective (rank 0). Writes slides.csv (status_table_csv of the slide table) atomically.
void write_status_table(const IndexInfo& info, const std::string& stage_dir);

}  // namespace tessera::embed
