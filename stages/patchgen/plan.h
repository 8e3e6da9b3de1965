// The per-slide plan (tissue detection and patch grid) and the global patch order built from all
// plans. Detection runs on the rank owning the slide (slide s on rank s mod R); plans are
// exchanged once with Comm::allgather, so every rank holds the whole plan.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "stages/patchgen/config.h"
#include "stages/patchgen/grid.h"
#include "stages/patchgen/manifest.h"

namespace tessera::patchgen {

struct SlidePlan {
  int index = 0;              // manifest index
  bool ok = false;
  std::string reason;         // failure reason when !ok
  int64_t width = 0;          // level-0 dimensions (0 when the slide could not be opened)
  int64_t height = 0;
  double mpp_x = 0;
  double mpp_y = 0;
  std::string mpp_source;
  std::string vendor;
  LevelChoice level;
  int64_t tissue_pixels = 0;  // of the detection mask
  std::vector<GridPatch> patches;
};

// Slides whose level-0 resolution is coarser than the target by more than this factor fail
// instead of being upsampled.
inline constexpr double kMaxUpsample = 2.0;

// Opens the slide, finds its resolution, detects tissue (or loads its mask), builds the grid and,
// with config.qc, writes `qc_dir/<slide_id>.png`. Expected failures (unreadable slide, no
// resolution, unreadable mask, no tissue) are returned as a plan with ok=false and a reason; only
// failures to write the QC image throw.
SlidePlan plan_slide(const SlideEntry& slide, const Config& config, const std::string& qc_dir);

// Compact binary (CBOR) encoding of plans for the exchange between ranks.
std::string encode_plans(const std::vector<SlidePlan>& plans);
std::vector<SlidePlan> decode_plans(const std::string& bytes);

// The global patch list: patches of successful slides in manifest order, each slide's in (y, x)
// order. Item i is patch `ordinal` of slide `slide`.
class PatchOrder {
 public:
  explicit PatchOrder(const std::vector<SlidePlan>& plans);  // plans indexed by manifest index
  int64_t total() const { return offsets_.back(); }
  // The slide and ordinal of global item i (0 <= i < total()). O(log slides).
  std::pair<int, int64_t> locate(int64_t i) const;
  int64_t slide_offset(int slide) const { return offsets_[slide]; }

 private:
  std::vector<int64_t> offsets_;  // offsets_[s]: first global item of slide s; back(): total
};

// Stable patch id: slide_index << 32 | ordinal within the slide.
inline int64_t make_patch_id(int slide, int64_t ordinal) {
  return (static_cast<int64_t>(slide) << 32) | ordinal;
}

}  // namespace tessera::patchgen
