#include "common/store/vector_meta.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/store/index.h"

namespace tessera {

namespace {

constexpr hsize_t kRowChunk = 65536;

bool parse_int(const std::string& s, int64_t& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size()) return false;
  out = v;
  return true;
}

bool parse_float(const std::string& s, double& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v)) return false;
  out = v;
  return true;
}

}  // namespace

const char* meta_type_name(MetaType type) {
  switch (type) {
    case MetaType::kInt: return "int64";
    case MetaType::kFloat: return "float64";
    case MetaType::kString: return "string";
  }
  return "string";
}

MetaType infer_meta_type(const std::vector<std::string>& values) {
  bool any = false, ints = true, floats = true;
  for (const auto& v : values) {
    if (v.empty()) continue;
    any = true;
    int64_t i;
    double d;
    if (ints && !parse_int(v, i)) ints = false;
    if (floats && !parse_float(v, d)) floats = false;
    if (!ints && !floats) break;
  }
  if (!any) return MetaType::kString;
  return ints ? MetaType::kInt : floats ? MetaType::kFloat : MetaType::kString;
}

MetaColumn MetaColumn::from_text(const std::string& name, MetaType type,
                                 const std::vector<std::string>& values) {
  MetaColumn c;
  c.name = name;
  c.type = type;
  for (const auto& v : values) {
    if (type == MetaType::kString) {
      c.strings.push_back(v);
    } else if (type == MetaType::kInt) {
      int64_t i = 0;
      if (!v.empty() && !parse_int(v, i)) {
        fail<InvalidInput>("metadata column '{}': '{}' is not an integer", name, v);
      }
      c.ints.push_back(i);
    } else {
      double d = std::numeric_limits<double>::quiet_NaN();
      if (!v.empty() && !parse_float(v, d)) {
        fail<InvalidInput>("metadata column '{}': '{}' is not a number", name, v);
      }
      c.floats.push_back(d);
    }
  }
  return c;
}

std::string MetaColumn::text(size_t i) const {
  switch (type) {
    case MetaType::kInt: return std::to_string(ints.at(i));
    case MetaType::kFloat: return std::isnan(floats.at(i)) ? "" : fmt::format("{}", floats.at(i));
    case MetaType::kString: return strings.at(i);
  }
  return {};
}

VectorSlideTable vector_slide_table(const IndexInfo& index) {
  const SlideTable& s = index.slides;
  VectorSlideTable t;
  t.slide_id = s.slide_id;
  t.patient_id = s.patient_id;
  t.path = s.path;
  t.level = s.level;
  t.read_size = s.read_size;
  t.slide_mpp = s.mpp_x;
  t.downsample = s.downsample;
  for (size_t c = 0; c < s.metadata_columns.size(); ++c) {
    t.metadata.push_back(MetaColumn::from_text(s.metadata_columns[c],
                                               infer_meta_type(s.metadata[c]), s.metadata[c]));
  }
  return t;
}

void merge_slide_table(VectorSlideTable& table, const VectorSlideTable& other,
                       const std::string& what) {
  if (table.slide_id != other.slide_id) {
    fail<IoError>("{} lists other slides than the first part's index: the parts come from "
                  "different manifests",
                  what);
  }
  for (size_t s = 0; s < table.size(); ++s) {
    if (table.level[s] >= 0 || other.level[s] < 0) continue;
    table.level[s] = other.level[s];
    table.read_size[s] = other.read_size[s];
    table.slide_mpp[s] = other.slide_mpp[s];
    table.downsample[s] = other.downsample[s];
  }
}

void VectorRows::clear() {
  patch_id.clear();
  slide.clear();
  coords.clear();
  tissue.clear();
}

struct VectorMetaWriter::Impl {
  std::string path;
  h5::File file;
  h5::Dataset patch_id, slide, coords, tissue;
  int64_t rows = 0;
};

VectorMetaWriter::VectorMetaWriter(const std::string& path, int shard, int patch_size, double mpp) {
  h5::File file = h5::File::open(path, h5::Mode::kCreateTruncate);
  file.set_attr("format_version", kVectorMetaFormatVersion);
  file.set_attr("shard", static_cast<int64_t>(shard));
  file.set_attr("patch_size", static_cast<int64_t>(patch_size));
  file.set_attr("mpp", mpp);
  h5::DatasetOptions options;
  options.chunk = {kRowChunk};
  h5::Dataset ids = file.create_appendable("patch_id", h5::Type::kInt64, {}, options);
  h5::Dataset slide = file.create_appendable("slide", h5::Type::kInt32, {}, options);
  h5::Dataset coords = file.create_appendable("coords", h5::Type::kInt64, {2}, options);
  h5::Dataset tissue = file.create_appendable("tissue", h5::Type::kFloat32, {}, options);
  impl_.reset(new Impl{path, std::move(file), std::move(ids), std::move(slide), std::move(coords),
                       std::move(tissue)});
}

VectorMetaWriter::~VectorMetaWriter() = default;
VectorMetaWriter::VectorMetaWriter(VectorMetaWriter&&) noexcept = default;
VectorMetaWriter& VectorMetaWriter::operator=(VectorMetaWriter&&) noexcept = default;

void VectorMetaWriter::append(const VectorRows& rows, size_t first, size_t n) {
  if (n == 0) return;
  impl_->patch_id.append(rows.patch_id.data() + first, n);
  impl_->slide.append(rows.slide.data() + first, n);
  impl_->coords.append(rows.coords.data() + 2 * first, n);
  impl_->tissue.append(rows.tissue.data() + first, n);
  impl_->rows += static_cast<int64_t>(n);
}

int64_t VectorMetaWriter::rows() const { return impl_->rows; }

void VectorMetaWriter::close(const VectorSlideTable& t) {
  h5::Group g = impl_->file.create_group("slides");
  g.write_strings("slide_id", t.slide_id);
  g.write_strings("patient_id", t.patient_id);
  g.write_strings("path", t.path);
  g.write_vector("level", t.level);
  g.write_vector("read_size", t.read_size);
  g.write_vector("slide_mpp", t.slide_mpp);
  g.write_vector("downsample", t.downsample);
  std::vector<std::string> names, types;
  h5::Group meta = g.create_group("metadata");
  for (const auto& c : t.metadata) {
    names.push_back(c.name);
    types.push_back(meta_type_name(c.type));
    switch (c.type) {
      case MetaType::kInt: meta.write_vector(c.name, c.ints); break;
      case MetaType::kFloat: meta.write_vector(c.name, c.floats); break;
      case MetaType::kString: meta.write_strings(c.name, c.strings); break;
    }
  }
  g.write_strings("metadata_columns", names);
  g.write_strings("metadata_types", types);
  impl_->patch_id.close();
  impl_->slide.close();
  impl_->coords.close();
  impl_->tissue.close();
  impl_->file.close();
}

VectorMeta read_vector_meta(const std::string& path, bool rows) {
  VectorMeta m;
  h5::File file = h5::File::open(path, h5::Mode::kRead);
  if (file.attr_int("format_version") != kVectorMetaFormatVersion) {
    fail<IoError>("'{}' has shard metadata format version {}, this build reads {}", path,
                  file.attr_int("format_version"), kVectorMetaFormatVersion);
  }
  m.shard = static_cast<int>(file.attr_int("shard"));
  m.patch_size = static_cast<int>(file.attr_int("patch_size"));
  m.mpp = file.attr_double("mpp");
  h5::Group g = file.open_group("slides");
  VectorSlideTable& t = m.slides;
  t.slide_id = g.open_dataset("slide_id").read_strings();
  t.patient_id = g.open_dataset("patient_id").read_strings();
  t.path = g.open_dataset("path").read_strings();
  t.level = g.open_dataset("level").read_all<int32_t>();
  t.read_size = g.open_dataset("read_size").read_all<int32_t>();
  t.slide_mpp = g.open_dataset("slide_mpp").read_all<double>();
  t.downsample = g.open_dataset("downsample").read_all<double>();
  const auto names = g.open_dataset("metadata_columns").read_strings();
  const auto types = g.open_dataset("metadata_types").read_strings();
  h5::Group meta = g.open_group("metadata");
  for (size_t i = 0; i < names.size(); ++i) {
    MetaColumn c;
    c.name = names[i];
    h5::Dataset d = meta.open_dataset(names[i]);
    if (types.at(i) == "int64") {
      c.type = MetaType::kInt;
      c.ints = d.read_all<int64_t>();
    } else if (types[i] == "float64") {
      c.type = MetaType::kFloat;
      c.floats = d.read_all<double>();
    } else {
      c.type = MetaType::kString;
      c.strings = d.read_strings();
    }
    t.metadata.push_back(std::move(c));
  }
  if (rows) {
    m.rows.patch_id = file.open_dataset("patch_id").read_all<int64_t>();
    m.rows.slide = file.open_dataset("slide").read_all<int32_t>();
    m.rows.coords = file.open_dataset("coords").read_all<int64_t>();
    m.rows.tissue = file.open_dataset("tissue").read_all<float>();
    const size_t n = m.rows.patch_id.size();
    if (m.rows.slide.size() != n || m.rows.coords.size() != 2 * n || m.rows.tissue.size() != n) {
      fail<IoError>("'{}' is inconsistent: its row columns differ in length", path);
    }
    for (int32_t s : m.rows.slide) {
      if (s < 0 || static_cast<size_t>(s) >= t.size()) {
        fail<IoError>("'{}' is inconsistent: a row refers to slide {} of {}", path, s, t.size());
      }
    }
  }
  return m;
}

}  // namespace tessera
