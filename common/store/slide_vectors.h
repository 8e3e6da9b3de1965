// The cohort file of an aggregate output: RUN/slides/<name>/slides.h5 (slide level) or
// patients.h5 (patient level), one row per slide or patient that has a vector, loadable in one
// line for scikit-learn:
//
//   f = h5py.File("slides.h5"); X, y = f["features"][:], f["labels/diagnosis"].asstr()[:]
//
// Layout (docs/formats.md):
//   /features          float32 [N, D]        row i is ids[i]'s vector
//   /ids               string [N]            slide ids (patient ids at patient level)
//   /patient_id        string [N]            the slide's patient_id ("" when none)
//   /slides            string [N]            the slides pooled, "|"-separated
//   /n_patches         int64 [N]
//   /labels/<column>   string [N]            each metadata column of the manifest (at patient
//                                            level its distinct values over the patient's
//                                            slides, "|"-separated)
//   /skipped/ids, /skipped/reason  string [M]  items without a vector and why
//   attributes on /: format_version, level, encoder, patch_encoder, method, output_dim,
//   embed_tag, label_columns (JSON list)
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera {

inline constexpr int64_t kCohortFileFormatVersion = 1;
inline constexpr const char* kSlideCohortFile = "slides.h5";      // slide level
inline constexpr const char* kPatientCohortFile = "patients.h5";  // patient level

// Dataset and group names of the cohort file and of aggregate's rank vector files.
namespace slide_vector_names {
inline constexpr const char* kFeatures = "features";    // float32 [N, D]
inline constexpr const char* kIds = "ids";              // string [N]
inline constexpr const char* kPatientId = "patient_id"; // string [N]
inline constexpr const char* kSlides = "slides";        // string [N]
inline constexpr const char* kNPatches = "n_patches";   // int64 [N]
inline constexpr const char* kLabels = "labels";        // group: string [N] per column
inline constexpr const char* kSkipped = "skipped";      // group: ids, reason
inline constexpr const char* kReason = "reason";        // string [M]
inline constexpr const char* kItem = "item";            // rank files: int64 [m]
inline constexpr const char* kVectors = "vectors";      // rank files: float32 [m, D]
}  // namespace slide_vector_names

struct CohortVectors {
  std::string level;          // "slide" or "patient"
  std::string encoder;        // slide encoder name (slide_features_<encoder>)
  std::string patch_encoder;  // TRIDENT name of the patch encoder
  std::string method;         // pooling name or "torchscript"
  std::string embed_tag;
  int dim = 0;
  std::vector<std::string> ids, patient_id, slides;
  std::vector<int64_t> n_patches;
  std::vector<float> features;  // ids.size() x dim
  std::vector<std::string> label_columns;
  std::vector<std::vector<std::string>> labels;  // [column][row]
  std::vector<std::string> skipped_ids, skipped_reasons;
  size_t size() const { return ids.size(); }
  // The row of `id`, or -1.
  int64_t find(const std::string& id) const;
  // The values of label column `column`, or empty when there is no such column.
  const std::vector<std::string>* label(const std::string& column) const;
};

// The cohort file name of a level: "slides.h5" or "patients.h5".
std::string cohort_file_name(const std::string& level);

// Writes `path` via path.tmp and rename. Throws IoError naming the file.
void write_cohort_vectors(const std::string& path, const CohortVectors& cohort);

// Reads a cohort file. Throws IoError naming the file when it is unreadable, of another format
// version, or inconsistent.
CohortVectors read_cohort_vectors(const std::string& path);

// aggregate's rank vector file (vectors/rank-NNNNN.h5): the rank's item numbers, patches pooled
// and vectors (rows x dim). write_rank_vectors writes `path` directly (a staging path); both
// throw IoError naming the file.
struct RankVectors {
  std::vector<int64_t> items, n_patches;
  std::vector<float> vectors;
  int dim = 0;
};
void write_rank_vectors(const std::string& path, const RankVectors& v);
RankVectors read_rank_vectors(const std::string& path);

}  // namespace tessera
