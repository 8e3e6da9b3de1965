// query's whole-slide and whole-patient reports:
//   query --index RUN/ingest/<slide index> --similar-slide S [--exclude-same-patient]
//   query --index RUN/ingest/<patient index> --similar-patient P
// search the index ingest --level slide|patient builds (search::SimilarIndex); and
//   query --index RUN/ingest/<patch index> --slide S --mosaic-vote
// is reported here from the hits of the mosaic's patches (common/search/votes.h). Output as
// table, CSV or JSON.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/mpi/comm.h"
#include "common/search/slide_search.h"
#include "common/search/votes.h"
#include "common/store/vector_meta.h"
#include "stages/query/config.h"

namespace tessera::query {

// Collective (rank 0 searches, the others wait for its outcome). --similar-slide /
// --similar-patient. Returns 0 after rank 0 wrote the report. Throws InvalidInput for an index of
// the other level, an unknown id or one the aggregate skipped (with its reason); IoError for
// damaged files.
int run_similar(const Config& config, Comm& comm);

// The mosaic-vote report: the query slide and its mosaic, the slides ranked by votes (at most k,
// with the manifest's metadata columns) and the patients ranked by votes (at most k); as
// search::vote_report_json for JSON.
std::string format_vote_report(const std::string& format, const std::string& slide,
                               const std::vector<search::MosaicPatch>& mosaic,
                               const std::vector<search::Vote>& slides_ranked,
                               const std::vector<search::Vote>& patients_ranked,
                               const VectorSlideTable& table, int k,
                               const nlohmann::json& search);

}  // namespace tessera::query
