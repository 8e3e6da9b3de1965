// The stored patches behind an ingest output: finds a patch by id or by a point on its slide in
// the patch indexes of the catalog's sources, reads its stored embedding from the embed output,
// and its pixels from the patch store (else from the slide). Not thread-safe (HDF5 handles).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/slide/png_io.h"
#include "common/vector/catalog.h"

namespace tessera::search {

struct StoredPatch {
  int64_t patch_id = -1;
  int32_t slide = -1;
  int64_t x = 0, y = 0;
  size_t source = 0;  // index into Catalog::sources
  int64_t row = 0;    // row of that part's index.h5 and embeddings.h5
};

// Every ingested patch of one slide with its stored embedding.
struct SlidePatches {
  std::vector<int64_t> patch_id;  // ascending
  std::vector<int64_t> coords;    // level-0 x0, y0, x1, y1, ...
  std::vector<float> embeddings;  // patch_id.size() x D, as embed wrote them
  double footprint = 0;           // level-0 pixels per patch side
};

class PatchLookup {
 public:
  // Stored embeddings are read once the embed output's rank shards (and embeddings.h5) pass their
  // markers' checks at `verify` (full: the XXH3 of every byte, once per part and process): HDF5's
  // Fletcher32 alone can be fooled.
  explicit PatchLookup(const Catalog& catalog, VerifyLevel verify = VerifyLevel::kFull);
  ~PatchLookup();
  PatchLookup(PatchLookup&&) noexcept;
  PatchLookup& operator=(PatchLookup&&) noexcept;

  // The patch with this id among the ingested parts; nullopt when there is none.
  std::optional<StoredPatch> find(int64_t patch_id) const;
  // The patch of slide `slide` (index into the slide table) whose centre is nearest the level-0
  // point (x, y), the lowest patch id on ties. Throws InvalidInput naming the slide when it has no
  // ingested patch, or when the point lies outside the slide by more than one patch (a patch's
  // level-0 extent) on any side.
  StoredPatch nearest(int32_t slide, int64_t x, int64_t y) const;
  // Its stored embedding (D floats), as embed wrote it.
  std::vector<float> embedding(const StoredPatch& patch) const;
  // Every patch of slide `slide` (an index into the slide table) with its embedding; empty when
  // no ingested part holds the slide. Throws IoError as embedding() does.
  SlidePatches slide_patches(int32_t slide) const;
  // Its pixels (S x S RGB): from the patch store, else read from the slide and resampled as
  // patchgen did; an empty image (with the reason in `why`) when neither can be read.
  Image8 pixels(const StoredPatch& patch, std::string* why = nullptr) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::search
