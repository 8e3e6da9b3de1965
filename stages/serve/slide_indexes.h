// The slide- and patient-level indexes (ingest --level slide|patient) serve answers similar-slide
// and similar-patient requests from, resident on rank 0 beside the patch index (they hold one
// vector per slide or patient: small). Which are served (--slide-index):
//   auto  (default) every sibling of the patch index (RUN/ingest/*) that holds a slide catalog
//         whose vectors were aggregated from the patch index's embed tag (catalog.json "tag" =
//         the cohort file's embed_tag); one that cannot be loaded is skipped with a warning;
//   none  no slide or patient search;
//   DIR[,DIR...]  these, each required to load (another embed tag is served with a warning).
// They are loaded once at start; a new generation of the patch index does not reload them.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/vector/catalog.h"
#include "common/search/slide_search.h"

namespace tessera::serve {

class SlideIndexes {
 public:
  SlideIndexes() = default;

  // Loads what `spec` names for the patch index `patch` (above). Throws InvalidInput for an
  // explicit DIR that holds no slide catalog, IoError for damaged files of an explicit DIR.
  static SlideIndexes load(const std::string& spec, const Catalog& patch);

  // Adds an index already loaded, served under `name`.
  void add(std::string name, std::shared_ptr<const search::SimilarIndex> index);

  // The index of `level` ("slide" or "patient") named `name` (its folder name), or the first of
  // that level (in name order) when `name` is empty; nullptr when there is none.
  std::shared_ptr<const search::SimilarIndex> find(const std::string& level,
                                                  const std::string& name) const;

  // For /api/v1/info: [{name, level, encoder, rows, dimension, index_spec, metric, embed_tag}].
  nlohmann::json describe() const;
  bool empty() const { return indexes_.empty(); }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<const search::SimilarIndex>>> indexes_;
};

}  // namespace tessera::serve
