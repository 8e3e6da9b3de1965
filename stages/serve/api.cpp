// Api's route table (api.h): authentication and the body limit first, then each path to its
// route, every failure to its status with the JSON error body. The routes are in api_search.cpp,
// slide_api.cpp, api_tiles.cpp and api_access.cpp (static files); request parsing in
// api_request.cpp.
#include "stages/serve/api.h"

#include <chrono>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/strings.h"
#include "stages/serve/api_internal.h"
#include "stages/serve/http_errors.h"

namespace tessera::serve {

using Clock = std::chrono::steady_clock;

Api::Api(std::shared_ptr<const GenerationView> front, Batcher& batcher, Metrics& metrics,
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

void Api::set_front(std::shared_ptr<const GenerationView> front) {
  std::lock_guard<std::mutex> lock(front_mutex_);
  front_ = std::move(front);
  tiles_.clear();
}

std::shared_ptr<const GenerationView> Api::front() const {
  std::lock_guard<std::mutex> lock(front_mutex_);
  return front_;
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
  const std::shared_ptr<const GenerationView> front = this->front();
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
  return static_file(path);
}

}  // namespace tessera::serve
