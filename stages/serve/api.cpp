#include "stages/serve/api.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/strings.h"
#include "common/core/utf8.h"
#include "common/core/version.h"
#include "common/slide/slide.h"
#include "common/store/store.h"
#include "common/vector/vector_index.h"
#include "stages/query/report.h"
#include "stages/serve/deepzoom.h"
#include "stages/serve/http_errors.h"
#include "stages/serve/json_fields.h"
#include "stages/serve/image_query.h"

namespace tessera::serve {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int64_t kMaxTileReadPixels = int64_t{64} << 20;

Response json_response(const json& j) { return {200, "application/json", j.dump(), {}}; }

Response jpeg_response(std::shared_ptr<const std::string> bytes) {
  Response r{200, "image/jpeg", *bytes, {}};
  r.headers.emplace_back("Cache-Control", "private, max-age=3600");
  return r;
}

std::string content_type(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  if (ext == ".html") return "text/html; charset=utf-8";
  if (ext == ".js") return "text/javascript; charset=utf-8";
  if (ext == ".css") return "text/css; charset=utf-8";
  if (ext == ".png") return "image/png";
  if (ext == ".svg") return "image/svg+xml";
  if (ext == ".json" || ext == ".map") return "application/json";
  return "application/octet-stream";
}

// A whole decimal number of a request's path (digits only, within int64_t), or nullopt: every
// number taken from a path goes through here.
std::optional<int64_t> parse_id(const std::string& text) {
  if (text.empty() || text.size() > 19) return std::nullopt;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

std::string base64_decode(const std::string& text) {
  static const std::string kAlphabet =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t buffer = 0;
  int bits = 0;
  for (char c : text) {
    if (c == '=' ) break;
    if (c == '\n' || c == '\r') continue;
    const size_t v = kAlphabet.find(c);
    if (v == std::string::npos) fail<InvalidInput>("'image' is not base64 (character '{}')", c);
    buffer = (buffer << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((buffer >> bits) & 0xff));
    }
  }
  return out;
}

std::string slide_metadata_text(const VectorSlideTable& t, const MetaColumn& c, size_t s) {
  (void)t;
  return c.text(s);
}

json slide_json(const Front& front, size_t s) {
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

std::string Request::param(const std::string& name) const {
  const auto it = params.find(name);
  return it == params.end() ? std::string() : it->second;
}

Response error_response(int status, const std::string& message) {
  // A message may quote bytes of the request: escaped, or the JSON writer would throw.
  return {status, "application/json",
          json{{"error", {{"code", status}, {"message", utf8_escaped(message)}}}}.dump(), {}};
}

bool constant_time_equal(const std::string& a, const std::string& b) {
  // The length is not secret; the content is compared in full whatever it holds.
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= x ^ y;
  }
  return diff == 0;
}

std::optional<std::string> cookie_value(const std::string& header, const std::string& name) {
  size_t at = 0;
  while (at <= header.size()) {
    const size_t end = std::min(header.find(';', at), header.size());
    const std::string_view pair(header.data() + at, end - at);
    const size_t eq = pair.find('=');
    if (eq != std::string_view::npos && trim(pair.substr(0, eq)) == name) {
      return trim(pair.substr(eq + 1));
    }
    at = end + 1;
  }
  return std::nullopt;
}

QuerySpec parse_query(const std::string& body, const Limits& limits) {
  const json j = parse_body(body);
  QuerySpec q;
  int sources = 0;
  if (j.contains("patch_id")) {
    q.patch_id = field<int64_t>(j, "patch_id", "an integer");
    ++sources;
  }
  if (j.contains("slide_id")) {
    q.slide_id = field<std::string>(j, "slide_id", "a string");
    if (!j.contains("x") || !j.contains("y")) fail<InvalidInput>("'slide_id' needs 'x' and 'y'");
    q.x = field<int64_t>(j, "x", "an integer");
    q.y = field<int64_t>(j, "y", "an integer");
    if (j.contains("box")) {
      q.box = field<std::vector<int64_t>>(j, "box", "[x, y, width, height]");
      if (q.box.size() != 4 || q.box[2] <= 0 || q.box[3] <= 0) {
        fail<InvalidInput>("'box' must be [x, y, width, height] with a positive width and height");
      }
    }
    ++sources;
  }
  if (j.contains("vector")) {
    q.vector = field<std::vector<float>>(j, "vector", "an array of numbers");
    if (q.vector.empty()) fail<InvalidInput>("'vector' is empty");
    for (float v : q.vector) {
      if (!std::isfinite(v)) fail<InvalidInput>("'vector' holds a value that is not finite");
    }
    ++sources;
  }
  if (j.contains("image")) {
    q.image = base64_decode(field<std::string>(j, "image", "a base64 string"));
    if (q.image.empty()) fail<InvalidInput>("'image' is empty");
    ++sources;
  }
  if (sources != 1) {
    fail<InvalidInput>("give exactly one query: 'patch_id', 'slide_id' with 'x' and 'y', "
                       "'vector' or 'image'");
  }
  if (j.contains("k")) {
    const int64_t k = field<int64_t>(j, "k", "an integer");
    if (k < 1 || k > limits.max_k) fail<InvalidInput>("'k' must be 1..{}, not {}", limits.max_k, k);
    q.k = static_cast<int>(k);
  }
  q.nprobe = parse_nprobe(j);
  q.filter = parse_filter(j, limits.max_filter_chars);
  if (j.contains("exclude_same_slide")) {
    q.exclude_same_slide = field<bool>(j, "exclude_same_slide", "true or false");
  }
  if (j.contains("exclude_same_patient")) {
    q.exclude_same_patient = field<bool>(j, "exclude_same_patient", "true or false");
  }
  return q;
}

Api::Api(std::shared_ptr<const Front> front, Batcher& batcher, Metrics& metrics,
         const Config& config, std::map<std::string, std::string> files, std::string token,
         int ranks, std::shared_ptr<const SlideIndexes> slide_indexes)
    : front_(std::move(front)),
      batcher_(batcher),
      metrics_(metrics),
      config_(config),
      files_(std::move(files)),
      token_(std::move(token)),
      ranks_(ranks),
      tiles_(config.tile_cache_bytes),
      slide_indexes_(slide_indexes ? std::move(slide_indexes)
                                   : std::make_shared<const SlideIndexes>()) {}

void Api::set_front(std::shared_ptr<const Front> front) {
  std::lock_guard<std::mutex> lock(front_mutex_);
  front_ = std::move(front);
  tiles_.clear();
}

std::shared_ptr<const Front> Api::front() const {
  std::lock_guard<std::mutex> lock(front_mutex_);
  return front_;
}

std::map<std::string, std::string> Api::load_files(const std::string& dir) {
  if (!fs::is_regular_file(fs::path(dir) / "index.html")) {
    fail<IoError>("'{}' holds no index.html: build the web page (cmake --build BUILD --target "
                  "serve_web) or give --web-dir",
                  dir);
  }
  std::map<std::string, std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    const std::string rel = fs::relative(entry.path(), dir).generic_string();
    if (rel.rfind("npm/", 0) == 0) continue;  // the installer's own folder
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream bytes;
    bytes << in.rdbuf();
    files["/" + rel] = bytes.str();
  }
  return files;
}

bool Api::authorized(const Request& request) const {
  if (token_.empty()) return true;
  const std::string bearer = "Bearer ";
  if (request.authorization.rfind(bearer, 0) == 0 &&
      constant_time_equal(request.authorization.substr(bearer.size()), token_)) {
    return true;
  }
  // The page's own requests (tiles, thumbnails) carry the token as a cookie.
  const std::optional<std::string> cookie = cookie_value(request.cookie, "tessera_token");
  return cookie && constant_time_equal(*cookie, token_);
}

Response Api::handle(const Request& request) {
  const auto start = Clock::now();
  std::string name = "unknown";
  Response r;
  try {
    if (request.path != "/healthz" && !authorized(request)) {
      name = "auth";
      r = error_response(401, "missing or wrong bearer token");
      r.headers.emplace_back("WWW-Authenticate", "Bearer");
    } else if (request.body.size() > config_.limits.max_body_bytes) {
      r = error_response(413, fmt::format("the body is {} bytes; the limit is {}",
                                          request.body.size(), config_.limits.max_body_bytes));
    } else {
      r = route(request, request.path, name);
    }
  } catch (const NotFound& e) {
    r = error_response(404, e.what());
  } catch (const InvalidInput& e) {
    r = error_response(400, e.what());
  } catch (const Unavailable& e) {
    r = error_response(503, e.what());
  } catch (const NotImplemented& e) {
    r = error_response(501, e.what());
  } catch (const std::exception& e) {
    spdlog::error("{} {}: {}", request.method, request.path, e.what());
    r = error_response(500, e.what());
  }
  metrics_.request(name, r.status, std::chrono::duration<double>(Clock::now() - start).count());
  return r;
}

Response Api::route(const Request& request, const std::string& path, std::string& name) {
  const std::shared_ptr<const Front> front = this->front();
  const bool get = request.method == "GET" || request.method == "HEAD";
  const bool post = request.method == "POST";
  auto method_not_allowed = [&] {
    return error_response(405, fmt::format("{} is not allowed on {}", request.method, path));
  };
  if (path == "/healthz") {
    name = "healthz";
    return json_response({{"status", "ok"}, {"generation", front->generation()}});
  }
  if (path == "/metrics") {
    name = "metrics";
    metrics_.set_gauge("tessera_serve_index_rows", "Vectors in the served index.", front->rows());
    metrics_.set_gauge("tessera_serve_generation", "Loads of the index since the start (0 first).",
                       front->generation());
    metrics_.set_gauge("tessera_serve_tile_cache_bytes", "Encoded DeepZoom tiles held.",
                       static_cast<double>(tiles_.bytes()));
    metrics_.set_gauge("tessera_serve_search_queue", "Searches waiting for a round.",
                       static_cast<double>(batcher_.queued()));
    return {200, "text/plain; version=0.0.4", metrics_.text(), {}};
  }
  const std::string api = "/api/v1/";
  if (path.rfind(api, 0) == 0) {
    const std::string rest = path.substr(api.size());
    if (rest == "info") {
      name = "info";
      return get ? info(*front) : method_not_allowed();
    }
    if (rest == "slides") {
      name = "slides";
      return get ? slides(*front, request) : method_not_allowed();
    }
    if (rest == "search") {
      name = "search";
      return post ? search(*front, request) : method_not_allowed();
    }
    if (rest == "similar-slides" || rest == "similar-patients") {
      name = rest == "similar-slides" ? "similar_slides" : "similar_patients";
      if (!post) return method_not_allowed();
      return similar(*front, request, rest == "similar-slides" ? "slide" : "patient");
    }
    if (rest == "mosaic-vote") {
      name = "mosaic_vote";
      return post ? mosaic_vote(*front, request) : method_not_allowed();
    }
    if (rest == "heatmap") {
      name = "heatmap";
      return post ? heatmap(*front, request) : method_not_allowed();
    }
    if (rest.rfind("patches/", 0) == 0 && ends_with(rest, ".jpeg")) {
      name = "patch";
      if (!get) return method_not_allowed();
      return patch(*front, rest.substr(8, rest.size() - 8 - 5));
    }
    if (rest.rfind("slides/", 0) == 0) {
      name = "slide";
      if (!get) return method_not_allowed();
      return slide_resource(*front, rest.substr(7), name);
    }
    return error_response(404, fmt::format("no API route {}", path));
  }
  name = "static";
  if (!get) return method_not_allowed();
  const auto it = files_.find(path == "/" ? "/index.html" : path);
  if (it == files_.end()) return error_response(404, fmt::format("no page file {}", path));
  return {200, content_type(it->first), it->second, {}};
}

Response Api::info(const Front& front) {
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

Response Api::slides(const Front& front, const Request& request) {
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

std::pair<std::vector<float>, json> Api::resolve(const Front& front, const QuerySpec& spec,
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

Response Api::search(const Front& front, const Request& request) {
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

Response Api::heatmap(const Front& front, const Request& request) {
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

Response Api::patch(const Front& front, const std::string& id) {
  const auto patch_id = parse_id(id);
  if (!patch_id) fail<InvalidInput>("'{}' is not a patch id", id);
  const std::string key = fmt::format("p/{}/{}", front.generation(), *patch_id);
  if (auto hit = tiles_.get(key)) return jpeg_response(hit);
  const auto p = front.find(*patch_id);
  if (!p) throw NotFound(fmt::format("unknown patch id {}", *patch_id));
  std::string why;
  const Image8 image = front.pixels(*p, &why);
  if (image.pixels.empty()) {
    throw Unavailable(fmt::format("the pixels of patch {} cannot be read: {}", *patch_id, why));
  }
  const std::vector<uint8_t> jpeg = encode_jpeg(image.pixels.data(), image.width, image.height, 90);
  auto bytes = std::make_shared<const std::string>(jpeg.begin(), jpeg.end());
  tiles_.put(key, bytes);
  return jpeg_response(bytes);
}

Response Api::slide_resource(const Front& front, const std::string& rest, std::string& name) {
  std::string id;
  int level = -1;
  int64_t col = -1, row = -1;
  enum { kDzi, kTile, kThumbnail } kind;
  if (ends_with(rest, ".dzi")) {
    name = "dzi";
    kind = kDzi;
    id = rest.substr(0, rest.size() - 4);
  } else if (ends_with(rest, "/thumbnail.jpeg")) {
    name = "thumbnail";
    kind = kThumbnail;
    id = rest.substr(0, rest.size() - 15);
  } else {
    name = "tile";
    kind = kTile;
    const size_t files = rest.rfind("_files/");
    if (files == std::string::npos || !ends_with(rest, ".jpeg")) {
      throw NotFound(fmt::format("no slide resource '{}'", rest));
    }
    id = rest.substr(0, files);
    const std::string tile = rest.substr(files + 7, rest.size() - files - 7 - 5);  // L/C_R
    const size_t slash = tile.find('/'), under = tile.find('_');
    if (slash == std::string::npos || under == std::string::npos || under < slash) {
      fail<InvalidInput>("'{}' is not a tile name LEVEL/COL_ROW.jpeg", tile);
    }
    const auto l = parse_id(tile.substr(0, slash));
    const auto c = parse_id(tile.substr(slash + 1, under - slash - 1));
    const auto r = parse_id(tile.substr(under + 1));
    if (!l || !c || !r || *l > 62) fail<InvalidInput>("'{}' is not a tile name LEVEL/COL_ROW.jpeg", tile);
    level = static_cast<int>(*l);
    col = *c;
    row = *r;
  }
  const auto s = front.slide_index(id);
  if (!s) throw NotFound(fmt::format("unknown slide '{}'", id));
  const std::string key = fmt::format("t/{}/{}/{}/{}/{}", front.generation(), *s, kind == kThumbnail ? -1 : level, col, row);
  if (kind != kDzi) {
    if (auto hit = tiles_.get(key)) return jpeg_response(hit);
  }
  std::shared_ptr<const Slide> slide;
  try {
    slide = front.slide(*s);
  } catch (const Error& e) {
    throw Unavailable(fmt::format("slide '{}' cannot be opened: {}", id, e.what()));
  }
  const DeepZoom zoom(slide->width(), slide->height());
  if (kind == kDzi) {
    Response r{200, "application/xml", zoom.dzi(), {}};
    json size = {{"width", slide->width()}, {"height", slide->height()}};
    r.headers.emplace_back("X-Slide-Size", size.dump());
    return r;
  }
  if (kind == kThumbnail) {
    level = zoom.level_for(kTileSize);
    col = row = 0;
    // The whole slide in one tile when its longer side fits one.
    while (level > 0 && (zoom.columns(level) > 1 || zoom.rows(level) > 1)) --level;
  }
  if (!zoom.has_tile(level, col, row)) {
    throw NotFound(fmt::format("slide '{}' has no tile {}/{}_{} (levels 0..{})", id, level, col, row,
                               zoom.max_level()));
  }
  const TileRect t = zoom.tile(level, col, row);
  const std::vector<uint8_t> rgb = render_tile(*slide, zoom, level, col, row, kMaxTileReadPixels);
  const std::vector<uint8_t> jpeg = encode_jpeg(rgb.data(), t.w, t.h, 85);
  auto bytes = std::make_shared<const std::string>(jpeg.begin(), jpeg.end());
  tiles_.put(key, bytes);
  return jpeg_response(bytes);
}

}  // namespace tessera::serve
