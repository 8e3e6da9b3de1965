#include "common/store/embeddings.h"

#include <optional>

#include "common/h5/h5.h"

namespace tessera {

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

}  // namespace tessera
