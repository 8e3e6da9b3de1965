// Api's patch-level search routes (api.h): info, the slide list, search and heatmap, the query
// resolved against the resident GenerationView and searched in the batcher's collective rounds.
#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/version.h"
#include "common/vector/vector_index.h"
#include "stages/query/report.h"
#include "stages/serve/api.h"
#include "stages/serve/api_internal.h"
#include "stages/serve/http_errors.h"
#include "stages/serve/image_query.h"
#include "stages/serve/json_fields.h"

namespace tessera::serve {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

json slide_json(const GenerationView& front, size_t s) {
  const VectorSlideTable& t = front.slides();
  json j = {{"slide_id", t.slide_id[s]},
            {"patient_id", t.patient_id[s]},
            {"patches", front.patch_count(static_cast<int32_t>(s))},
            {"level", t.level[s]},
            {"slide_mpp", t.slide_mpp[s]}};
  json meta = json::object();
  for (const auto& c : t.metadata) {
    switch (c.type) {
      case MetaType::kInt: meta[c.name] = c.ints[s]; break;
      case MetaType::kFloat:
        meta[c.name] = std::isnan(c.floats[s]) ? json() : json(c.floats[s]);
        break;
      case MetaType::kString: meta[c.name] = c.strings[s]; break;
    }
  }
  j["metadata"] = std::move(meta);
  return j;
}

}  // namespace

Response Api::info(const GenerationView& front) {
  const Catalog& c = front.catalog();
  return json_response({{"index", c.dir},
                        {"tag", c.tag},
                        {"index_spec", c.index_spec},
                        {"metric", c.metric},
                        {"normalize", c.normalize},
                        {"rows", front.rows()},
                        {"dimension", c.dim},
                        {"shards", c.shards.size()},
                        {"ranks", ranks_},
                        {"slides", front.slides().size()},
                        {"patch_size", c.patch_size},
                        {"mpp", c.mpp},
                        {"default_nprobe", c.default_nprobe},
                        {"generations", c.generations.size()},
                        {"service_generation", front.generation()},
                        {"model", c.model},
                        {"image_search", image_search_available()},
                        {"slide_indexes", slide_indexes_->describe()},
                        {"limits",
                         {{"max_k", config_.limits.max_k},
                          {"max_body_bytes", config_.limits.max_body_bytes},
                          {"max_filter_chars", config_.limits.max_filter_chars}}},
                        {"filter_columns",
                         [&] {
                           json cols = json::array();
                           for (const auto& col : front.columns()) cols.push_back(col.name);
                           return cols;
                         }()},
                        {"version", version()},
                        {"git_revision", git_revision()}});
}

Response Api::slides(const GenerationView& front, const Request& request) {
  const VectorSlideTable& t = front.slides();
  const std::string q = request.param("q");
  const std::string filter_text = request.param("filter");
  if (q.size() > config_.limits.max_filter_chars || filter_text.size() > config_.limits.max_filter_chars) {
    fail<InvalidInput>("'q' and 'filter' may be {} characters long", config_.limits.max_filter_chars);
  }
  std::vector<uint8_t> keep(t.size(), 1);
  if (!filter_text.empty()) {
    // The slide-level columns of query's filter language, one row per slide.
    std::vector<search::ColumnSchema> columns = {{"slide_id", search::ColumnType::kString},
                                                {"patient_id", search::ColumnType::kString},
                                                {"level", search::ColumnType::kInt},
                                                {"slide_mpp", search::ColumnType::kFloat}};
    const int64_t n = static_cast<int64_t>(t.size());
    std::vector<int64_t> level(t.level.begin(), t.level.end());
    std::vector<search::ColumnView> views = {
        {"slide_id", search::ColumnType::kString, nullptr, nullptr, t.slide_id.data(), nullptr, n},
        {"patient_id", search::ColumnType::kString, nullptr, nullptr, t.patient_id.data(), nullptr, n},
        {"level", search::ColumnType::kInt, level.data(), nullptr, nullptr, nullptr, n},
        {"slide_mpp", search::ColumnType::kFloat, nullptr, t.slide_mpp.data(), nullptr, nullptr, n}};
    for (const auto& c : t.metadata) {
      if (std::any_of(columns.begin(), columns.end(), [&](const auto& s) { return s.name == c.name; })) continue;
      search::ColumnView v{c.name, search::ColumnType::kString, nullptr, nullptr, nullptr, nullptr, n};
      if (c.type == MetaType::kInt) { v.type = search::ColumnType::kInt; v.ints = c.ints.data(); }
      if (c.type == MetaType::kFloat) { v.type = search::ColumnType::kFloat; v.floats = c.floats.data(); }
      if (c.type == MetaType::kString) v.strings = c.strings.data();
      columns.push_back({c.name, v.type});
      views.push_back(v);
    }
    keep = search::Filter::parse(filter_text, columns).evaluate(views, n);
  }
  json list = json::array();
  for (size_t s = 0; s < t.size(); ++s) {
    if (!keep[s]) continue;
    if (!q.empty() && t.slide_id[s].find(q) == std::string::npos &&
        t.patient_id[s].find(q) == std::string::npos) {
      continue;
    }
    list.push_back(slide_json(front, s));
  }
  return json_response({{"slides", list}, {"count", list.size()}, {"total", t.size()}});
}

std::pair<std::vector<float>, json> Api::resolve(const GenerationView& front, const QuerySpec& spec,
                                                 int32_t* slide) {
  const Catalog& c = front.catalog();
  std::vector<float> v;
  json source;
  *slide = -1;
  auto stored = [&](const search::StoredPatch& p) {
    v = front.embedding(p);
    *slide = p.slide;
    source = {{"patch_id", p.patch_id}, {"slide_id", front.slides().slide_id.at(p.slide)},
              {"x", p.x}, {"y", p.y}, {"footprint", front.footprint(p.slide)}};
  };
  if (spec.patch_id) {
    const auto p = front.find(*spec.patch_id);
    if (!p) throw NotFound(fmt::format("unknown patch id {}", *spec.patch_id));
    stored(*p);
  } else if (!spec.slide_id.empty()) {
    const auto s = front.slide_index(spec.slide_id);
    if (!s) throw NotFound(fmt::format("unknown slide '{}'", spec.slide_id));
    if (front.patch_count(*s) == 0) {
      throw NotFound(fmt::format("slide '{}' has no ingested patch", spec.slide_id));
    }
    std::vector<float> mean;
    int64_t inside = 0;
    if (!spec.box.empty()) {
      // The mean embedding of the patches whose centres lie in the box.
      const search::SlidePatches patches = front.slide_patches(*s);
      const double half = patches.footprint / 2;
      mean.assign(c.dim, 0);
      for (size_t i = 0; i < patches.patch_id.size(); ++i) {
        const double cx = patches.coords[2 * i] + half, cy = patches.coords[2 * i + 1] + half;
        if (cx < spec.box[0] || cy < spec.box[1] || cx >= spec.box[0] + spec.box[2] ||
            cy >= spec.box[1] + spec.box[3]) {
          continue;
        }
        for (int d = 0; d < c.dim; ++d) mean[d] += patches.embeddings[i * c.dim + d];
        ++inside;
      }
    }
    if (inside > 0) {
      for (float& x : mean) x /= static_cast<float>(inside);
      v = std::move(mean);
      *slide = *s;
      source = {{"slide_id", spec.slide_id}, {"x", spec.x}, {"y", spec.y}, {"box", spec.box},
                {"patches", inside}, {"footprint", front.footprint(*s)}};
    } else {
      stored(front.nearest(*s, spec.x, spec.y));
    }
  } else if (!spec.vector.empty()) {
    if (static_cast<int>(spec.vector.size()) != c.dim) {
      fail<InvalidInput>("'vector' has {} values; the index has dimension {}", spec.vector.size(), c.dim);
    }
    v = spec.vector;
    source = {{"vector", true}};
  } else {
    if (!image_search_available()) {
      throw NotImplemented("search by image needs the model helper (query's image embedder), "
                           "which this build of serve lacks; search by patch, point or vector");
    }
    v = embed_image_bytes(c, spec.image, config_.threads);
    source = {{"image", true}};
  }
  if ((spec.exclude_same_slide || spec.exclude_same_patient) && *slide < 0) {
    fail<InvalidInput>("'exclude_same_slide' and 'exclude_same_patient' need a query from a stored "
                       "patch ('patch_id' or 'slide_id' with 'x' and 'y')");
  }
  if (c.normalize) l2_normalize(v.data(), 1, c.dim);
  return {std::move(v), std::move(source)};
}

std::vector<std::vector<search::Hit>> Api::run_jobs(std::vector<SearchJob> jobs, int generation) {
  const auto deadline =
      Clock::now() + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(config_.limits.request_timeout_s));
  std::vector<std::future<std::vector<search::Hit>>> futures;
  try {
    for (auto& job : jobs) futures.push_back(batcher_.submit(std::move(job), generation));
  } catch (const Error& e) {
    throw Unavailable(e.what());
  }
  std::vector<std::vector<search::Hit>> hits;
  for (auto& future : futures) {
    if (future.wait_until(deadline) != std::future_status::ready) {
      throw Unavailable(fmt::format("the search did not finish within {} s",
                                    config_.limits.request_timeout_s));
    }
    try {
      hits.push_back(future.get());
    } catch (const InvalidInput&) {
      throw;
    } catch (const Error& e) {
      throw Unavailable(e.what());
    }
  }
  return hits;
}

Response Api::search(const GenerationView& front, const Request& request) {
  const auto start = Clock::now();
  const QuerySpec spec = parse_query(request.body, config_.limits);
  if (!spec.filter.empty()) search::Filter::parse(spec.filter, front.columns());  // 400 early
  int32_t slide = -1;
  auto [vector, source] = resolve(front, spec, &slide);
  SearchJob job;
  job.vector = std::move(vector);
  job.k = spec.k;
  job.nprobe = spec.nprobe;
  job.filter = spec.filter;
  if (spec.exclude_same_slide) job.exclude_slide = slide;
  if (spec.exclude_same_patient) job.exclude_patient_of = slide;
  std::vector<SearchJob> jobs;
  jobs.push_back(std::move(job));
  const std::vector<search::Hit> hits = std::move(run_jobs(std::move(jobs), front.generation()).at(0));
  json list = json::array();
  for (size_t r = 0; r < hits.size(); ++r) {
    json h = query::hit_json(hits[r], r + 1, front.slides());
    h["footprint"] = front.footprint(hits[r].slide);
    list.push_back(std::move(h));
  }
  return json_response(
      {{"query", source},
       {"k", spec.k},
       {"filter", spec.filter},
       {"exclude_same_slide", spec.exclude_same_slide},
       {"exclude_same_patient", spec.exclude_same_patient},
       {"metric", front.catalog().metric},
       {"hits", list},
       {"generation", front.generation()},
       {"latency_ms", 1000 * std::chrono::duration<double>(Clock::now() - start).count()}});
}

Response Api::heatmap(const GenerationView& front, const Request& request) {
  json body = parse_body(request.body);
  if (!body.contains("target") || !body["target"].is_string()) {
    fail<InvalidInput>("give 'target': the slide to score, and a query as for search");
  }
  const std::string target = body["target"].get<std::string>();
  const auto s = front.slide_index(target);
  if (!s) throw NotFound(fmt::format("unknown slide '{}'", target));
  body.erase("target");
  const QuerySpec spec = parse_query(body.dump(), config_.limits);
  int32_t query_slide = -1;
  auto [q, source] = resolve(front, spec, &query_slide);
  if (front.patch_count(*s) > config_.limits.max_heatmap_patches) {
    fail<InvalidInput>("slide '{}' has {} patches; a heatmap scores at most {}", target,
                       front.patch_count(*s), config_.limits.max_heatmap_patches);
  }
  const search::SlidePatches patches = front.slide_patches(*s);
  const Catalog& c = front.catalog();
  const bool ip = c.metric == "ip";
  json rows = json::array();
  float lo = INFINITY, hi = -INFINITY;
  std::vector<float> e(c.dim);
  for (size_t i = 0; i < patches.patch_id.size(); ++i) {
    std::copy_n(patches.embeddings.begin() + i * c.dim, c.dim, e.begin());
    if (c.normalize) l2_normalize(e.data(), 1, c.dim);
    double score = 0;
    for (int d = 0; d < c.dim; ++d) {
      score += ip ? static_cast<double>(q[d]) * e[d] : (q[d] - e[d]) * static_cast<double>(q[d] - e[d]);
    }
    const float f = static_cast<float>(score);
    lo = std::min(lo, f);
    hi = std::max(hi, f);
    rows.push_back({patches.coords[2 * i], patches.coords[2 * i + 1], f});
  }
  return json_response({{"slide_id", target},
                        {"query", source},
                        {"metric", c.metric},
                        {"higher_is_better", ip},
                        {"footprint", patches.footprint},
                        {"min", rows.empty() ? 0.0f : lo},
                        {"max", rows.empty() ? 0.0f : hi},
                        {"patches", rows}});
}

}  // namespace tessera::serve
