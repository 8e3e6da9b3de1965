// The per-slide plan (tissue detection and patch grid), its file, and the patch order of a part.
// Detection runs on one rank per slide, which writes the slide's plan file; ranks exchange only
// per-slide patch counts and read the plans of the slides they extract, one at a time, so no rank
// holds more than one slide's patches. Plan files are kept, so a resumed run does not detect
// again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/mpi/comm.h"
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
  int64_t patch_count = 0;    // patches.size(), also when only the summary was read
  std::vector<GridPatch> patches;
};

// Slides whose level-0 resolution is coarser than the target by more than this factor fail
// instead of being upsampled.
inline constexpr double kMaxUpsample = 2.0;

// Opens the slide, finds its resolution (the manifest's mpp column when set, source "manifest";
// else the slide's metadata or --default-mpp), detects tissue (or loads its mask), builds the grid
// and, with config.qc, writes `qc_dir/<slide_id>.png` (a thumbnail of kQcLongSide pixels on its
// long side with a legend line) and `qc_dir/<slide_id>.geojson`. Expected failures (unreadable slide, no
// resolution, unreadable mask, no tissue) are returned as a plan with ok=false and a reason; only
// failures to write the QC image throw.
SlidePlan plan_slide(const SlideEntry& slide, const Config& config, const std::string& qc_dir);

inline constexpr int64_t kPlanFormatVersion = 1;

// Writes `plan` to `path` (HDF5, under a temporary name, fsync'ed and renamed): the slide's
// summary as attributes and its patches as /coords int64 [n, 2] and /tissue float32 [n], with
// per-chunk checksums. `fingerprint` ties the plan to the configuration that made it. Throws
// IoError naming the file.
void write_plan(const std::string& path, const SlidePlan& plan, const SlideEntry& entry,
                const std::string& fingerprint);

// Reads a plan written by write_plan; nullopt when the file is missing or was made with another
// fingerprint. With `with_patches` false only the summary is read (patches stays empty and
// `patch_count` holds the count). Throws IoError naming the file when it is unreadable.
std::optional<SlidePlan> read_plan(const std::string& path, const std::string& fingerprint,
                                   bool with_patches);

// The plan file of a slide inside a stage directory: plans/<slide_id>.h5.
std::string plan_path(const std::string& stage_dir, const std::string& slide_id);

// The patch list of a part: the patches of its successful slides in manifest order, each slide's
// in (y, x) order. Built from per-slide counts only (O(slides) memory): item i is patch
// `ordinal` of the slide at position `k` of the part's slide list.
class PatchOrder {
 public:
  explicit PatchOrder(const std::vector<int64_t>& counts);  // per position, 0 for failed slides
  int64_t total() const { return offsets_.back(); }
  // The position and ordinal of item i (0 <= i < total()). O(log slides).
  std::pair<int, int64_t> locate(int64_t i) const;
  int64_t offset(int position) const { return offsets_[position]; }
  int64_t count(int position) const { return offsets_[position + 1] - offsets_[position]; }

 private:
  std::vector<int64_t> offsets_;  // offsets_[k]: first item of position k; back(): total
};

// What every rank knows about its part after planning: O(slides of the part).
struct PartPlan {
  std::vector<int> slides;      // manifest indices of the part's slides, ascending
  std::vector<int64_t> counts;  // patches per position; 0 when the slide failed at planning
  std::vector<uint8_t> failed;  // per position: 1 when the slide failed at planning
  PatchOrder order() const { return PatchOrder(counts); }
};

// Collective. Each rank passes `part` with the counts and failed flags of the slides it planned
// and zeros elsewhere; on return every rank holds every slide's (one allreduce of 2 x slides
// int64: the only exchange of the planning step).
void share_plan_counts(Comm& comm, PartPlan& part);

// Stable patch id: slide_index << 32 | ordinal within the slide. The same for a slide whatever
// the number of parts and ranks.
inline int64_t make_patch_id(int slide, int64_t ordinal) {
  return (static_cast<int64_t>(slide) << 32) | ordinal;
}

}  // namespace tessera::patchgen
