// Whole-slide and whole-patient search:
//   query --index RUN/ingest/<slide index> --similar-slide S [--exclude-same-patient]
//   query --index RUN/ingest/<patient index> --similar-patient P
// search the index ingest --level slide|patient builds (nearest vectors, exact with Flat); and
//   query --index RUN/ingest/<patch index> --slide S --mosaic-vote
// is reported here from the hits of the mosaic's patches (votes.h). Output as table, CSV or JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/mpi/comm.h"
#include "common/store/vector_meta.h"
#include "common/vector/catalog.h"
#include "stages/query/config.h"
#include "stages/query/votes.h"

namespace tessera::query {

// Collective (rank 0 searches, the others wait for its outcome). --similar-slide /
// --similar-patient. Returns 0 after rank 0 wrote the report. Throws InvalidInput for an index of
// the other level, an unknown id or one the aggregate skipped (with its reason); IoError for
// damaged files.
int run_similar(const Config& config, Comm& comm);

// One mosaic patch of the query slide, for the report.
struct MosaicPatch {
  int64_t patch_id = -1;
  int64_t x = 0, y = 0;
};

// The mosaic of slide `slide_id` (votes.h, pick_mosaic under `rule`): its patches' stored features,
// read from the per-slide feature file of whichever embed part of `catalog` holds the slide.
// Throws InvalidInput when no ingested part has the slide's features or it has no patches,
// IoError when the feature file fails its check in embed's _SUCCESS at `verify`.
struct SlideMosaic {
  std::vector<MosaicPatch> patches;
  std::vector<float> vectors;  // patches.size() x dim
};
SlideMosaic slide_mosaic(const Catalog& catalog, const std::string& slide_id,
                         const MosaicRule& rule, VerifyLevel verify = VerifyLevel::kFull);

// The mosaic-vote report: the query slide and its mosaic, the slides ranked by votes (at most k,
// with the manifest's metadata columns) and the patients ranked by votes (at most k).
std::string format_vote_report(const std::string& format, const std::string& slide,
                               const std::vector<MosaicPatch>& mosaic,
                               const std::vector<Vote>& slides_ranked,
                               const std::vector<Vote>& patients_ranked,
                               const VectorSlideTable& table, int k,
                               const nlohmann::json& search);

}  // namespace tessera::query
