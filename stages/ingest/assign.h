// Which shard each embedding goes to: pure functions of the slides' row counts, so every rank
// computes the same assignment and unit tests check it without MPI.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessera::ingest {

enum class Assign {
  kBySlide,  // every patch of a slide in one shard; slides placed on the least-filled shard
  kCyclic    // row i of the ingested sequence to shard i mod K
};
Assign parse_assign(const std::string& text);  // "by-slide" | "cyclic"; throws InvalidInput
const char* to_string(Assign assign);

// The slides of one embed part that have rows, in manifest order, with their row counts.
struct PartSlides {
  std::vector<int32_t> slides;
  std::vector<int64_t> rows;
};

// by-slide: places the slides of `parts` (taken in the order given: parts ascending, slides in
// manifest order within a part) one by one on the shard holding the fewest rows so far, the
// lowest shard number on ties, starting from `fill` (rows per shard already ingested; size K),
// which is updated. Returns, per part, the shard of each of its slides. So an ingest of part 0
// followed by an append of part 1 places every slide where an ingest of both does.
std::vector<std::vector<int>> assign_by_slide(const std::vector<PartSlides>& parts,
                                              std::vector<int64_t>& fill);

// cyclic: the shard of the row numbered `sequence` in the ingested sequence (previous generations'
// rows first, then this generation's parts ascending, each in index order).
inline int cyclic_shard(int64_t sequence, int shards) {
  return static_cast<int>(sequence % shards);
}

}  // namespace tessera::ingest
