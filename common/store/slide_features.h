// The per-slide feature files (layouts in docs/formats.md):
//   RUN/embed/<tag>/features/<slide_id>.h5   written by embed (SlideFeaturesWriter), read by
//           aggregate and query (read_slide_features); paths: slide_features_path (embeddings.h)
//           /features [n, D], /coords [n, 2] + attrs
//   slide_features_<encoder>/<id>.h5         written by aggregate: TRIDENT's slide feature file:
//           /features float32 [D'] (attrs name, savetodir), /coords int64 [n, 2] with the patch
//           file's coords attributes, as TRIDENT's WSI.extract_slide_features saves them
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::h5 {
class Dataset;
}

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

// Sets TRIDENT's attributes on a /coords dataset (`name` from attributes.name), in the order
// docs/formats.md lists them. Throws IoError naming the dataset.
void set_coords_attributes(h5::Dataset& coords, const CoordsAttributes& attributes);

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

// What embed records about a slide in its features file, besides the rows.
struct SlideFeaturesHeader {
  std::string slide_id;
  int64_t patch_size = 0;   // S, target pixels per side
  int64_t patch_level = 0;  // pyramid level read
  int64_t read_size = 0;    // pixels per side read at patch_level
  double mpp = 0;           // target mpp
  double downsample = 0;    // level-0 pixels per pixel read
  std::string model_fingerprint;  // JSON text
  std::string encoder;            // attribute `encoder` of /features
  CoordsAttributes coords;        // TRIDENT's attributes of /coords
};

// Writes embed's features/<slide_id>.h5 at `path`: under path.tmp while rows are appended,
// renamed into place by commit(). /features float32 [n, dim] and /coords int64 [n, 2], chunked
// by 256 rows. Not thread-safe; move-only. Throws IoError naming the file.
class SlideFeaturesWriter {
 public:
  SlideFeaturesWriter(const std::string& path, int dim, const SlideFeaturesHeader& header);
  ~SlideFeaturesWriter();
  SlideFeaturesWriter(SlideFeaturesWriter&&) noexcept;
  SlideFeaturesWriter& operator=(SlideFeaturesWriter&&) noexcept;
  // Appends n rows: `features` n x dim values, `coords` 2n values (x, y).
  void append(const float* features, const int64_t* coords, int64_t n);
  // Closes the file and renames it to `path`.
  void commit();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Writes `path` (via path.tmp, renamed when complete): the TRIDENT slide feature file of `name`
// with `vector` as /features, `coords` (rows x 2) as /coords with `attributes` (name replaced
// by `name`), and `root` (string, integer or float values) as attributes of "/". Throws IoError.
void write_trident_slide_file(const std::string& path, const std::string& name,
                              const std::string& savetodir, const std::vector<float>& vector,
                              const std::vector<int64_t>& coords, const CoordsAttributes& attributes,
                              const nlohmann::json& root);

}  // namespace tessera
