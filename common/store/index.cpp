#include "common/store/index.h"

#include <filesystem>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/core/fs.h"

namespace tessera {

namespace fs = std::filesystem;

std::string PatchIndex::shard_path(int s) const {
  return (fs::path(stage_dir) / "shards" / rank_file_name(s, ".h5")).string();
}

PatchIndex load_index(const std::string& run_dir) {
  PatchIndex index;
  index.stage_dir = (fs::path(run_dir) / "patchgen").string();
  auto success = read_json_file((fs::path(index.stage_dir) / "_SUCCESS").string());
  if (!success) {
    fail<InvalidInput>("'{}' is not a completed patchgen run (no _SUCCESS): run patchgen first "
                       "or finish its rerun",
                       index.stage_dir);
  }
  index.success = *success;
  const std::string path = (fs::path(index.stage_dir) / "index.h5").string();
  h5::File file = h5::File::open(path, h5::Mode::kRead);
  if (file.attr_int("format_version") != kIndexFormatVersion) {
    fail<IoError>("'{}' has index format version {}, this build reads {}", path,
                  file.attr_int("format_version"), kIndexFormatVersion);
  }
  index.patch_size = static_cast<int>(file.attr_int("patch_size"));
  index.mpp = file.attr_double("mpp");
  index.encoding = file.attr_string("encoding");
  index.num_shards = static_cast<int>(file.attr_int("num_shards"));
  index.config_fingerprint = file.attr_string("config_fingerprint");
  index.patch_id = file.open_dataset("patch_id").read_all<int64_t>();
  index.slide = file.open_dataset("slide").read_all<int32_t>();
  index.coords = file.open_dataset("coords").read_all<int64_t>();
  index.tissue = file.open_dataset("tissue").read_all<float>();
  index.shard = file.open_dataset("shard").read_all<int32_t>();
  index.row = file.open_dataset("row").read_all<int64_t>();
  const size_t n = index.patch_id.size();
  if (index.slide.size() != n || index.coords.size() != 2 * n || index.tissue.size() != n ||
      index.shard.size() != n || index.row.size() != n) {
    fail<IoError>("'{}' is inconsistent: columns of different lengths", path);
  }
  h5::Group g = file.open_group("slides");
  SlideTable& t = index.slides;
  t.slide_id = g.open_dataset("slide_id").read_strings();
  t.path = g.open_dataset("path").read_strings();
  t.patient_id = g.open_dataset("patient_id").read_strings();
  t.status = g.open_dataset("status").read_strings();
  t.reason = g.open_dataset("reason").read_strings();
  t.width = g.open_dataset("width").read_all<int64_t>();
  t.height = g.open_dataset("height").read_all<int64_t>();
  t.patch_count = g.open_dataset("patch_count").read_all<int64_t>();
  t.level = g.open_dataset("level").read_all<int32_t>();
  t.read_size = g.open_dataset("read_size").read_all<int32_t>();
  t.mpp_x = g.open_dataset("mpp_x").read_all<double>();
  t.downsample = g.open_dataset("downsample").read_all<double>();
  t.metadata_columns = g.open_dataset("metadata_columns").read_strings();
  h5::Group meta = g.open_group("metadata");
  for (const auto& column : t.metadata_columns) {
    t.metadata.push_back(meta.open_dataset(column).read_strings());
  }
  return index;
}

}  // namespace tessera
