#include "common/store/slide_vectors.h"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "common/core/error.h"
#include "common/h5/h5.h"

namespace tessera {

namespace fs = std::filesystem;
namespace names = slide_vector_names;

int64_t CohortVectors::find(const std::string& id) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] == id) return static_cast<int64_t>(i);
  }
  return -1;
}

const std::vector<std::string>* CohortVectors::label(const std::string& column) const {
  for (size_t c = 0; c < label_columns.size(); ++c) {
    if (label_columns[c] == column) return &labels[c];
  }
  return nullptr;
}

std::string cohort_file_name(const std::string& level) {
  return level == "patient" ? kPatientCohortFile : kSlideCohortFile;
}

void write_cohort_vectors(const std::string& path, const CohortVectors& c) {
  const std::string temp = path + ".tmp";
  {
    h5::File file = h5::File::open(temp, h5::Mode::kCreateTruncate);
    const hsize_t n = c.ids.size();
    h5::DatasetOptions options;
    options.chunk = {std::max<hsize_t>(1, std::min<hsize_t>(n, 1024)),
                     static_cast<hsize_t>(std::max(1, c.dim))};
    file.write_dataset(names::kFeatures, h5::Type::kFloat32, {n, static_cast<hsize_t>(c.dim)},
                       c.features.data(), options);
    file.write_strings(names::kIds, c.ids);
    file.write_strings(names::kPatientId, c.patient_id);
    file.write_strings(names::kSlides, c.slides);
    file.write_vector<int64_t>(names::kNPatches, c.n_patches);
    h5::Group labels = file.create_group(names::kLabels);
    for (size_t k = 0; k < c.label_columns.size(); ++k) {
      labels.write_strings(c.label_columns[k], c.labels[k]);
    }
    h5::Group skipped = file.create_group(names::kSkipped);
    skipped.write_strings(names::kIds, c.skipped_ids);
    skipped.write_strings(names::kReason, c.skipped_reasons);
    file.set_attr("format_version", kCohortFileFormatVersion);
    file.set_attr("level", c.level);
    file.set_attr("encoder", c.encoder);
    file.set_attr("patch_encoder", c.patch_encoder);
    file.set_attr("method", c.method);
    file.set_attr("embed_tag", c.embed_tag);
    file.set_attr("output_dim", static_cast<int64_t>(c.dim));
    file.set_attr("label_columns", nlohmann::json(c.label_columns).dump());
    file.close();
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) fail<IoError>("cannot rename '{}' to '{}': {}", temp, path, ec.message());
}

CohortVectors read_cohort_vectors(const std::string& path) {
  CohortVectors c;
  h5::File file = h5::File::open(path, h5::Mode::kRead);
  if (!file.has_attr("format_version") ||
      file.attr_int("format_version") != kCohortFileFormatVersion) {
    fail<IoError>("'{}' is not a cohort vector file of format version {}", path,
                  kCohortFileFormatVersion);
  }
  c.level = file.attr_string("level");
  c.encoder = file.attr_string("encoder");
  c.patch_encoder = file.attr_string("patch_encoder");
  c.method = file.attr_string("method");
  c.embed_tag = file.attr_string("embed_tag");
  c.dim = static_cast<int>(file.attr_int("output_dim"));
  c.ids = file.open_dataset(names::kIds).read_strings();
  c.patient_id = file.open_dataset(names::kPatientId).read_strings();
  c.slides = file.open_dataset(names::kSlides).read_strings();
  c.n_patches = file.open_dataset(names::kNPatches).read_all<int64_t>();
  h5::Dataset features = file.open_dataset(names::kFeatures);
  const auto dims = features.dims();
  if (dims.size() != 2 || dims[0] != c.ids.size() || static_cast<int>(dims[1]) != c.dim ||
      c.patient_id.size() != c.ids.size() || c.slides.size() != c.ids.size() ||
      c.n_patches.size() != c.ids.size()) {
    fail<IoError>("'{}' is inconsistent: /features, /ids, /patient_id, /slides and /n_patches "
                  "must have the same rows and output_dim columns",
                  path);
  }
  c.features = features.read_all<float>();
  c.label_columns =
      nlohmann::json::parse(file.attr_string("label_columns")).get<std::vector<std::string>>();
  h5::Group labels = file.open_group(names::kLabels);
  for (const auto& column : c.label_columns) {
    c.labels.push_back(labels.open_dataset(column).read_strings());
    if (c.labels.back().size() != c.ids.size()) {
      fail<IoError>("'{}' is inconsistent: /labels/{} has {} rows, not {}", path, column,
                    c.labels.back().size(), c.ids.size());
    }
  }
  h5::Group skipped = file.open_group(names::kSkipped);
  c.skipped_ids = skipped.open_dataset(names::kIds).read_strings();
  c.skipped_reasons = skipped.open_dataset(names::kReason).read_strings();
  return c;
}

void write_rank_vectors(const std::string& path, const RankVectors& v) {
  h5::File file = h5::File::open(path, h5::Mode::kCreateTruncate);
  file.write_vector<int64_t>(names::kItem, v.items);
  file.write_vector<int64_t>(names::kNPatches, v.n_patches);
  file.write_dataset(names::kVectors, h5::Type::kFloat32,
                     {v.items.size(), static_cast<hsize_t>(v.dim)}, v.vectors.data());
  file.set_attr("output_dim", static_cast<int64_t>(v.dim));
  file.close();
}

RankVectors read_rank_vectors(const std::string& path) {
  RankVectors v;
  h5::File file = h5::File::open(path, h5::Mode::kRead);
  v.items = file.open_dataset(names::kItem).read_all<int64_t>();
  v.n_patches = file.open_dataset(names::kNPatches).read_all<int64_t>();
  v.vectors = file.open_dataset(names::kVectors).read_all<float>();
  v.dim = static_cast<int>(file.attr_int("output_dim"));
  if (v.n_patches.size() != v.items.size() ||
      v.vectors.size() != v.items.size() * static_cast<size_t>(v.dim)) {
    fail<IoError>("'{}' is inconsistent: item, n_patches and vectors disagree in rows", path);
  }
  return v;
}

}  // namespace tessera
