// Whole-slide and whole-patient search, as query (--similar-slide, --similar-patient,
// --mosaic-vote: stages/query/similar.h) and serve run it: the index ingest --level slide|patient
// builds (nearest vectors, exact with Flat), a slide's mosaic from its stored features, and the
// mosaic vote's report from the hits of the mosaic's patches (votes.h).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/store/slide_features.h"
#include "common/store/slide_vectors.h"
#include "common/store/vector_meta.h"
#include "common/vector/catalog.h"
#include "common/vector/slide_catalog.h"
#include "common/search/votes.h"
#include "common/stage/stage_options.h"

namespace tessera {
class VectorIndex;
}

namespace tessera::search {

// The nearest rows of one row of a SimilarIndex, as cells of the report's columns.
struct SimilarHits {
  int64_t row = -1;                             // the query's row
  int64_t allowed = 0;                          // rows searched (all but the left-out ones)
  std::vector<std::string> columns;             // rank, score, <level>_id, patient_id, n_patches,
                                                // slides, then the label columns
  std::vector<std::vector<std::string>> rows;   // best first, at most k
};

// A slide- or patient-level index (ingest --level slide|patient) loaded and checked against its
// entries: what --similar-slide and --similar-patient search, and what serve keeps resident.
class SimilarIndex {
 public:
  // Loads DIR/slide_catalog.json, its entries and its FAISS index. Throws InvalidInput when DIR
  // holds no slide catalog, IoError for damaged files or an index that does not match its entries.
  explicit SimilarIndex(const std::string& dir);
  ~SimilarIndex();
  SimilarIndex(const SimilarIndex&) = delete;
  SimilarIndex& operator=(const SimilarIndex&) = delete;

  const SlideCatalog& catalog() const { return catalog_; }
  const CohortVectors& entries() const { return entries_; }
  const std::string& level() const { return catalog_.level; }

  // The row of `id`, or -1 and `why`: the id is unknown, or the aggregate skipped it (its reason).
  int64_t row(const std::string& id, std::string* why) const;

  // The nearest k rows of row `row` (0 <= row < entries().size()), leaving out itself and, with
  // `exclude_same_patient`, every row of its patient. Thread-safe.
  SimilarHits search(int64_t row, int k, bool exclude_same_patient) const;

  // The report query --format json writes for `hits` (asked with `k`, `exclude_same_patient`):
  // {"query": {level, id, patient_id, labels}, "search": {...}, "hits": [...]}.
  nlohmann::json report_json(const SimilarHits& hits, int k, bool exclude_same_patient) const;

 private:
  SlideCatalog catalog_;
  CohortVectors entries_;
  std::unique_ptr<VectorIndex> index_;
  mutable std::mutex search_mutex_;
};

// One mosaic patch of the query slide, for the report.
struct MosaicPatch {
  int64_t patch_id = -1;
  int64_t x = 0, y = 0;
};

// The mosaic of slide `slide_id` (votes.h, pick_mosaic under `rule`): its patches' stored features,
// read from the per-slide feature file of whichever embed part of `catalog` holds the slide.
// Throws InvalidInput when no ingested part has the slide's features or it has no patches,
// IoError when the feature file fails its check in embed's _SUCCESS at `verify`.
struct SlideMosaic {
  std::vector<MosaicPatch> patches;
  std::vector<float> vectors;  // patches.size() x dim
};
SlideMosaic slide_mosaic(const Catalog& catalog, const std::string& slide_id,
                         const MosaicRule& rule, VerifyLevel verify = VerifyLevel::kFull);

// The two halves of slide_mosaic: reading the slide's stored features (HDF5: callers that share
// the library between threads serialise this), and picking the mosaic from them (pure).
SlideFeatures read_mosaic_features(const Catalog& catalog, const std::string& slide_id,
                                   VerifyLevel verify = VerifyLevel::kFull);
SlideMosaic pick_slide_mosaic(const SlideFeatures& features, const MosaicRule& rule);

// The mosaic-vote report as JSON (what query --format json writes): {"query": {slide_id, mosaic},
// "search": search, "slides": [...], "patients": [...]}, at most k of each.
nlohmann::json vote_report_json(const std::string& slide, const std::vector<MosaicPatch>& mosaic,
                                const std::vector<Vote>& slides_ranked,
                                const std::vector<Vote>& patients_ranked,
                                const VectorSlideTable& table, int k,
                                const nlohmann::json& search);

// The mosaic vote's rankings as cells: the slides ranked by votes (at most k, with the
// manifest's metadata columns: rank, votes, best_score, slide_id, patient_id, ...) and the
// patients ranked by votes (at most k: rank, votes, best_score, patient_id).
struct VoteTables {
  std::vector<std::string> slide_columns, patient_columns;
  std::vector<std::vector<std::string>> slide_rows, patient_rows;
};
VoteTables vote_tables(const std::vector<Vote>& slides_ranked,
                       const std::vector<Vote>& patients_ranked, const VectorSlideTable& table,
                       int k);

}  // namespace tessera::search
