#include "stages/ingest/route.h"

#include <algorithm>

#include "common/core/error.h"
#include "common/stage/partition.h"

namespace tessera::ingest {

std::vector<int> rank_shards(int shards, int rank, int world_size) {
  const Partition owners = Partition::cyclic(shards, world_size);
  std::vector<int> mine;
  for (int64_t j = 0; j < owners.count(rank); ++j) {
    mine.push_back(static_cast<int>(owners.global_index(rank, j)));
  }
  return mine;
}

PartSlides part_slides_of(const SlideTable& slides) {
  PartSlides p;
  for (size_t s = 0; s < slides.size(); ++s) {
    if (slides.patch_count[s] > 0) {
      p.slides.push_back(static_cast<int32_t>(s));
      p.rows.push_back(slides.patch_count[s]);
    }
  }
  return p;
}

std::vector<RowRange> rank_row_ranges(Assign assign, const PartSlides& slides,
                                      const std::vector<int>& placed,
                                      const std::vector<int64_t>& slide_offset, int64_t rows,
                                      const std::vector<int>& slot) {
  std::vector<RowRange> ranges;
  const bool builds_any = std::any_of(slot.begin(), slot.end(), [](int s) { return s >= 0; });
  if (!builds_any) return ranges;
  if (assign == Assign::kCyclic) {
    ranges.push_back({0, rows, -1});
    return ranges;
  }
  TESSERA_CHECK(placed.size() == slides.slides.size(),
                "rank_row_ranges: {} slides, {} placements", slides.slides.size(), placed.size());
  for (size_t i = 0; i < slides.slides.size(); ++i) {
    const int k = placed[i];
    if (slot.at(k) < 0) continue;
    ranges.push_back({slide_offset.at(slides.slides[i]), slides.rows[i], k});
  }
  return ranges;
}

}  // namespace tessera::ingest
