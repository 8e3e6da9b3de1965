#include "common/store/vector_meta.h"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <xxhash.h>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/store/index.h"

namespace tessera {

// A streaming XXH3-64 state. Not in the anonymous namespace: VectorMetaWriter::Impl holds some,
// and a unity build includes this file into another.
namespace vector_meta_detail {
struct Xxh3Free {
  void operator()(XXH3_state_t* s) const noexcept { XXH3_freeState(s); }
};
using Xxh3 = std::unique_ptr<XXH3_state_t, Xxh3Free>;
}  // namespace vector_meta_detail
using vector_meta_detail::Xxh3;

namespace {

constexpr hsize_t kRowChunk = 65536;
constexpr const char* kRowsXxh3 = "rows_xxh3";
constexpr const char* kSlidesXxh3 = "slides_xxh3";
constexpr std::array<const char*, 4> kRowColumns = {"patch_id", "slide", "coords", "tissue"};

Xxh3 new_state() {
  Xxh3 s(XXH3_createState());
  if (!s || XXH3_64bits_reset(s.get()) != XXH_OK) throw Error("xxhash: cannot initialise a state");
  return s;
}

// The bytes of rows [first, first + n) of row column c (kRowColumns order).
std::pair<const void*, size_t> column_bytes(const VectorRows& r, size_t c, size_t first,
                                            size_t n) {
  switch (c) {
    case 0: return {r.patch_id.data() + first, n * sizeof(int64_t)};
    case 1: return {r.slide.data() + first, n * sizeof(int32_t)};
    case 2: return {r.coords.data() + 2 * first, 2 * n * sizeof(int64_t)};
    default: return {r.tissue.data() + first, n * sizeof(float)};
  }
}

// XXH3-64 of a slide table: every field in declaration order, strings length-prefixed, numbers
// as their in-memory (little-endian) bytes.
int64_t slide_table_xxh3(const VectorSlideTable& t) {
  Xxh3 s = new_state();
  auto bytes = [&](const void* p, size_t n) { XXH3_64bits_update(s.get(), p, n); };
  auto text = [&](const std::string& v) {
    const uint64_t n = v.size();
    bytes(&n, sizeof n);
    bytes(v.data(), v.size());
  };
  auto texts = [&](const std::vector<std::string>& v) {
    const uint64_t n = v.size();
    bytes(&n, sizeof n);
    for (const auto& x : v) text(x);
  };
  auto numbers = [&](const auto& v) {
    const uint64_t n = v.size();
    bytes(&n, sizeof n);
    bytes(v.data(), v.size() * sizeof(v[0]));
  };
  texts(t.slide_id);
  texts(t.patient_id);
  texts(t.path);
  numbers(t.level);
  numbers(t.read_size);
  numbers(t.slide_mpp);
  numbers(t.downsample);
  for (const auto& c : t.metadata) {
    text(c.name);
    text(meta_type_name(c.type));
    numbers(c.ints);
    numbers(c.floats);
    texts(c.strings);
  }
  return static_cast<int64_t>(XXH3_64bits_digest(s.get()));
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

MetaColumn MetaColumn::from_text(const std::string& name, MetaType type,
                                 const std::vector<std::string>& values) {
  MetaColumn c;
  c.name = name;
  c.type = type;
  for (const auto& v : values) {
    if (type == MetaType::kString) {
      c.strings.push_back(v);
    } else if (type == MetaType::kInt) {
      const std::optional<int64_t> i = v.empty() ? 0 : parse_int64(v);
      if (!i) fail<InvalidInput>("metadata column '{}': '{}' is not an integer", name, v);
      c.ints.push_back(*i);
    } else {
      const std::optional<double> d =
          v.empty() ? std::numeric_limits<double>::quiet_NaN() : parse_double(v);
      if (!d) fail<InvalidInput>("metadata column '{}': '{}' is not a number", name, v);
      c.floats.push_back(*d);
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
                                               infer_value_type(s.metadata[c]), s.metadata[c]));
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
  // Per-chunk XXH3-64 of each row column (kRowColumns order), as rows are appended.
  std::array<Xxh3, 4> states;
  hsize_t in_chunk = 0;       // rows of the current chunk hashed so far
  std::vector<int64_t> sums;  // 4 per finished chunk

  void end_chunk() {
    for (auto& st : states) {
      sums.push_back(static_cast<int64_t>(XXH3_64bits_digest(st.get())));
      XXH3_64bits_reset(st.get());
    }
    in_chunk = 0;
  }
};

VectorMetaWriter::VectorMetaWriter(const std::string& path, int shard, int patch_size, double mpp) {
  h5::File file = h5::File::open(path, h5::Mode::kCreateTruncate);
  file.set_attr("format_version", kVectorMetaFormatVersion);
  file.set_attr("shard", static_cast<int64_t>(shard));
  file.set_attr("patch_size", static_cast<int64_t>(patch_size));
  file.set_attr("mpp", mpp);
  h5::DatasetOptions options;
  options.chunk = {kRowChunk};
  options.checksum = false;  // each chunk's XXH3 in /rows_xxh3 instead of Fletcher32
  h5::Dataset ids = file.create_appendable("patch_id", h5::Type::kInt64, {}, options);
  h5::Dataset slide = file.create_appendable("slide", h5::Type::kInt32, {}, options);
  h5::Dataset coords = file.create_appendable("coords", h5::Type::kInt64, {2}, options);
  h5::Dataset tissue = file.create_appendable("tissue", h5::Type::kFloat32, {}, options);
  impl_.reset(new Impl{path, std::move(file), std::move(ids), std::move(slide), std::move(coords),
                       std::move(tissue), 0, {new_state(), new_state(), new_state(), new_state()},
                       0, {}});
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
  for (size_t at = first, left = n; left > 0;) {
    const size_t take = std::min<size_t>(left, kRowChunk - impl_->in_chunk);
    for (size_t c = 0; c < kRowColumns.size(); ++c) {
      const auto [data, size] = column_bytes(rows, c, at, take);
      XXH3_64bits_update(impl_->states[c].get(), data, size);
    }
    impl_->in_chunk += take;
    if (impl_->in_chunk == kRowChunk) impl_->end_chunk();
    at += take;
    left -= take;
  }
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
  if (impl_->in_chunk > 0) impl_->end_chunk();
  impl_->file.write_dataset(kRowsXxh3, h5::Type::kInt64,
                            {static_cast<hsize_t>(impl_->sums.size() / 4), 4},
                            impl_->sums.data());
  impl_->file.set_attr(kSlidesXxh3, slide_table_xxh3(t));
  impl_->patch_id.close();
  impl_->slide.close();
  impl_->coords.close();
  impl_->tissue.close();
  impl_->file.close();
}

namespace {

// Checks every chunk of the row columns against /rows_xxh3. Throws IoError naming the file, the
// column and the rows of the first chunk that differs.
void verify_rows(const h5::File& file, const VectorRows& r, const std::string& path) {
  const std::vector<int64_t> sums = file.open_dataset(kRowsXxh3).read_all<int64_t>();
  const std::vector<hsize_t> chunk_dims = file.open_dataset("patch_id").chunk_dims();
  const size_t chunk = chunk_dims.empty() ? kRowChunk : chunk_dims[0];
  const size_t n = r.size();
  const size_t chunks = (n + chunk - 1) / chunk;
  if (sums.size() != 4 * chunks) {
    fail<IoError>("'{}' holds {} row checksums (/{}) for {} chunks of {} rows: the file is "
                  "damaged",
                  path, sums.size(), kRowsXxh3, chunks, n);
  }
  for (size_t k = 0; k < chunks; ++k) {
    const size_t first = k * chunk, count = std::min(chunk, n - first);
    for (size_t c = 0; c < kRowColumns.size(); ++c) {
      const auto [data, size] = column_bytes(r, c, first, count);
      if (static_cast<int64_t>(XXH3_64bits(data, size)) != sums[4 * k + c]) {
        fail<IoError>("'{}': rows {}..{} of /{} (chunk {}) do not match their checksum in /{}: "
                      "the file is damaged",
                      path, first, first + count - 1, kRowColumns[c], k, kRowsXxh3);
      }
    }
  }
}

}  // namespace

VectorMeta read_vector_meta(const std::string& path, bool rows) {
  VectorMeta m;
  h5::File file = h5::File::open(path, h5::Mode::kRead);
  const int64_t version = file.attr_int("format_version");
  if (version != kVectorMetaFormatVersion && version != 1) {
    fail<IoError>("'{}' has shard metadata format version {}, this build reads 1 and {}", path,
                  version, kVectorMetaFormatVersion);
  }
  // Version 1 files carry Fletcher32 per chunk instead of the XXH3 checksums.
  const bool xxh3 = version >= 2;
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
  if (xxh3 && slide_table_xxh3(t) != file.attr_int(kSlidesXxh3)) {
    fail<IoError>("'{}': the slide table (/slides) does not match its checksum (attribute {}): "
                  "the file is damaged",
                  path, kSlidesXxh3);
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
    if (xxh3) verify_rows(file, m.rows, path);
    for (int32_t s : m.rows.slide) {
      if (s < 0 || static_cast<size_t>(s) >= t.size()) {
        fail<IoError>("'{}' is inconsistent: a row refers to slide {} of {}", path, s, t.size());
      }
    }
  }
  return m;
}

}  // namespace tessera
