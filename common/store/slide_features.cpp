#include "common/store/slide_features.h"

#include <filesystem>

#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/store/embeddings.h"

namespace tessera {

namespace fs = std::filesystem;

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
    c.set_attr("patch_size", attributes.patch_size);
    c.set_attr("patch_size_level0", attributes.patch_size_level0);
    c.set_attr("level0_magnification", attributes.level0_magnification);
    c.set_attr("target_magnification", attributes.target_magnification);
    c.set_attr("overlap", attributes.overlap);
    c.set_attr("level0_width", attributes.level0_width);
    c.set_attr("level0_height", attributes.level0_height);
    c.set_attr("name", name);
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
