// A labelled synthetic cohort: patients with one or more slides, each patient with a diagnosis
// (one of the tissue classes), each slide a mix of regions of classes dominated by its patient's
// diagnosis, with its class mask. Used by the demo, the retrieval benchmark and tests, where the
// classes are the labels that search results are judged by.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::synth {

struct CohortSpec {
  std::string dir;                // output directory: slides/, manifest.csv, truth.csv
  int slides = 12;                // >= patients; the first `patients` slides go one per patient
  int patients = 6;               // >= 1
  int64_t width = 2400;           // level-0 size of every slide
  int64_t height = 1800;
  uint64_t seed = 1;
  double mpp = 0.5;
  double tissue_fraction = 0.6;
  int regions = 6;                // regions per slide, 1..64
  int dominant = 5;               // of which of the diagnosis class, 1..regions
  int stain_jitter = 8;           // per-patient RGB stain offset in [-j, j], 0..64
  int mask_downsample = 32;
  int threads = 1;                // slides written concurrently
};

struct CohortSlide {
  std::string slide_id;    // S0001, ...
  std::string patient_id;  // P001, ...
  int diagnosis = 0;       // class 1..4 (the patient's)
  std::vector<int> region_classes;
  std::array<int, 3> stain{};
  uint64_t seed = 0;
  std::string path;        // relative to the cohort directory: slides/<id>.tif
  std::string class_mask;  // slides/<id>.classes.png
};

// The cohort `spec` describes, without writing anything: pure and deterministic. Patient p
// (0-based) has diagnosis class 1 + (p + seed) mod 4, so diagnoses are balanced; slide s < patients
// belongs to patient s, each further slide to a patient drawn from the seed. A slide's regions are
// `dominant` of its diagnosis and the rest of other classes drawn from the seed. Throws
// InvalidInput naming the field for values out of range.
std::vector<CohortSlide> plan_cohort(const CohortSpec& spec);

// Writes every slide of plan_cohort(spec) with its class mask under spec.dir/slides/, then
// spec.dir/manifest.csv (slide_id,path,patient_id,diagnosis: a tessera manifest whose diagnosis
// column is the label) and spec.dir/truth.csv (slide_id,patient_id,diagnosis,class_mask,
// mask_downsample,tumour,stroma,fat,necrosis: the ground truth, with each class's share of the
// slide's tissue). Throws InvalidInput for
// an invalid spec, IoError naming the file on write failures. Files are rewritten on every call.
std::vector<CohortSlide> write_cohort(const CohortSpec& spec);

}  // namespace tessera::synth
