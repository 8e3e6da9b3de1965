// Rank 0's view of one generation of the index for the HTTP threads: the catalog, the slide
// table, each slide's patch count, the stored patches (search::PatchLookup) and the slides opened
// for DeepZoom. Slides and patches are found only through the catalog: an id from a request is a
// key into the slide table, never a path. Thread-safe (the patch lookup is serialised; slides are
// read concurrently).
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/slide/png_io.h"
#include "common/store/slide_features.h"
#include "common/store/vector_meta.h"
#include "common/vector/catalog.h"
#include "common/search/filter.h"
#include "common/search/lookup.h"

namespace tessera {
class Slide;
}

namespace tessera::serve {

class GenerationView {
 public:
  // `generation` numbers the loads of this service (0 first, +1 per reload).
  GenerationView(Catalog catalog, VectorSlideTable slides, int64_t rows, int generation);
  ~GenerationView();
  GenerationView(const GenerationView&) = delete;
  GenerationView& operator=(const GenerationView&) = delete;

  const Catalog& catalog() const { return catalog_; }
  const VectorSlideTable& slides() const { return slides_; }
  const std::vector<search::ColumnSchema>& columns() const { return columns_; }
  int64_t rows() const { return rows_; }
  int generation() const { return generation_; }
  // Ingested patches of slide s (0 when none of its parts was ingested).
  int64_t patch_count(int32_t slide) const { return patch_counts_.at(slide); }
  // Level-0 pixels per patch side on slide s.
  double footprint(int32_t slide) const {
    return catalog_.patch_size * slides_.downsample.at(slide);
  }
  // The slide index of `slide_id`, nullopt when the catalog has no such slide.
  std::optional<int32_t> slide_index(const std::string& slide_id) const;

  // search::PatchLookup's answers, serialised.
  std::optional<search::StoredPatch> find(int64_t patch_id) const;
  search::StoredPatch nearest(int32_t slide, int64_t x, int64_t y) const;
  std::vector<float> embedding(const search::StoredPatch& patch) const;
  Image8 pixels(const search::StoredPatch& patch, std::string* why) const;
  search::SlidePatches slide_patches(int32_t slide) const;
  // The stored features of a slide for its mosaic (search::read_mosaic_features), serialised with
  // the lookup's reads (HDF5).
  SlideFeatures mosaic_features(const std::string& slide_id) const;

  // Slide s opened (direct tile reader where it can, else OpenSlide), kept among the
  // kOpenSlides most recently used. Throws IoError naming the file.
  std::shared_ptr<const Slide> slide(int32_t s) const;
  static constexpr size_t kOpenSlides = 16;
  static constexpr size_t kSlideTileCacheBytes = size_t{32} << 20;

 private:
  Catalog catalog_;
  VectorSlideTable slides_;
  std::vector<search::ColumnSchema> columns_;
  int64_t rows_;
  int generation_;
  std::vector<int64_t> patch_counts_;
  std::unordered_map<std::string, int32_t> by_id_;
  mutable std::mutex lookup_mutex_;
  std::unique_ptr<search::PatchLookup> lookup_;
  mutable std::mutex slides_mutex_;
  mutable std::list<std::pair<int32_t, std::shared_ptr<const Slide>>> open_;  // most recent first
};

}  // namespace tessera::serve
