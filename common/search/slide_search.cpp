#include "common/search/slide_search.h"

#include <algorithm>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/skeleton.h"
#include "common/vector/vector_index.h"
#include "common/store/slide_vectors.h"
#include "common/store/embeddings.h"
#include "common/store/slide_features.h"

namespace tessera::search {

namespace {

// Rows as a list of JSON objects, the first `numeric` cells as numbers.
nlohmann::json json_rows(const std::vector<std::string>& columns,
                         const std::vector<std::vector<std::string>>& rows, size_t numeric) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& row : rows) {
    nlohmann::json o = nlohmann::json::object();
    for (size_t c = 0; c < columns.size(); ++c) {
      o[columns[c]] = c < numeric ? nlohmann::json::parse(row[c]) : nlohmann::json(row[c]);
    }
    list.push_back(std::move(o));
  }
  return list;
}

class ExcludeRows final : public IdFilter {
 public:
  explicit ExcludeRows(std::vector<uint8_t> excluded) : excluded_(std::move(excluded)) {}
  bool allows(int64_t id) const override {
    return id >= 0 && id < static_cast<int64_t>(excluded_.size()) && !excluded_[id];
  }

 private:
  std::vector<uint8_t> excluded_;
};

}  // namespace

SimilarIndex::SimilarIndex(const std::string& dir)
    : catalog_(load_slide_catalog(dir)),
      entries_(read_cohort_vectors(catalog_.path(catalog_.entries_file))),
      index_(std::make_unique<VectorIndex>(
          VectorIndex::read(catalog_.path(catalog_.index_file), false))) {
  if (index_->dim() != entries_.dim || index_->size() != static_cast<int64_t>(entries_.size())) {
    fail<IoError>("'{}' does not match '{}' (dimension or rows): rerun ingest",
                  catalog_.path(catalog_.index_file), catalog_.path(catalog_.entries_file));
  }
}

SimilarIndex::~SimilarIndex() = default;

int64_t SimilarIndex::row(const std::string& id, std::string* why) const {
  const int64_t r = entries_.find(id);
  if (r >= 0) return r;
  for (size_t s = 0; s < entries_.skipped_ids.size(); ++s) {
    if (entries_.skipped_ids[s] == id) {
      *why = fmt::format("{} '{}' has no vector in '{}': {}", level(), id, catalog_.dir,
                         entries_.skipped_reasons[s]);
      return -1;
    }
  }
  *why = fmt::format("unknown {} '{}': '{}' has no such id", level(), id, catalog_.dir);
  return -1;
}

SimilarHits SimilarIndex::search(int64_t row, int k_asked, bool exclude_same_patient) const {
  TESSERA_CHECK(row >= 0 && row < static_cast<int64_t>(entries_.size()),
                "row {} of '{}' out of range", row, catalog_.dir);
  std::vector<uint8_t> excluded(entries_.size(), 0);
  excluded[row] = 1;
  const std::string& patient = entries_.patient_id[row];
  if (exclude_same_patient && !patient.empty()) {
    for (size_t i = 0; i < entries_.size(); ++i) excluded[i] |= entries_.patient_id[i] == patient;
  }
  const ExcludeRows filter(excluded);
  SimilarHits out;
  out.row = row;
  out.allowed = static_cast<int64_t>(std::count(excluded.begin(), excluded.end(), 0));
  const int k = static_cast<int>(std::min<int64_t>(k_asked, out.allowed));
  std::vector<float> scores(static_cast<size_t>(std::max(k, 1)));
  std::vector<int64_t> ids(static_cast<size_t>(std::max(k, 1)), -1);
  if (k > 0) {
    SearchOptions options;
    options.k = k;
    options.filter = &filter;
    std::lock_guard<std::mutex> lock(search_mutex_);
    index_->search(entries_.features.data() + row * entries_.dim, 1, options, scores.data(),
                   ids.data());
  }
  out.columns = {"rank", "score", level() + "_id", "patient_id", "n_patches", "slides"};
  for (const auto& c : entries_.label_columns) out.columns.push_back(c);
  for (int r = 0; r < k; ++r) {
    if (ids[r] < 0) break;
    const auto i = static_cast<size_t>(ids[r]);
    std::vector<std::string> cells = {std::to_string(r + 1), fmt::format("{:.6g}", scores[r]),
                                      entries_.ids[i], entries_.patient_id[i],
                                      std::to_string(entries_.n_patches[i]), entries_.slides[i]};
    for (const auto& values : entries_.labels) cells.push_back(values[i]);
    out.rows.push_back(std::move(cells));
  }
  return out;
}

nlohmann::json SimilarIndex::report_json(const SimilarHits& hits, int k,
                                         bool exclude_same_patient) const {
  nlohmann::json labels = nlohmann::json::object();
  for (size_t c = 0; c < entries_.label_columns.size(); ++c) {
    labels[entries_.label_columns[c]] = entries_.labels[c][hits.row];
  }
  return {{"query",
           {{"level", level()},
            {"id", entries_.ids[hits.row]},
            {"patient_id", entries_.patient_id[hits.row]},
            {"labels", labels}}},
          {"search",
           {{"index", catalog_.index_spec},
            {"metric", catalog_.metric},
            {"normalize", catalog_.normalize},
            {"encoder", catalog_.encoder},
            {"rows", entries_.size()},
            {"k", k},
            {"exclude_same_patient", exclude_same_patient}}},
          {"hits", json_rows(hits.columns, hits.rows, 2)}};
}

SlideFeatures read_mosaic_features(const Catalog& catalog, const std::string& slide_id,
                                   VerifyLevel verify) {
  for (const auto& source : catalog.sources) {
    const std::string path = catalog.path(slide_features_path(source.embed_dir, slide_id));
    if (!path_exists(path)) continue;
    // Checked against embed's _SUCCESS first: HDF5's Fletcher32 alone can be fooled.
    const std::string why = finish_output_problem(catalog.path(source.embed_dir),
                                                  slide_features_file(slide_id), verify);
    if (!why.empty()) {
      fail<IoError>("the features of slide '{}' are damaged: {}; rerun embed with --verify full",
                    slide_id, why);
    }
    SlideFeatures f = read_slide_features(path);
    if (f.rows == 0) fail<InvalidInput>("slide '{}' has no patches: no mosaic to search", slide_id);
    if (f.dim != catalog.dim) {
      fail<IoError>("'{}' holds features of dimension {}, the index {}", path, f.dim, catalog.dim);
    }
    return f;
  }
  fail<InvalidInput>("slide '{}' has no per-slide feature file in the embed outputs of '{}' (not "
                     "ingested, or without patches)",
                     slide_id, catalog.dir);
}

SlideMosaic pick_slide_mosaic(const SlideFeatures& f, const MosaicRule& rule) {
  SlideMosaic m;
  for (const int64_t r : pick_mosaic(f.features, f.rows, f.dim, rule)) {
    m.patches.push_back({-1, f.coords[2 * r], f.coords[2 * r + 1]});
    m.vectors.insert(m.vectors.end(), f.features.begin() + r * f.dim,
                     f.features.begin() + (r + 1) * f.dim);
  }
  return m;
}

SlideMosaic slide_mosaic(const Catalog& catalog, const std::string& slide_id,
                         const MosaicRule& rule, VerifyLevel verify) {
  return pick_slide_mosaic(read_mosaic_features(catalog, slide_id, verify), rule);
}

VoteTables vote_tables(const std::vector<Vote>& slides_ranked,
                       const std::vector<Vote>& patients_ranked, const VectorSlideTable& table,
                       int k) {
  VoteTables t;
  t.slide_columns = {"rank", "votes", "best_score", "slide_id", "patient_id"};
  for (const auto& m : table.metadata) t.slide_columns.push_back(m.name);
  for (size_t r = 0; r < slides_ranked.size() && static_cast<int>(r) < k; ++r) {
    const Vote& v = slides_ranked[r];
    std::vector<std::string> cells = {std::to_string(r + 1), std::to_string(v.votes),
                                      fmt::format("{:.6g}", v.best_score), v.id, v.patient_id};
    for (const auto& m : table.metadata) cells.push_back(m.text(v.slide));
    t.slide_rows.push_back(std::move(cells));
  }
  t.patient_columns = {"rank", "votes", "best_score", "patient_id"};
  for (size_t r = 0; r < patients_ranked.size() && static_cast<int>(r) < k; ++r) {
    const Vote& v = patients_ranked[r];
    t.patient_rows.push_back({std::to_string(r + 1), std::to_string(v.votes),
                              fmt::format("{:.6g}", v.best_score), v.id});
  }
  return t;
}

nlohmann::json vote_report_json(const std::string& slide, const std::vector<MosaicPatch>& mosaic,
                                const std::vector<Vote>& slides_ranked,
                                const std::vector<Vote>& patients_ranked,
                                const VectorSlideTable& table, int k,
                                const nlohmann::json& search) {
  const VoteTables t = vote_tables(slides_ranked, patients_ranked, table, k);
  nlohmann::json patches = nlohmann::json::array();
  for (const auto& p : mosaic) {
    patches.push_back({{"patch_id", p.patch_id}, {"x", p.x}, {"y", p.y}});
  }
  return {{"query", {{"slide_id", slide}, {"mosaic", patches}}},
          {"search", search},
          {"slides", json_rows(t.slide_columns, t.slide_rows, 3)},
          {"patients", json_rows(t.patient_columns, t.patient_rows, 3)}};
}

}  // namespace tessera::search
