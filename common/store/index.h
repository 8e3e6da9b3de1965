// Read access to a completed patchgen run: RUN/patchgen/index.h5 (one row per patch, sorted by
// patch_id) and its slide table. Used by embed and ingest.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera {

inline constexpr int64_t kIndexFormatVersion = 1;

struct SlideTable {
  std::vector<std::string> slide_id, path, patient_id, status, reason;
  std::vector<int64_t> width, height, patch_count;
  std::vector<int32_t> level, read_size;
  std::vector<double> mpp_x, downsample;
  std::vector<std::string> metadata_columns;
  std::vector<std::vector<std::string>> metadata;  // [column][slide]
  size_t size() const { return slide_id.size(); }
};

struct PatchIndex {
  std::string stage_dir;
  int patch_size = 0;
  double mpp = 0;
  std::string encoding;
  int num_shards = 0;
  std::string config_fingerprint;
  nlohmann::json success;         // the _SUCCESS summary
  std::vector<int64_t> patch_id;  // sorted ascending
  std::vector<int32_t> slide;
  std::vector<int64_t> coords;    // x0, y0, x1, y1, ...
  std::vector<float> tissue;
  std::vector<int32_t> shard;
  std::vector<int64_t> row;
  SlideTable slides;
  size_t size() const { return patch_id.size(); }
  std::string shard_path(int shard) const;
};

// Loads RUN/patchgen's index. Throws InvalidInput naming the directory when the run is not
// complete (no _SUCCESS: "run patchgen first or finish its rerun") and IoError when the index is
// unreadable or inconsistent. Not collective; every rank may call it.
PatchIndex load_index(const std::string& run_dir);

}  // namespace tessera
