#include "common/store/index_writer.h"

#include <optional>
#include <vector>

#include "common/core/error.h"
#include "common/h5/h5.h"

namespace tessera {

namespace {
constexpr hsize_t kBlockRows = 65536;
}  // namespace

struct IndexWriter::Impl {
  std::string path;
  h5::File file;
  std::optional<h5::Dataset> ids_, slide_, coords_, tissue_, shard_, row_;
  std::vector<int64_t> ids, coords, row;
  std::vector<int32_t> slide, shard;
  std::vector<float> tissue;
  int64_t written = 0;

  void flush() {
    const hsize_t n = ids.size();
    if (n == 0) return;
    ids_->append(ids.data(), n);
    slide_->append(slide.data(), n);
    coords_->append(coords.data(), n);
    tissue_->append(tissue.data(), n);
    shard_->append(shard.data(), n);
    row_->append(row.data(), n);
    written += static_cast<int64_t>(n);
    ids.clear(), slide.clear(), coords.clear(), tissue.clear(), shard.clear(), row.clear();
  }
};

IndexWriter::IndexWriter(const std::string& path)
    : impl_(new Impl{path, h5::File::open(path, h5::Mode::kCreateTruncate)}) {
  using namespace index_names;
  h5::DatasetOptions opts;
  opts.chunk = {kBlockRows};
  h5::DatasetOptions coord_opts;
  coord_opts.chunk = {kBlockRows, 2};
  h5::File& f = impl_->file;
  impl_->ids_.emplace(f.create_appendable(kPatchId, h5::Type::kInt64, {}, opts));
  impl_->slide_.emplace(f.create_appendable(kSlide, h5::Type::kInt32, {}, opts));
  impl_->coords_.emplace(f.create_appendable(kCoords, h5::Type::kInt64, {2}, coord_opts));
  impl_->tissue_.emplace(f.create_appendable(kTissue, h5::Type::kFloat32, {}, opts));
  impl_->shard_.emplace(f.create_appendable(kShard, h5::Type::kInt32, {}, opts));
  impl_->row_.emplace(f.create_appendable(kRow, h5::Type::kInt64, {}, opts));
}

IndexWriter::~IndexWriter() = default;
IndexWriter::IndexWriter(IndexWriter&&) noexcept = default;
IndexWriter& IndexWriter::operator=(IndexWriter&&) noexcept = default;

void IndexWriter::add(int64_t patch_id, int32_t slide, int64_t x, int64_t y, float tissue,
                      int32_t shard, int64_t row) {
  Impl& s = *impl_;
  s.ids.push_back(patch_id);
  s.slide.push_back(slide);
  s.coords.push_back(x);
  s.coords.push_back(y);
  s.tissue.push_back(tissue);
  s.shard.push_back(shard);
  s.row.push_back(row);
  if (s.ids.size() == kBlockRows) s.flush();
}

int64_t IndexWriter::rows() const {
  return impl_->written + static_cast<int64_t>(impl_->ids.size());
}

void IndexWriter::finish(const SlideTable& t, const IndexAttributes& a) {
  Impl& s = *impl_;
  s.flush();
  for (auto* d : {&s.ids_, &s.slide_, &s.coords_, &s.tissue_, &s.shard_, &s.row_}) (*d)->close();
  h5::File& file = s.file;
  file.set_attr("format_version", kIndexFormatVersion);
  file.set_attr("patch_size", static_cast<int64_t>(a.patch_size));
  file.set_attr("mpp", a.mpp);
  file.set_attr("encoding", a.encoding);
  file.set_attr("num_shards", static_cast<int64_t>(a.num_shards));
  file.set_attr("shard_pattern", std::string("shards/rank-%05d.h5"));
  file.set_attr("config_fingerprint", a.config_fingerprint);
  file.set_attr("part", static_cast<int64_t>(a.part));
  file.set_attr("parts", static_cast<int64_t>(a.parts));
  file.set_attr("overlap", a.overlap);
  h5::Group slides = file.create_group(index_names::kSlides);
  slides.write_strings("slide_id", t.slide_id);
  slides.write_strings("path", t.path);
  slides.write_strings("path_as_written", t.path_as_written);
  slides.write_strings("patient_id", t.patient_id);
  slides.write_vector("width", t.width);
  slides.write_vector("height", t.height);
  slides.write_vector("mpp_x", t.mpp_x);
  slides.write_vector("mpp_y", t.mpp_y);
  slides.write_strings("mpp_source", t.mpp_source);
  slides.write_strings("vendor", t.vendor);
  slides.write_vector("level", t.level);
  slides.write_vector("read_size", t.read_size);
  slides.write_vector("downsample", t.downsample);
  slides.write_vector("patch_count", t.patch_count);
  slides.write_strings("status", t.status);
  slides.write_strings("reason", t.reason);
  h5::Group meta = slides.create_group(index_names::kMetadata);
  for (size_t c = 0; c < t.metadata_columns.size(); ++c) {
    meta.write_strings(t.metadata_columns[c], t.metadata.at(c));
  }
  slides.write_strings(index_names::kMetadataColumns, t.metadata_columns);
  file.close();
}

}  // namespace tessera
