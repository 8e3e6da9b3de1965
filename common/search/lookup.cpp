#include "common/search/lookup.h"

#include <algorithm>
#include <limits>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/slide/slide.h"
#include "common/stage/skeleton.h"
#include "common/store/embeddings.h"
#include "common/store/files.h"
#include "common/store/index.h"
#include "common/store/store.h"

namespace tessera::search {

struct PatchLookup::Impl {
  const Catalog* catalog = nullptr;
  VerifyLevel verify = VerifyLevel::kFull;
  mutable std::vector<std::optional<IndexInfo>> infos;
  mutable std::vector<uint8_t> embed_checked;

  // Throws IoError naming the damaged file when `source`'s embed output fails its check.
  void check_embed(size_t source) const {
    if (embed_checked[source]) return;
    const std::string dir = catalog->path(catalog->sources[source].embed_dir);
    const std::string why = rank_outputs_problem(dir, verify, kEmbeddingsFile);
    if (!why.empty()) {
      fail<IoError>("the stored embeddings of '{}' are damaged: {}; rerun embed with --verify full "
                    "to redo what is damaged",
                    dir, why);
    }
    embed_checked[source] = 1;
  }

  // The patch index of `source`, read once its index.h5 passes its check in patchgen's _SUCCESS
  // at `verify`: its slide table places every point query (a changed downsample answered for
  // another place with exit 0).
  const IndexInfo& info(size_t source) const {
    if (!infos[source]) {
      const std::string dir = catalog->path(catalog->sources[source].patchgen_dir);
      const std::string why = finish_output_problem(dir, kIndexFile, verify);
      if (!why.empty()) {
        fail<IoError>("the patch index of '{}' is damaged: {}; rerun patchgen with --verify full",
                      dir, why);
      }
      infos[source] = load_index_info(dir);
    }
    return *infos[source];
  }
  // Rows of `slide` in `source`'s index, or {0, 0}.
  std::pair<int64_t, int64_t> rows_of(size_t source, int32_t slide) const {
    const IndexInfo& i = info(source);
    if (slide < 0 || static_cast<size_t>(slide) >= i.slides.size() ||
        i.slides.status[slide] != "ok") {
      return {0, 0};
    }
    return {i.slide_offset[slide], i.slides.patch_count[slide]};
  }
};

PatchLookup::PatchLookup(const Catalog& catalog, VerifyLevel verify)
    : impl_(std::make_unique<Impl>()) {
  impl_->catalog = &catalog;
  impl_->verify = verify;
  impl_->infos.resize(catalog.sources.size());
  impl_->embed_checked.assign(catalog.sources.size(), 0);
}

PatchLookup::~PatchLookup() = default;
PatchLookup::PatchLookup(PatchLookup&&) noexcept = default;
PatchLookup& PatchLookup::operator=(PatchLookup&&) noexcept = default;

std::optional<StoredPatch> PatchLookup::find(int64_t patch_id) const {
  if (patch_id < 0) return std::nullopt;
  const int32_t slide = static_cast<int32_t>(patch_id >> 32);
  for (size_t s = 0; s < impl_->catalog->sources.size(); ++s) {
    const auto [first, count] = impl_->rows_of(s, slide);
    if (count == 0) continue;
    const IndexRows rows = IndexReader(impl_->info(s).path).read_range(first, count);
    const auto it = std::lower_bound(rows.patch_id.begin(), rows.patch_id.end(), patch_id);
    if (it == rows.patch_id.end() || *it != patch_id) return std::nullopt;
    const size_t i = it - rows.patch_id.begin();
    return StoredPatch{patch_id, slide, rows.coords[2 * i], rows.coords[2 * i + 1], s,
                       first + static_cast<int64_t>(i)};
  }
  return std::nullopt;
}

StoredPatch PatchLookup::nearest(int32_t slide, int64_t x, int64_t y) const {
  for (size_t s = 0; s < impl_->catalog->sources.size(); ++s) {
    const auto [first, count] = impl_->rows_of(s, slide);
    if (count == 0) continue;
    const IndexInfo& info = impl_->info(s);
    const double extent = info.patch_size * info.slides.downsample[slide];  // level-0 px
    const int64_t width = info.slides.width[slide], height = info.slides.height[slide];
    if (x < -extent || y < -extent || x > width + extent || y > height + extent) {
      fail<InvalidInput>("the point ({}, {}) lies outside slide '{}' ({} x {} level-0 pixels) by "
                         "more than one patch ({:g} pixels): give a point on the slide",
                         x, y, info.slides.slide_id.at(slide), width, height, extent);
    }
    const IndexRows rows = IndexReader(info.path).read_range(first, count);
    const double half = 0.5 * extent;
    double best = std::numeric_limits<double>::infinity();
    size_t at = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      const double dx = rows.coords[2 * i] + half - x, dy = rows.coords[2 * i + 1] + half - y;
      const double d = dx * dx + dy * dy;
      if (d < best) {  // rows ascend by patch id: the first of equals wins
        best = d;
        at = i;
      }
    }
    return StoredPatch{rows.patch_id[at], slide, rows.coords[2 * at], rows.coords[2 * at + 1], s,
                       first + static_cast<int64_t>(at)};
  }
  fail<InvalidInput>("slide '{}' has no patch in the ingested parts",
                     impl_->info(0).slides.slide_id.at(slide));
}

std::vector<float> PatchLookup::embedding(const StoredPatch& patch) const {
  impl_->check_embed(patch.source);
  const std::string path =
      embeddings_path(impl_->catalog->path(impl_->catalog->sources[patch.source].embed_dir));
  const EmbeddingsReader file(path);
  int64_t id = -1;
  file.read_ids(&id, patch.row, 1);
  if (id != patch.patch_id) {
    fail<IoError>("'{}' row {} holds patch {}, the index says patch {}: the embed output does not "
                  "belong to the patch index",
                  path, patch.row, id, patch.patch_id);
  }
  std::vector<float> v(file.dim());
  file.read_values(v.data(), patch.row, 1);
  return v;
}

SlidePatches PatchLookup::slide_patches(int32_t slide) const {
  SlidePatches out;
  for (size_t s = 0; s < impl_->catalog->sources.size(); ++s) {
    const auto [first, count] = impl_->rows_of(s, slide);
    if (count == 0) continue;
    const IndexInfo& info = impl_->info(s);
    const IndexRows rows = IndexReader(info.path).read_range(first, count);
    impl_->check_embed(s);
    const std::string path =
        embeddings_path(impl_->catalog->path(impl_->catalog->sources[s].embed_dir));
    const EmbeddingsReader file(path);
    std::vector<int64_t> ids(count);
    file.read_ids(ids.data(), first, count);
    if (ids != rows.patch_id) {
      fail<IoError>("'{}' rows {}..{} do not hold the patches the index lists for slide {}: the "
                    "embed output does not belong to the patch index",
                    path, first, first + count, slide);
    }
    out.embeddings.resize(static_cast<size_t>(count) * file.dim());
    file.read_values(out.embeddings.data(), first, count);
    out.patch_id = rows.patch_id;
    out.coords = rows.coords;
    out.footprint = info.patch_size * info.slides.downsample.at(slide);
    return out;
  }
  return out;
}

Image8 PatchLookup::pixels(const StoredPatch& patch, std::string* why) const {
  const IndexInfo& info = impl_->info(patch.source);
  const int S = info.patch_size;
  Image8 image{S, S, 3, std::vector<uint8_t>(static_cast<size_t>(S) * S * 3)};
  std::string problem;
  try {
    const IndexRows row = IndexReader(info.path).read_rows({patch.row});
    ShardReader shard(info.shard_path(row.shard.at(0)));
    shard.read_patches({static_cast<uint64_t>(row.row.at(0))}, image.pixels.data());
    return image;
  } catch (const Error& e) {
    problem = e.what();
  }
  try {
    const int level = info.slides.level.at(patch.slide);
    const int read = info.slides.read_size.at(patch.slide);
    Slide slide = Slide::open(info.slides.path.at(patch.slide));
    std::vector<uint8_t> rgb(static_cast<size_t>(read) * read * 3);
    slide.read_rgb(patch.x, patch.y, level, read, read, rgb.data());
    if (read == S) {
      image.pixels = std::move(rgb);
    } else {
      resize_patch(rgb.data(), read, image.pixels.data(), S);
    }
    return image;
  } catch (const Error& e) {
    problem += "; " + std::string(e.what());
  }
  if (why) *why = problem;
  return {};
}

}  // namespace tessera::search
