#include "common/store/index.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <sstream>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/stage/layout.h"  // the skeleton file names (header only)
#include "common/store/files.h"
#include "common/store/store.h"

namespace tessera {

namespace fs = std::filesystem;

std::string IndexInfo::shard_path(int s) const {
  return (fs::path(stage_dir) / patch_shard_file(s)).string();
}

int64_t patch_overlap(int64_t patch_size, int64_t stride) {
  const int64_t step = stride == 0 ? patch_size : stride;
  return std::max<int64_t>(0, patch_size - step);
}

namespace {

// The overlap of an index.h5 written before the attribute: from the `stride = N` line of the
// stage directory's config.ini, as embed read it then (0 when absent).
int64_t legacy_overlap(const std::string& stage_dir, int64_t patch_size) {
  const std::string ini = (fs::path(stage_dir) / kConfigFile).string();
  if (!path_exists(ini)) return 0;
  std::stringstream in(read_file(ini));
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq);
    key.erase(key.find_last_not_of(" \t") + 1);
    if (key != "stride") continue;
    try {
      return patch_overlap(patch_size, std::stoll(line.substr(eq + 1)));
    } catch (const std::exception&) {
      fail<IoError>("'{}' records no overlap and the stride line of '{}' is not a number: '{}'",
                    (fs::path(stage_dir) / kIndexFile).string(), ini, line);
    }
  }
  return 0;
}

}  // namespace

IndexInfo load_index_info(const std::string& stage_dir) {
  IndexInfo index;
  index.stage_dir = stage_dir;
  auto success = read_json_file((fs::path(stage_dir) / kSuccessFile).string());
  if (!success) {
    fail<InvalidInput>("'{}' is not a completed patchgen run (no _SUCCESS): run patchgen first "
                       "or finish its rerun",
                       stage_dir);
  }
  index.success = *success;
  index.path = (fs::path(stage_dir) / kIndexFile).string();
  h5::File file = h5::File::open(index.path, h5::Mode::kRead);
  if (file.attr_int("format_version") != kIndexFormatVersion) {
    fail<IoError>("'{}' has index format version {}, this build reads {}", index.path,
                  file.attr_int("format_version"), kIndexFormatVersion);
  }
  index.patch_size = static_cast<int>(file.attr_int("patch_size"));
  index.mpp = file.attr_double("mpp");
  index.encoding = file.attr_string("encoding");
  index.num_shards = static_cast<int>(file.attr_int("num_shards"));
  index.part = static_cast<int>(file.attr_int("part"));
  index.parts = static_cast<int>(file.attr_int("parts"));
  index.config_fingerprint = file.attr_string("config_fingerprint");
  index.overlap = file.has_attr("overlap") ? file.attr_int("overlap")
                                            : legacy_overlap(stage_dir, index.patch_size);
  index.rows = static_cast<int64_t>(file.open_dataset(index_names::kPatchId).dims()[0]);
  h5::Group g = file.open_group(index_names::kSlides);
  SlideTable& t = index.slides;
  t.slide_id = g.open_dataset("slide_id").read_strings();
  t.path = g.open_dataset("path").read_strings();
  t.path_as_written = g.open_dataset("path_as_written").read_strings();
  t.mpp_source = g.open_dataset("mpp_source").read_strings();
  t.vendor = g.open_dataset("vendor").read_strings();
  t.mpp_y = g.open_dataset("mpp_y").read_all<double>();
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
  t.metadata_columns = g.open_dataset(index_names::kMetadataColumns).read_strings();
  h5::Group meta = g.open_group(index_names::kMetadata);
  for (const auto& column : t.metadata_columns) {
    t.metadata.push_back(meta.open_dataset(column).read_strings());
  }
  index.slide_offset.assign(1, 0);
  for (int64_t count : t.patch_count) index.slide_offset.push_back(index.slide_offset.back() + count);
  if (index.slide_offset.back() != index.rows) {
    fail<IoError>("'{}' is inconsistent: the slide table counts {} patches, the index has {} rows",
                  index.path, index.slide_offset.back(), index.rows);
  }
  return index;
}

struct IndexReader::Impl {
  h5::File file;
  h5::Dataset patch_id, slide, coords, tissue, shard, row;
  int64_t rows = 0;
};

IndexReader::IndexReader(const std::string& path) {
  h5::File file = h5::File::open(path, h5::Mode::kRead);
  using namespace index_names;
  h5::Dataset ids = file.open_dataset(kPatchId), slide = file.open_dataset(kSlide),
              coords = file.open_dataset(kCoords), tissue = file.open_dataset(kTissue),
              shard = file.open_dataset(kShard), row = file.open_dataset(kRow);
  impl_ = std::unique_ptr<Impl>(new Impl{std::move(file), std::move(ids), std::move(slide),
                                         std::move(coords), std::move(tissue), std::move(shard),
                                         std::move(row)});
  impl_->rows = static_cast<int64_t>(impl_->patch_id.dims()[0]);
  for (const h5::Dataset* d : {&impl_->slide, &impl_->coords, &impl_->tissue, &impl_->shard,
                               &impl_->row}) {
    if (static_cast<int64_t>(d->dims()[0]) != impl_->rows) {
      fail<IoError>("'{}' is inconsistent: columns of different lengths", path);
    }
  }
}

IndexReader::~IndexReader() = default;
IndexReader::IndexReader(IndexReader&&) noexcept = default;
IndexReader& IndexReader::operator=(IndexReader&&) noexcept = default;

int64_t IndexReader::rows() const { return impl_->rows; }

namespace {

void size_rows(IndexRows& r, size_t n) {
  r.patch_id.resize(n);
  r.slide.resize(n);
  r.coords.resize(2 * n);
  r.tissue.resize(n);
  r.shard.resize(n);
  r.row.resize(n);
}

}  // namespace

IndexRows IndexReader::read_range(int64_t first, int64_t count) const {
  IndexRows r;
  size_rows(r, static_cast<size_t>(count));
  if (count == 0) return r;
  const auto f = static_cast<hsize_t>(first);
  const auto n = static_cast<hsize_t>(count);
  impl_->patch_id.read_rows(r.patch_id.data(), f, n);
  impl_->slide.read_rows(r.slide.data(), f, n);
  impl_->coords.read_rows(r.coords.data(), f, n);
  impl_->tissue.read_rows(r.tissue.data(), f, n);
  impl_->shard.read_rows(r.shard.data(), f, n);
  impl_->row.read_rows(r.row.data(), f, n);
  return r;
}

IndexRows IndexReader::read_rows(const std::vector<int64_t>& rows) const {
  IndexRows r;
  size_rows(r, rows.size());
  if (rows.empty()) return r;
  const std::vector<hsize_t> list(rows.begin(), rows.end());
  impl_->patch_id.read_row_list(r.patch_id.data(), list);
  impl_->slide.read_row_list(r.slide.data(), list);
  impl_->coords.read_row_list(r.coords.data(), list);
  impl_->tissue.read_row_list(r.tissue.data(), list);
  impl_->shard.read_row_list(r.shard.data(), list);
  impl_->row.read_row_list(r.row.data(), list);
  return r;
}

}  // namespace tessera
