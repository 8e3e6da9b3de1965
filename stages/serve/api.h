// serve's HTTP API as a function of a parsed request and the resident state: no sockets here (the
// HTTP library only moves bytes; http_server.h), so every route is unit-tested directly. Api is
// defined in api.cpp (the route table), api_request.cpp (body parsing), api_access.cpp (auth,
// static files), api_search.cpp (patch-level search), slide_api.cpp (slide- and case-level
// search) and api_tiles.cpp (patches, DeepZoom tiles, thumbnails).
//
//   GET  /healthz, /metrics
//   GET  /api/v1/info
//   GET  /api/v1/slides[?q=TEXT][&filter=EXPR]
//   POST /api/v1/search    {patch_id | slide_id,x,y | vector | image, k, filter, nprobe,
//                           exclude_same_slide, exclude_same_patient}
//   POST /api/v1/heatmap   {target: SLIDE_ID, and a query as for search}
//   POST /api/v1/similar-slides    {slide_id, k, exclude_same_patient, index}   (slide_indexes.h)
//   POST /api/v1/similar-patients  {patient_id, k, exclude_same_patient, index}
//   POST /api/v1/mosaic-vote       {slide_id, k, top, filter, nprobe, exclude_same_patient,
//                                   mosaic_percent, mosaic_min}
//   GET  /api/v1/patches/<patch_id>.jpeg
//   GET  /api/v1/slides/<slide_id>.dzi, /api/v1/slides/<slide_id>_files/<level>/<col>_<row>.jpeg
//   GET  /api/v1/slides/<slide_id>/thumbnail.jpeg
//   GET  /, /<file of the web page>
// Every error is a 4xx/5xx with {"error": {"code": STATUS, "message": TEXT}}.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/serve/batcher.h"
#include "stages/serve/config.h"
#include "stages/serve/generation_view.h"
#include "stages/serve/lru_cache.h"
#include "stages/serve/metrics.h"
#include "stages/serve/slide_indexes.h"

namespace tessera::serve {

struct Request {
  std::string method;  // GET, POST, ...
  std::string path;    // decoded, without the query string
  std::multimap<std::string, std::string> params;  // decoded query string
  std::string body;
  std::string authorization;  // the Authorization header
  std::string cookie;         // the Cookie header
  std::string param(const std::string& name) const;
};

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

// A 4xx/5xx answer with the JSON error body.
Response error_response(int status, const std::string& message);

// A query as a search or heatmap body gives it, checked against the limits (not yet against the
// index).
struct QuerySpec {
  std::optional<int64_t> patch_id;
  std::string slide_id;
  int64_t x = 0, y = 0;
  std::vector<int64_t> box;  // with slide_id: x, y, w, h (level 0): the mean of its patches
  std::vector<float> vector;
  std::string image;  // decoded bytes of a PNG or JPEG
  int k = 10;
  int nprobe = 0;
  std::string filter;
  bool exclude_same_slide = false;
  bool exclude_same_patient = false;
};

// Parses a search or heatmap body. Throws InvalidInput naming the field for a body that is not a
// JSON object, no query source or several, wrong types, k outside 1..limits.max_k, a filter longer
// than limits.max_filter_chars, a vector with a non-finite value, an image that is not base64.
QuerySpec parse_query(const std::string& body, const Limits& limits);

// A similar-slides or similar-patients body: the id (field `id_field`: "slide_id" or
// "patient_id"), k (1..limits.max_k), exclude_same_patient, and optionally the index's name.
struct SimilarSpec {
  std::string id;
  int k = 10;
  bool exclude_same_patient = false;
  std::string index;  // "": the first index of the level
};
// Throws InvalidInput naming the field, as parse_query does.
SimilarSpec parse_similar(const std::string& body, const char* id_field, const Limits& limits);

// A mosaic-vote body: the slide, k (1..limits.max_k: the hits of each mosaic patch), top
// (1..limits.max_k: the slides and patients listed; default k, as query lists k), filter, nprobe,
// exclude_same_patient, and the mosaic rule (mosaic_percent in (0, 100], mosaic_min 1..256) as
// query's --mosaic-percent and --mosaic-min.
struct VoteSpec {
  std::string slide_id;
  int k = 10;
  int top = 10;
  int nprobe = 0;
  std::string filter;
  bool exclude_same_patient = false;
  double mosaic_percent = 5.0;
  int mosaic_min = 8;
};
// Throws InvalidInput naming the field.
VoteSpec parse_vote(const std::string& body, const Limits& limits);

// Compares in time independent of where the strings differ.
bool constant_time_equal(const std::string& a, const std::string& b);

// The value of the first cookie named exactly `name` in a Cookie header ("a=1; b=2": pairs split
// at ';', blanks around names and values ignored), or nullopt when there is none.
std::optional<std::string> cookie_value(const std::string& header, const std::string& name);

class Api {
 public:
  // `files` are the web page's files by request path ("/index.html", "/app.js",
  // "/vendor/openseadragon/openseadragon.min.js", ...); "/" serves "/index.html". `token` empty:
  // no authentication. `slide_indexes`: the slide- and patient-level indexes served (none when
  // null).
  Api(std::shared_ptr<const GenerationView> front, Batcher& batcher, Metrics& metrics,
      const Config& config, std::map<std::string, std::string> files, std::string token, int ranks,
      std::shared_ptr<const SlideIndexes> slide_indexes = nullptr);

  // Answers one request. Thread-safe; never throws.
  Response handle(const Request& request);
  // Counts an answer the HTTP layer gave itself (a refused head or body: route "edge"), so that
  // every answer is in /metrics. Thread-safe.
  void count_edge_answer(int status) { metrics_.request("edge", status, 0.0); }

  // Swaps in a new generation; requests already running finish with the one they started with.
  void set_front(std::shared_ptr<const GenerationView> front);
  std::shared_ptr<const GenerationView> front() const;

  // Reads every file under `dir` into the map Api takes (paths relative to dir, with a leading
  // '/'). Throws IoError naming the directory when it has no index.html.
  static std::map<std::string, std::string> load_files(const std::string& dir);

 private:
  Response route(const Request& request, const std::string& path, std::string& name);
  Response info(const GenerationView& front);
  Response slides(const GenerationView& front, const Request& request);
  Response search(const GenerationView& front, const Request& request);
  Response heatmap(const GenerationView& front, const Request& request);
  // slide_api.cpp: similar slides or patients (`level`) over a slide index, and mosaic voting
  // over the resident patch index (its searches go through the batcher's collective rounds).
  Response similar(const GenerationView& front, const Request& request, const std::string& level);
  Response mosaic_vote(const GenerationView& front, const Request& request);
  // Submits `jobs` to the rounds, stamped `generation` (that of the GenerationView the request
  // resolved its query against: they are searched in that generation or not at all), and waits for
  // all of their hits (at most the request timeout). Throws InvalidInput for a search every rank
  // refused, Unavailable (503) otherwise (also when that generation was replaced meanwhile).
  std::vector<std::vector<search::Hit>> run_jobs(std::vector<SearchJob> jobs, int generation);
  Response patch(const GenerationView& front, const std::string& id);
  Response slide_resource(const GenerationView& front, const std::string& rest, std::string& name);
  // The query vector of `spec` (normalised as the catalog says), and the slide of its stored
  // patch (-1 for a vector or an image). Throws InvalidInput (400) / NotFound (404).
  std::pair<std::vector<float>, nlohmann::json> resolve(const GenerationView& front,
                                                        const QuerySpec& spec, int32_t* slide);
  // api_access.cpp: the bearer token or the page's cookie, and the page's file at `path`.
  bool authorized(const Request& request) const;
  Response static_file(const std::string& path) const;

  mutable std::mutex front_mutex_;
  std::shared_ptr<const GenerationView> front_;
  Batcher& batcher_;
  Metrics& metrics_;
  Config config_;
  std::map<std::string, std::string> files_;
  std::string token_;
  int ranks_;
  LruCache tiles_;
  std::shared_ptr<const SlideIndexes> slide_indexes_;
};

}  // namespace tessera::serve
