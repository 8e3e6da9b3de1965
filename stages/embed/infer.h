// One rank's embedding loop: read -> prepare (main thread) overlapped with forward (inference
// thread) through bounded queues, results appended to the rank's shard. All HDF5 calls (reading
// patches, writing embeddings) stay on the calling thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/embed/config.h"
#include "stages/embed/model.h"
#include "stages/embed/source.h"
#include "common/stage/partition.h"
#include "common/store/index.h"

namespace tessera::embed {

struct InferStats {
  int64_t patches = 0;
  int64_t batches = 0;
  double read_s = 0;     // patch source (HDF5 read + JPEG decode, or OpenSlide)
  double prepare_s = 0;  // resize, normalise, cast
  double forward_s = 0;  // model forward, on the inference thread
  double write_s = 0;    // HDF5 appends and close
  double wait_s = 0;     // main thread blocked waiting for a forward result
  double total_s = 0;
  nlohmann::json to_json() const;
};

// Embeds the index rows `rank` owns under `partition` (in index order) in batches of
// config.batch_size, reading each batch's index rows from `index` as it goes (memory is O(batch),
// not O(rows)), and writes `shard_path` (patch_id, slide, coords, embeddings). On CUDA the last
// batch is padded with blank patches to the full batch size so that every forward pass has the
// same shape; on the CPU it is run as it is. Results depend on an image's position in its batch by float
// rounding, unless config.deterministic. Throws Error naming the patch ids when an output holds
// NaN or Inf.
InferStats embed_rows(const IndexInfo& info, const IndexReader& index, const Partition& partition,
                      int rank, const Model& model, PatchSource& source, const Config& config,
                      const std::string& shard_path, const std::string& progress_path);

// Returns "" when every value of the n x d block is finite, else the message naming the first
// offending patch ids (at most 10).
std::string check_finite(const float* values, int64_t n, int d, const int64_t* patch_ids);

}  // namespace tessera::embed
