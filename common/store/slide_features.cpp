#include "common/store/slide_features.h"

#include <filesystem>
#include <optional>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/store/embeddings.h"

namespace tessera {

namespace fs = std::filesystem;

void set_coords_attributes(h5::Dataset& c, const CoordsAttributes& a) {
  c.set_attr("patch_size", a.patch_size);
  c.set_attr("patch_size_level0", a.patch_size_level0);
  c.set_attr("level0_magnification", a.level0_magnification);
  c.set_attr("target_magnification", a.target_magnification);
  c.set_attr("overlap", a.overlap);
  c.set_attr("level0_width", a.level0_width);
  c.set_attr("level0_height", a.level0_height);
  c.set_attr("name", a.name);
}

struct SlideFeaturesWriter::Impl {
  std::string path;
  std::optional<h5::File> file;
  std::optional<h5::Dataset> features, coords;
};

SlideFeaturesWriter::SlideFeaturesWriter(const std::string& path, int dim,
                                         const SlideFeaturesHeader& h)
    : impl_(std::make_unique<Impl>()) {
  namespace names = embedding_names;
  Impl& s = *impl_;
  s.path = path;
  s.file.emplace(h5::File::open(path + ".tmp", h5::Mode::kCreateTruncate));
  const auto d = static_cast<hsize_t>(dim);
  h5::DatasetOptions fo;
  fo.chunk = {256, d};
  s.features.emplace(s.file->create_appendable(names::kFeatures, h5::Type::kFloat32, {d}, fo));
  h5::DatasetOptions co;
  co.chunk = {256, 2};
  s.coords.emplace(s.file->create_appendable(names::kCoords, h5::Type::kInt64, {2}, co));
  s.file->set_attr("slide_id", h.slide_id);
  s.file->set_attr("patch_size", h.patch_size);
  s.file->set_attr("patch_level", h.patch_level);
  s.file->set_attr("read_size", h.read_size);
  s.file->set_attr("mpp", h.mpp);
  s.file->set_attr("downsample", h.downsample);
  s.file->set_attr("model_fingerprint", h.model_fingerprint);
  s.features->set_attr("encoder", h.encoder);
  s.features->set_attr("name", h.slide_id);
  set_coords_attributes(*s.coords, h.coords);
}

SlideFeaturesWriter::~SlideFeaturesWriter() = default;
SlideFeaturesWriter::SlideFeaturesWriter(SlideFeaturesWriter&&) noexcept = default;
SlideFeaturesWriter& SlideFeaturesWriter::operator=(SlideFeaturesWriter&&) noexcept = default;

void SlideFeaturesWriter::append(const float* features, const int64_t* coords, int64_t n) {
  Impl& s = *impl_;
  s.features->append(features, static_cast<hsize_t>(n));
  s.coords->append(coords, static_cast<hsize_t>(n));
}

void SlideFeaturesWriter::commit() {
  Impl& s = *impl_;
  s.features->close();
  s.coords->close();
  s.file->close();
  s.file.reset();
  commit_file(s.path + ".tmp", s.path);
}

SlideFeatures read_slide_features(const std::string& path) {
  namespace names = embedding_names;
  SlideFeatures s;
  h5::File file = h5::File::open(path, h5::Mode::kRead);
  h5::Dataset features = file.open_dataset(names::kFeatures);
  h5::Dataset coords = file.open_dataset(names::kCoords);
  const auto fdims = features.dims();
  const auto cdims = coords.dims();
  if (fdims.size() != 2 || cdims.size() != 2 || cdims[1] != 2 || fdims[0] != cdims[0]) {
    fail<IoError>("'{}' is not a slide feature file: /features and /coords must be [n, D] and "
                  "[n, 2]",
                  path);
  }
  s.rows = static_cast<int64_t>(fdims[0]);
  s.dim = static_cast<int>(fdims[1]);
  s.features = features.read_all<float>();
  s.coords = coords.read_all<int64_t>();
  CoordsAttributes& a = s.attributes;
  a.patch_size = coords.attr_int("patch_size");
  a.patch_size_level0 = coords.attr_int("patch_size_level0");
  a.level0_magnification = coords.attr_double("level0_magnification");
  a.target_magnification = coords.attr_double("target_magnification");
  a.overlap = coords.attr_int("overlap");
  a.level0_width = coords.attr_int("level0_width");
  a.level0_height = coords.attr_int("level0_height");
  a.name = coords.attr_string("name");
  return s;
}

void write_trident_slide_file(const std::string& path, const std::string& name,
                              const std::string& savetodir, const std::vector<float>& vector,
                              const std::vector<int64_t>& coords, const CoordsAttributes& attributes,
                              const nlohmann::json& root) {
  namespace names = embedding_names;
  const std::string temp = path + ".tmp";
  {
    h5::File file = h5::File::open(temp, h5::Mode::kCreateTruncate);
    h5::Dataset f = file.write_dataset(names::kFeatures, h5::Type::kFloat32,
                                       {static_cast<hsize_t>(vector.size())}, vector.data());
    f.set_attr("name", name);
    f.set_attr("savetodir", savetodir);
    const hsize_t rows = coords.size() / 2;
    h5::DatasetOptions chunked;
    chunked.chunk = {std::max<hsize_t>(1, std::min<hsize_t>(rows, 4096)), 2};
    h5::Dataset c = rows == 0 ? file.write_dataset(names::kCoords, h5::Type::kInt64, {0, 2},
                                                   coords.data())
                              : file.write_dataset(names::kCoords, h5::Type::kInt64, {rows, 2},
                                                   coords.data(), chunked);
    CoordsAttributes named = attributes;
    named.name = name;
    set_coords_attributes(c, named);
    for (const auto& [key, value] : root.items()) {
      if (value.is_string()) {
        file.set_attr(key, value.get<std::string>());
      } else if (value.is_number_integer()) {
        file.set_attr(key, value.get<int64_t>());
      } else if (value.is_number()) {
        file.set_attr(key, value.get<double>());
      } else {
        file.set_attr(key, value.dump());
      }
    }
    f.close();
    c.close();
    file.close();
  }
  std::error_code ec;
  fs::rename(temp, path, ec);
  if (ec) fail<IoError>("cannot rename '{}' to '{}': {}", temp, path, ec.message());
}

}  // namespace tessera
