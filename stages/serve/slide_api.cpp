// Slide- and case-level routes of Api (api.h): similar slides and patients over a slide index
// (search::SimilarIndex, as query --similar-slide / --similar-patient), and mosaic voting over the
// resident patch index (as query --slide S --mosaic-vote, its searches in the collective rounds).
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/vector/vector_index.h"
#include "common/search/slide_search.h"
#include "common/search/votes.h"
#include "stages/serve/api.h"
#include "stages/serve/http_errors.h"

namespace tessera::serve {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

double elapsed_ms(Clock::time_point start) {
  return 1000 * std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

Response Api::similar(const GenerationView& front, const Request& request,
                      const std::string& level) {
  const auto start = Clock::now();
  const SimilarSpec spec =
      parse_similar(request.body, level == "slide" ? "slide_id" : "patient_id", config_.limits);
  const auto index = slide_indexes_->find(level, spec.index);
  if (!index) {
    if (!spec.index.empty()) {
      throw NotFound(fmt::format("no {}-level index '{}' is served (see /api/v1/info)", level,
                                 spec.index));
    }
    throw NotFound(fmt::format(
        "this service holds no {0}-level index: make one (aggregate{1}, then ingest --level {0}) "
        "and start serve with --slide-index RUN/ingest/NAME",
        level, level == "patient" ? " --level patient" : ""));
  }
  std::string why;
  const int64_t row = index->row(spec.id, &why);
  if (row < 0) throw NotFound(why);
  const search::SimilarHits hits = index->search(row, spec.k, spec.exclude_same_patient);
  json j = index->report_json(hits, spec.k, spec.exclude_same_patient);
  j["search"]["index_dir"] = index->catalog().dir;
  j["generation"] = front.generation();
  j["latency_ms"] = elapsed_ms(start);
  return {200, "application/json", j.dump(), {}};
}

Response Api::mosaic_vote(const GenerationView& front, const Request& request) {
  const auto start = Clock::now();
  const VoteSpec spec = parse_vote(request.body, config_.limits);
  if (!spec.filter.empty()) search::Filter::parse(spec.filter, front.columns());  // 400 early
  const auto slide = front.slide_index(spec.slide_id);
  if (!slide) throw NotFound(fmt::format("unknown slide '{}'", spec.slide_id));
  if (front.patch_count(*slide) == 0) {
    throw NotFound(fmt::format("slide '{}' has no ingested patch", spec.slide_id));
  }
  const Catalog& catalog = front.catalog();
  search::MosaicRule rule;
  rule.percent = spec.mosaic_percent;
  rule.min_size = spec.mosaic_min;
  search::SlideMosaic mosaic = search::pick_slide_mosaic(front.mosaic_features(spec.slide_id), rule);
  const auto n = static_cast<int64_t>(mosaic.patches.size());
  if (catalog.normalize) l2_normalize(mosaic.vectors.data(), n, catalog.dim);
  // One search per mosaic patch, as query searches them: its slide left out (a slide never votes
  // for itself) and with exclude_same_patient every slide of its patient.
  std::vector<SearchJob> jobs(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    SearchJob& job = jobs[i];
    job.vector.assign(mosaic.vectors.begin() + i * catalog.dim,
                      mosaic.vectors.begin() + (i + 1) * catalog.dim);
    job.k = spec.k;
    job.nprobe = spec.nprobe;
    job.filter = spec.filter;
    job.exclude_slide = *slide;
    if (spec.exclude_same_patient) job.exclude_patient_of = *slide;
  }
  const std::vector<std::vector<search::Hit>> hits = run_jobs(std::move(jobs), front.generation());
  const bool ip = catalog.metric == "ip";
  const json search = {{"index", catalog.index_spec},
                       {"metric", catalog.metric},
                       {"normalize", catalog.normalize},
                       {"shards", catalog.shards.size()},
                       {"ranks", ranks_},
                       {"rows", front.rows()},
                       {"k", spec.k},
                       {"top", spec.top},
                       {"nprobe", spec.nprobe > 0 ? spec.nprobe : catalog.default_nprobe},
                       {"filter", spec.filter},
                       {"exclude_same_patient", spec.exclude_same_patient},
                       {"mosaic_percent", spec.mosaic_percent},
                       {"mosaic_min", spec.mosaic_min}};
  json j = search::vote_report_json(spec.slide_id, mosaic.patches,
                                   search::vote_slides(hits, front.slides(), ip),
                                   search::vote_patients(hits, front.slides(), ip), front.slides(),
                                   spec.top, search);
  j["query"]["footprint"] = front.footprint(*slide);
  j["generation"] = front.generation();
  j["latency_ms"] = elapsed_ms(start);
  return {200, "application/json", j.dump(), {}};
}

}  // namespace tessera::serve
