// Whole-slide search by mosaic voting, as Yottixel does it: a few representative patches of the
// query slide (its mosaic) are searched over the patch index, and slides and patients are ranked
// by the votes of those searches. Pure functions, tested without an index.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/store/vector_meta.h"
#include "common/search/shard_set.h"

namespace tessera::search {

struct MosaicRule {
  double percent = 5.0;  // share of the slide's patches in the mosaic
  int min_size = 8;      // at least this many (or every patch of a smaller slide)
  int max_size = 256;    // at most this many
  int iterations = 20;   // Lloyd iterations of k-means
};

// The mosaic size for a slide of n patches: min(n, max(min_size, ceil(percent / 100 * n))),
// capped at max_size.
int64_t mosaic_size(int64_t n, const MosaicRule& rule);

// Picks the mosaic of a slide: k-means with m = mosaic_size(n) clusters over its n patch features
// (rows x dim, row-major; squared Euclidean distance), initialised deterministically (the patch
// nearest the mean, then repeatedly the patch farthest from every chosen centre, lowest row on
// ties), then `rule.iterations` Lloyd steps (an emptied cluster keeps its centre). The mosaic is
// the patch nearest each final centre, distinct, ascending. Deterministic.
std::vector<int64_t> pick_mosaic(const std::vector<float>& features, int64_t rows, int dim,
                                 const MosaicRule& rule);

struct Vote {
  std::string id;          // slide id or patient id
  std::string patient_id;  // of the slide ("" for patients and slides without one)
  int32_t slide = -1;      // slide index (slides only)
  int votes = 0;           // mosaic patches whose top-k holds this slide / patient
  float best_score = 0;    // the best score among those hits
};

// Ranks slides by votes: each mosaic patch's hit list gives one vote to every distinct slide in
// it (however many of its patches are there), and its best score to that slide. Ties (equal
// votes) go to the better best score (higher with `higher_is_better`), then to the lower id.
std::vector<Vote> vote_slides(const std::vector<std::vector<Hit>>& hits,
                              const VectorSlideTable& slides, bool higher_is_better);

// The same over patients (a slide without patient_id is a patient of its own, named by its slide
// id): one vote per mosaic patch for every distinct patient among its hits.
std::vector<Vote> vote_patients(const std::vector<std::vector<Hit>>& hits,
                                const VectorSlideTable& slides, bool higher_is_better);

}  // namespace tessera::search
