// The per-slide files aggregate reads and writes (layouts in docs/formats.md):
//   reads   RUN/embed/<tag>/features/<slide_id>.h5       /features [n, D], /coords [n, 2] + attrs
//   writes  slide_features_<encoder>/<id>.h5             TRIDENT's slide feature file:
//           /features float32 [D'] (attrs name, savetodir), /coords int64 [n, 2] with the patch
//           file's coords attributes, as TRIDENT's WSI.extract_slide_features saves them
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera {

// TRIDENT's attributes of /coords (docs/formats.md, features/<slide_id>.h5).
struct CoordsAttributes {
  int64_t patch_size = 0;
  int64_t patch_size_level0 = 0;
  double level0_magnification = 0;
  double target_magnification = 0;
  int64_t overlap = 0;
  int64_t level0_width = 0;
  int64_t level0_height = 0;
  std::string name;
};

struct SlideFeatures {
  int64_t rows = 0;
  int dim = 0;
  std::vector<float> features;  // rows x dim
  std::vector<int64_t> coords;  // rows x 2, level-0 x, y
  CoordsAttributes attributes;
};

// Reads a per-slide feature file of embed. Throws IoError naming the file when it is missing,
// unreadable, damaged (checksums), or its datasets disagree in rows.
SlideFeatures read_slide_features(const std::string& path);

// Writes `path` (via path.tmp, renamed when complete): the TRIDENT slide feature file of `name`
// with `vector` as /features, `coords` (rows x 2) as /coords with `attributes` (name replaced
// by `name`), and `root` (string, integer or float values) as attributes of "/". Throws IoError.
void write_trident_slide_file(const std::string& path, const std::string& name,
                              const std::string& savetodir, const std::vector<float>& vector,
                              const std::vector<int64_t>& coords, const CoordsAttributes& attributes,
                              const nlohmann::json& root);

}  // namespace tessera
