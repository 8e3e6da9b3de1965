#include "common/store/embeddings.h"

#include <filesystem>
#include <optional>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/store/files.h"

namespace tessera {

namespace fs = std::filesystem;

std::string embedding_shard_file(int rank) {
  return std::string(kShardsDir) + "/" + rank_file_name(rank, ".h5");
}

std::string embeddings_path(const std::string& embed_dir) {
  return (fs::path(embed_dir) / kEmbeddingsFile).string();
}

std::string slide_features_dir(const std::string& embed_dir) {
  return (fs::path(embed_dir) / kFeaturesDir).string();
}

std::string slide_features_file(const std::string& slide_id) {
  return std::string(kFeaturesDir) + "/" + slide_id + ".h5";
}

std::string slide_features_path(const std::string& embed_dir, const std::string& slide_id) {
  return (fs::path(embed_dir) / slide_features_file(slide_id)).string();
}

struct EmbeddingShardWriter::Impl {
  std::optional<h5::File> file;
  std::optional<h5::Dataset> ids, slides, coords, values;
  int64_t rows = 0;
};

EmbeddingShardWriter::EmbeddingShardWriter(const std::string& path, int dim, bool fp16, int rank,
                                           const std::string& model_fingerprint)
    : impl_(std::make_unique<Impl>()) {
  namespace n = embedding_names;
  Impl& s = *impl_;
  s.file.emplace(h5::File::open(path, h5::Mode::kCreateTruncate));
  h5::DatasetOptions opts;
  opts.chunk = {4096};
  h5::DatasetOptions copts;
  copts.chunk = {4096, 2};
  h5::DatasetOptions eopts;
  eopts.chunk = {256, static_cast<hsize_t>(dim)};
  s.ids.emplace(s.file->create_appendable(n::kPatchId, h5::Type::kInt64, {}, opts));
  s.slides.emplace(s.file->create_appendable(n::kSlide, h5::Type::kInt32, {}, opts));
  s.coords.emplace(s.file->create_appendable(n::kCoords, h5::Type::kInt64, {2}, copts));
  s.values.emplace(s.file->create_appendable(n::kEmbeddings,
                                             fp16 ? h5::Type::kFloat16 : h5::Type::kFloat32,
                                             {static_cast<hsize_t>(dim)}, eopts));
  s.file->set_attr("format_version", kEmbedFormatVersion);
  s.file->set_attr("output_dim", static_cast<int64_t>(dim));
  s.file->set_attr("rank", static_cast<int64_t>(rank));
  s.file->set_attr("model_fingerprint", model_fingerprint);
}

EmbeddingShardWriter::~EmbeddingShardWriter() = default;
EmbeddingShardWriter::EmbeddingShardWriter(EmbeddingShardWriter&&) noexcept = default;
EmbeddingShardWriter& EmbeddingShardWriter::operator=(EmbeddingShardWriter&&) noexcept = default;

void EmbeddingShardWriter::append(const int64_t* ids, const int32_t* slides,
                                  const int64_t* coords, const float* values, size_t n) {
  if (n == 0) return;
  Impl& s = *impl_;
  s.ids->append(ids, n);
  s.slides->append(slides, n);
  s.coords->append(coords, n);
  s.values->append_floats(values, n);
  s.rows += static_cast<int64_t>(n);
}

void EmbeddingShardWriter::close() {
  Impl& s = *impl_;
  if (!s.file) return;
  s.ids->close();
  s.slides->close();
  s.coords->close();
  s.values->close();
  s.file->close();
  s.file.reset();
}

int64_t EmbeddingShardWriter::rows() const { return impl_->rows; }

namespace {

std::vector<h5::VirtualSource> sources_of(const std::vector<ShardRows>& mappings,
                                          const std::string& dataset) {
  std::vector<h5::VirtualSource> sources;
  for (const ShardRows& m : mappings) {
    sources.push_back({embedding_shard_file(m.rank), dataset, static_cast<hsize_t>(m.first),
                       static_cast<hsize_t>(m.stride), static_cast<hsize_t>(m.block),
                       static_cast<hsize_t>(m.blocks), static_cast<hsize_t>(m.shard_first)});
  }
  return sources;
}

}  // namespace

void write_embeddings_file(const std::string& embed_dir, int64_t rows,
                           const std::vector<int64_t>& shard_rows,
                           const std::vector<ShardRows>& mappings,
                           const EmbeddingsAttributes& a) {
  namespace names = embedding_names;
  const auto n = static_cast<hsize_t>(rows);
  const auto d = static_cast<hsize_t>(a.output_dim);
  for (size_t r = 0; r < shard_rows.size(); ++r) {
    const std::string path =
        (fs::path(embed_dir) / embedding_shard_file(static_cast<int>(r))).string();
    h5::File shard = h5::File::open(path, h5::Mode::kRead);
    const auto dims = shard.open_dataset(names::kEmbeddings).dims();
    if (static_cast<int64_t>(dims[0]) != shard_rows[r] || dims[1] != d) {
      fail<IoError>("embed shard '{}' holds {} rows of dimension {}, the partition gives its rank "
                    "{} of {}",
                    path, dims[0], dims[1], shard_rows[r], d);
    }
  }
  const std::string path = embeddings_path(embed_dir);
  {
    h5::File f = h5::File::open(path + ".tmp", h5::Mode::kCreateTruncate);
    const h5::Type values = a.store_dtype == "fp16" ? h5::Type::kFloat16 : h5::Type::kFloat32;
    f.create_virtual(names::kPatchId, h5::Type::kInt64, {n}, sources_of(mappings, names::kPatchId));
    f.create_virtual(names::kSlide, h5::Type::kInt32, {n}, sources_of(mappings, names::kSlide));
    f.create_virtual(names::kCoords, h5::Type::kInt64, {n, 2}, sources_of(mappings, names::kCoords));
    f.create_virtual(names::kEmbeddings, values, {n, d}, sources_of(mappings, names::kEmbeddings));
    f.set_attr("format_version", kEmbedFormatVersion);
    f.set_attr("output_dim", static_cast<int64_t>(a.output_dim));
    f.set_attr("store_dtype", a.store_dtype);
    f.set_attr("model_fingerprint", a.model_fingerprint);
    f.set_attr("config_fingerprint", a.config_fingerprint);
    f.set_attr("patchgen_fingerprint", a.patchgen_fingerprint);
    f.set_attr("patch_size", a.patch_size);
    f.set_attr("mpp", a.mpp);
    f.set_attr("partition", a.partition);
    f.set_attr("num_shards", a.num_shards);
    f.close();
  }
  commit_file(path + ".tmp", path);
}

struct EmbeddingsReader::Impl {
  std::string path;
  h5::File file;
  h5::Dataset ids, values;
  int64_t rows = 0;
  int dim = 0;
  int64_t value_bytes = 4;  // of one stored element
};

EmbeddingsReader::EmbeddingsReader(const std::string& path) {
  namespace names = embedding_names;
  h5::File file = h5::File::open(path, h5::Mode::kRead);
  if (!file.has_attr("format_version") || file.attr_int("format_version") != kEmbedFormatVersion) {
    fail<IoError>("'{}' is not an embed output of format version {}: rerun embed", path,
                  kEmbedFormatVersion);
  }
  if (!file.exists(names::kPatchId) || !file.exists(names::kEmbeddings)) {
    fail<IoError>("'{}' is not an embed output: it lacks /{} or /{}", path, names::kPatchId,
                  names::kEmbeddings);
  }
  h5::Dataset ids = file.open_dataset(names::kPatchId);
  h5::Dataset values = file.open_dataset(names::kEmbeddings);
  const auto id_dims = ids.dims();
  const auto value_dims = values.dims();
  if (id_dims.size() != 1 || value_dims.size() != 2 || id_dims[0] != value_dims[0]) {
    fail<IoError>("'{}' is not an embed output: /{} and /{} must be [n] and [n, D]", path,
                  names::kPatchId, names::kEmbeddings);
  }
  const h5::Handle value_type(H5Dget_type(values.id()));
  if (value_type.id() < 0) {
    fail<IoError>("'{}': cannot read the type of /{}", path, names::kEmbeddings);
  }
  impl_ = std::make_unique<Impl>(Impl{path, std::move(file), std::move(ids), std::move(values),
                                      static_cast<int64_t>(value_dims[0]),
                                      static_cast<int>(value_dims[1]),
                                      static_cast<int64_t>(H5Tget_size(value_type.id()))});
}

EmbeddingsReader::~EmbeddingsReader() = default;
EmbeddingsReader::EmbeddingsReader(EmbeddingsReader&&) noexcept = default;
EmbeddingsReader& EmbeddingsReader::operator=(EmbeddingsReader&&) noexcept = default;

const std::string& EmbeddingsReader::path() const { return impl_->path; }
int64_t EmbeddingsReader::rows() const { return impl_->rows; }
int EmbeddingsReader::dim() const { return impl_->dim; }

void EmbeddingsReader::read_ids(int64_t* ids, int64_t first, int64_t n) const {
  impl_->ids.read_rows(ids, static_cast<hsize_t>(first), static_cast<hsize_t>(n));
}

void EmbeddingsReader::read_values(float* values, int64_t first, int64_t n) const {
  impl_->values.read_rows_as_floats(values, static_cast<hsize_t>(first), static_cast<hsize_t>(n));
}

void EmbeddingsReader::read_row_list(const std::vector<int64_t>& rows, int64_t* ids,
                                     float* values) const {
  const std::vector<hsize_t> list(rows.begin(), rows.end());
  impl_->ids.read_row_list(ids, list);
  impl_->values.read_row_list_as_floats(values, list);
}

int64_t EmbeddingsReader::row_bytes() const { return impl_->dim * impl_->value_bytes; }

EmbeddingsAttributes EmbeddingsReader::attributes() const {
  const h5::File& f = impl_->file;
  EmbeddingsAttributes a;
  try {
    a.output_dim = static_cast<int>(f.attr_int("output_dim"));
    a.store_dtype = f.attr_string("store_dtype");
    a.model_fingerprint = f.attr_string("model_fingerprint");
    a.config_fingerprint = f.attr_string("config_fingerprint");
    a.patchgen_fingerprint = f.attr_string("patchgen_fingerprint");
    a.patch_size = f.attr_int("patch_size");
    a.mpp = f.attr_double("mpp");
    a.partition = f.attr_string("partition");
    a.num_shards = f.attr_int("num_shards");
  } catch (const Error& e) {
    fail<IoError>("'{}' lacks the attributes of embeddings.h5: {}", impl_->path, e.what());
  }
  return a;
}

}  // namespace tessera
