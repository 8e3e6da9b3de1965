#include "stages/serve/generation_view.h"

#include "common/core/error.h"
#include "common/slide/slide.h"
#include "common/store/index.h"
#include "common/search/shard_set.h"
#include "common/search/slide_search.h"

namespace tessera::serve {

GenerationView::GenerationView(Catalog catalog, VectorSlideTable slides, int64_t rows,
                               int generation)
    : catalog_(std::move(catalog)),
      slides_(std::move(slides)),
      columns_(search::filter_columns(slides_)),
      rows_(rows),
      generation_(generation),
      patch_counts_(slides_.size(), 0) {
  for (size_t s = 0; s < slides_.size(); ++s) by_id_.emplace(slides_.slide_id[s], static_cast<int32_t>(s));
  for (const CatalogSource& source : catalog_.sources) {
    const IndexInfo info = load_index_info(catalog_.path(source.patchgen_dir));
    for (size_t s = 0; s < info.slides.size() && s < slides_.size(); ++s) {
      if (info.slides.status[s] == "ok") patch_counts_[s] += info.slides.patch_count[s];
    }
  }
  lookup_ = std::make_unique<search::PatchLookup>(catalog_);
}

GenerationView::~GenerationView() = default;

std::optional<int32_t> GenerationView::slide_index(const std::string& slide_id) const {
  const auto it = by_id_.find(slide_id);
  if (it == by_id_.end()) return std::nullopt;
  return it->second;
}

std::optional<search::StoredPatch> GenerationView::find(int64_t patch_id) const {
  std::lock_guard<std::mutex> lock(lookup_mutex_);
  return lookup_->find(patch_id);
}

search::StoredPatch GenerationView::nearest(int32_t slide, int64_t x, int64_t y) const {
  std::lock_guard<std::mutex> lock(lookup_mutex_);
  return lookup_->nearest(slide, x, y);
}

std::vector<float> GenerationView::embedding(const search::StoredPatch& patch) const {
  std::lock_guard<std::mutex> lock(lookup_mutex_);
  return lookup_->embedding(patch);
}

Image8 GenerationView::pixels(const search::StoredPatch& patch, std::string* why) const {
  std::lock_guard<std::mutex> lock(lookup_mutex_);
  return lookup_->pixels(patch, why);
}

search::SlidePatches GenerationView::slide_patches(int32_t slide) const {
  std::lock_guard<std::mutex> lock(lookup_mutex_);
  return lookup_->slide_patches(slide);
}

SlideFeatures GenerationView::mosaic_features(const std::string& slide_id) const {
  std::lock_guard<std::mutex> lock(lookup_mutex_);
  return search::read_mosaic_features(catalog_, slide_id);
}

std::shared_ptr<const Slide> GenerationView::slide(int32_t s) const {
  {
    std::lock_guard<std::mutex> lock(slides_mutex_);
    for (auto it = open_.begin(); it != open_.end(); ++it) {
      if (it->first == s) {
        open_.splice(open_.begin(), open_, it);
        return it->second;
      }
    }
  }
  // Opened outside the lock: opening reads the file's directories.
  auto opened = std::make_shared<const Slide>(
      Slide::open(slides_.path.at(s), SlideReader::kAuto, kSlideTileCacheBytes));
  std::lock_guard<std::mutex> lock(slides_mutex_);
  open_.emplace_front(s, opened);
  if (open_.size() > kOpenSlides) open_.pop_back();
  return opened;
}

}  // namespace tessera::serve
