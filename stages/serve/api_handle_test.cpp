// serve's Api::handle route by route on the tiny in-process cohort (three slides, 64 px patches,
// vit-tiny, three Flat shards; pipeline.h): no sockets, no mpirun. A thread answers the batcher's
// searches with search_round over every shard, as rank 0's main thread does at R = 1. Each route
// is checked for its answer and for the errors it owes (400, 401, 404, 405, 413), and /metrics
// for counting every answer under its route.
#include <atomic>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/mpi/comm.h"
#include "common/search/rank_shards.h"
#include "common/store/index.h"
#include "stages/serve/api.h"
#include "stages/serve/batcher.h"
#include "stages/serve/generation_view.h"
#include "stages/serve/metrics.h"
#include "tests/inprocess/pipeline.h"
#include "tests/inprocess/support.h"

namespace tessera::inprocess {
namespace {

using nlohmann::json;

constexpr const char* kToken = "route-test-token";
constexpr size_t kMaxBody = 4096;

// The resident state of a one-rank service over the suite's index, and Api over it.
class Service {
 public:
  explicit Service(const std::string& index)
      : shards_(index, 0, 1, false, VerifyLevel::kCheap) {
    config_.index = index;
    config_.threads = 1;
    config_.limits.max_body_bytes = kMaxBody;
    api_ = std::make_unique<serve::Api>(
        std::make_shared<const serve::GenerationView>(shards_.catalog(), shards_.slides(),
                                                      shards_.rows(), 0),
        batcher_, metrics_, config_,
        std::map<std::string, std::string>{{"/index.html", "<html>page</html>"},
                                           {"/app.js", "let x = 1;"}},
        kToken, 1);
    rounds_ = std::thread([this] {
      SerialComm comm;
      while (!stop_) {
        auto batch = batcher_.take(std::chrono::milliseconds(20), std::chrono::milliseconds(1), 64);
        if (batch.empty()) continue;
        std::vector<serve::SearchJob> jobs;
        for (const auto& p : batch) jobs.push_back(p.job);
        try {
          batcher_.answer(batch, search::search_round(comm, shards_, jobs, 1));
        } catch (...) {
          batcher_.answer_with_error(batch, std::current_exception());
        }
      }
    });
  }
  ~Service() {
    stop_ = true;
    rounds_.join();
    batcher_.close();
  }

  serve::Response call(const std::string& method, const std::string& path,
                       const std::string& body = "",
                       const std::multimap<std::string, std::string>& params = {},
                       const std::string& authorization = std::string("Bearer ") + kToken,
                       const std::string& cookie = "") {
    serve::Request r;
    r.method = method;
    r.path = path;
    r.params = params;
    r.body = body;
    r.authorization = authorization;
    r.cookie = cookie;
    return api_->handle(r);
  }
  serve::Response get(const std::string& path,
                      const std::multimap<std::string, std::string>& params = {}) {
    return call("GET", path, "", params);
  }
  serve::Response post(const std::string& path, const json& body) {
    return call("POST", path, body.dump());
  }
  const search::RankShards& shards() const { return shards_; }

 private:
  search::RankShards shards_;
  serve::Config config_;
  serve::Batcher batcher_;
  serve::Metrics metrics_;
  std::unique_ptr<serve::Api> api_;
  std::atomic<bool> stop_{false};
  std::thread rounds_;
};

class ServeApiRoutes : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    log_with_rank_tags();
    dir_ = new ScratchDir("inprocess_serve_api");
    make_upstream(dir_->path().string(), run_dir(), true);
    service_ = new Service(run_dir() + "/ingest/flat");
  }
  static void TearDownTestSuite() {
    delete service_;
    service_ = nullptr;
    delete dir_;
    dir_ = nullptr;
  }
  static std::string run_dir() { return *dir_ / "run"; }
  // The first patch of the run's patch index, and its slide's id.
  static std::pair<int64_t, std::string> first_patch() {
    const IndexInfo info = load_index_info(run_dir() + "/patchgen");
    const IndexRows rows = IndexReader(info.path).read_range(0, 1);
    return {rows.patch_id.at(0), info.slides.slide_id.at(rows.slide.at(0))};
  }
  static Service& s() { return *service_; }

  static ScratchDir* dir_;
  static Service* service_;
};

ScratchDir* ServeApiRoutes::dir_ = nullptr;
Service* ServeApiRoutes::service_ = nullptr;

json body_of(const serve::Response& r) { return json::parse(r.body); }

// The message of a JSON error answer ("" for another body).
std::string error_of(const serve::Response& r) {
  const json j = json::parse(r.body, nullptr, false);
  return j.is_object() && j.contains("error") ? j["error"].value("message", "") : "";
}

bool is_jpeg(const serve::Response& r) {
  return r.content_type == "image/jpeg" && r.body.size() > 4 &&
         static_cast<unsigned char>(r.body[0]) == 0xff && static_cast<unsigned char>(r.body[1]) == 0xd8;
}

std::string header(const serve::Response& r, const std::string& name) {
  for (const auto& [key, value] : r.headers) {
    if (key == name) return value;
  }
  return "";
}

TEST_F(ServeApiRoutes, HealthzNeedsNoTokenAndEverythingElseDoes) {
  auto r = s().call("GET", "/healthz", "", {}, "");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(body_of(r).at("status"), "ok");
  EXPECT_EQ(body_of(r).at("generation"), 0);
  for (const std::string path : {"/api/v1/info", "/metrics", "/", "/api/v1/slides/a.dzi"}) {
    r = s().call("GET", path, "", {}, "");
    EXPECT_EQ(r.status, 401) << path;
    EXPECT_EQ(header(r, "WWW-Authenticate"), "Bearer") << path;
    EXPECT_EQ(s().call("GET", path, "", {}, "Bearer wrong-token").status, 401) << path;
  }
  EXPECT_EQ(s().call("GET", "/api/v1/info", "", {}, std::string("Bearer ") + kToken).status, 200);
  EXPECT_EQ(s().call("GET", "/api/v1/info", "", {}, "", std::string("tessera_token=") + kToken).status,
            200);
  EXPECT_EQ(s().call("GET", "/api/v1/info", "", {}, "", std::string("xtessera_token=") + kToken).status,
            401);
}

TEST_F(ServeApiRoutes, ABodyOverTheLimitIs413) {
  const serve::Response r = s().call("POST", "/api/v1/search", std::string(kMaxBody + 1, ' '));
  EXPECT_EQ(r.status, 413);
  EXPECT_NE(error_of(r).find("the limit is 4096"), std::string::npos) << r.body;
}

TEST_F(ServeApiRoutes, InfoDescribesTheIndex) {
  const serve::Response r = s().get("/api/v1/info");
  ASSERT_EQ(r.status, 200) << r.body;
  const json info = body_of(r);
  EXPECT_EQ(info.at("shards"), 3);
  EXPECT_EQ(info.at("ranks"), 1);
  EXPECT_EQ(info.at("rows").get<int64_t>(), s().shards().rows());
  EXPECT_EQ(info.at("dimension").get<int>(), s().shards().catalog().dim);
  EXPECT_EQ(info.at("slides"), 3);
  EXPECT_EQ(info.at("service_generation"), 0);
  EXPECT_EQ(info.at("limits").at("max_body_bytes"), kMaxBody);
  EXPECT_EQ(s().call("POST", "/api/v1/info", "{}").status, 405);
}

TEST_F(ServeApiRoutes, SlidesAreListedAndFiltered) {
  serve::Response r = s().get("/api/v1/slides");
  ASSERT_EQ(r.status, 200) << r.body;
  const json all = body_of(r);
  ASSERT_EQ(all.at("count"), 3);
  int64_t patches = 0;
  for (const json& slide : all.at("slides")) patches += slide.at("patches").get<int64_t>();
  EXPECT_EQ(patches, s().shards().rows());
  EXPECT_EQ(all.at("slides")[0].at("slide_id"), "a");
  EXPECT_EQ(all.at("slides")[0].at("metadata").at("site"), "lung");
  EXPECT_EQ(body_of(s().get("/api/v1/slides", {{"q", "P1"}})).at("count"), 2);
  r = s().get("/api/v1/slides", {{"filter", "site = lung"}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::set<std::string> lung;
  const json body1 = body_of(r);  // kept: the loop refers into it
  for (const json& slide : body1.at("slides")) lung.insert(slide.at("slide_id"));
  EXPECT_EQ(lung, (std::set<std::string>{"a", "c"})) << r.body;
  r = s().get("/api/v1/slides", {{"filter", "nosuch = 1"}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_of(r).find("nosuch"), std::string::npos) << r.body;
  EXPECT_EQ(s().get("/api/v1/slides", {{"q", std::string(5000, 'x')}}).status, 400);
}

TEST_F(ServeApiRoutes, SearchFindsAStoredPatchFirstAndHonoursItsOptions) {
  const auto [patch, slide] = first_patch();
  serve::Response r = s().post("/api/v1/search", {{"patch_id", patch}, {"k", 5}});
  ASSERT_EQ(r.status, 200) << r.body;
  json answer = body_of(r);
  ASSERT_EQ(answer.at("hits").size(), 5u);
  EXPECT_EQ(answer.at("hits")[0].at("patch_id"), patch);
  EXPECT_EQ(answer.at("query").at("slide_id"), slide);
  const double sign = answer.at("metric") == "ip" ? -1 : 1;  // ip: descending; l2: ascending
  for (size_t i = 1; i < answer.at("hits").size(); ++i) {
    EXPECT_GE(sign * answer["hits"][i]["score"].get<double>(),
              sign * answer["hits"][i - 1]["score"].get<double>());
  }

  r = s().post("/api/v1/search", {{"patch_id", patch}, {"k", 20}, {"exclude_same_slide", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  answer = body_of(r);
  EXPECT_FALSE(answer.at("hits").empty());
  for (const json& h : answer.at("hits")) EXPECT_NE(h.at("slide_id"), slide);

  r = s().post("/api/v1/search", {{"patch_id", patch}, {"k", 20}, {"filter", "site = colon"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body2 = body_of(r);  // kept: the loop refers into it
  for (const json& h : body2.at("hits")) EXPECT_EQ(h.at("slide_id"), "b");

  r = s().post("/api/v1/search", {{"slide_id", slide}, {"x", 0}, {"y", 0}, {"k", 3}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(body_of(r).at("hits").size(), 3u);

  const int dim = s().shards().catalog().dim;
  r = s().post("/api/v1/search", {{"vector", std::vector<float>(dim, 0.5f)}, {"k", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(body_of(r).at("hits").size(), 2u);
}

TEST_F(ServeApiRoutes, SearchRefusesWhatItCannotAnswer) {
  const auto [patch, slide] = first_patch();
  EXPECT_EQ(s().get("/api/v1/search").status, 405);
  serve::Response r = s().post("/api/v1/search", {{"patch_id", int64_t{1} << 40}});
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(error_of(r).find("unknown patch id"), std::string::npos) << r.body;
  r = s().post("/api/v1/search", {{"slide_id", "nosuch"}, {"x", 0}, {"y", 0}});
  EXPECT_EQ(r.status, 404);
  r = s().post("/api/v1/search", {{"vector", {1.0, 2.0}}});
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_of(r).find("dimension"), std::string::npos) << r.body;
  r = s().post("/api/v1/search", {{"vector", std::vector<float>(s().shards().catalog().dim, 1.0f)},
                                  {"exclude_same_slide", true}});
  EXPECT_EQ(r.status, 400);
  r = s().post("/api/v1/search", {{"patch_id", patch}, {"filter", "nosuch = 1"}});
  EXPECT_EQ(r.status, 400);
  r = s().call("POST", "/api/v1/search", "{\"patch_id\": ");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(error_of(r).find("not JSON"), std::string::npos) << r.body;
}

TEST_F(ServeApiRoutes, HeatmapScoresEveryPatchOfItsTarget) {
  const auto [patch, slide] = first_patch();
  serve::Response r = s().post("/api/v1/heatmap", {{"target", "c"}, {"patch_id", patch}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json map = body_of(r);
  const json slides = body_of(s().get("/api/v1/slides", {{"q", "c"}})).at("slides");
  ASSERT_EQ(slides.size(), 1u);
  EXPECT_EQ(map.at("patches").size(), slides[0].at("patches").get<size_t>());
  EXPECT_EQ(map.at("slide_id"), "c");
  EXPECT_EQ(map.at("higher_is_better").get<bool>(), map.at("metric") == "ip");
  for (const json& row : map.at("patches")) {
    EXPECT_GE(row[2].get<double>(), map.at("min").get<double>());
    EXPECT_LE(row[2].get<double>(), map.at("max").get<double>());
  }
  // On the query's own slide, the query patch scores as the search scores it against itself.
  const json self = body_of(s().post("/api/v1/search", {{"patch_id", patch}, {"k", 1}})).at("hits")[0];
  r = s().post("/api/v1/heatmap", {{"target", slide}, {"patch_id", patch}});
  ASSERT_EQ(r.status, 200) << r.body;
  bool found = false;
  const json body3 = body_of(r);  // kept: the loop refers into it
  for (const json& row : body3.at("patches")) {
    if (row[0] != self.at("x") || row[1] != self.at("y")) continue;
    found = true;
    EXPECT_NEAR(row[2].get<double>(), self.at("score").get<double>(),
                1e-4 * (1 + std::abs(self.at("score").get<double>())));
  }
  EXPECT_TRUE(found) << "no row at the query patch " << self.dump() << "\n" << r.body.substr(0, 600);
  EXPECT_EQ(s().post("/api/v1/heatmap", {{"patch_id", patch}}).status, 400);
  EXPECT_EQ(s().post("/api/v1/heatmap", {{"target", "nosuch"}, {"patch_id", patch}}).status, 404);
  EXPECT_EQ(s().get("/api/v1/heatmap").status, 405);
}

TEST_F(ServeApiRoutes, SlideSearchesWithoutASlideIndexSayHowToMakeOne) {
  serve::Response r = s().post("/api/v1/similar-slides", {{"slide_id", "a"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(error_of(r).find("holds no slide-level index"), std::string::npos) << r.body;
  r = s().post("/api/v1/similar-patients", {{"patient_id", "P1"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(error_of(r).find("--level patient"), std::string::npos) << r.body;
  EXPECT_EQ(s().get("/api/v1/similar-slides").status, 405);
  EXPECT_EQ(s().post("/api/v1/similar-slides", {{"k", 3}}).status, 400);
}

TEST_F(ServeApiRoutes, MosaicVoteRanksTheOtherSlides) {
  serve::Response r = s().post("/api/v1/mosaic-vote", {{"slide_id", "a"}, {"k", 5}, {"mosaic_min", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json votes = body_of(r);
  ASSERT_FALSE(votes.at("slides").empty()) << r.body;
  for (const json& v : votes.at("slides")) EXPECT_NE(v.at("slide_id"), "a") << "a slide voted for itself";
  r = s().post("/api/v1/mosaic-vote", {{"slide_id", "a"}, {"exclude_same_patient", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json body4 = body_of(r);  // kept: the loop refers into it
  for (const json& v : body4.at("slides")) EXPECT_EQ(v.at("slide_id"), "c");
  EXPECT_EQ(s().post("/api/v1/mosaic-vote", {{"slide_id", "nosuch"}}).status, 404);
  EXPECT_EQ(s().post("/api/v1/mosaic-vote", {{"slide_id", "a"}, {"mosaic_min", 0}}).status, 400);
  EXPECT_EQ(s().get("/api/v1/mosaic-vote").status, 405);
}

TEST_F(ServeApiRoutes, PatchesAreJpegsOfKnownIds) {
  const auto [patch, slide] = first_patch();
  serve::Response r = s().get(fmt::format("/api/v1/patches/{}.jpeg", patch));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(is_jpeg(r));
  EXPECT_EQ(header(r, "Cache-Control"), "private, max-age=3600");
  EXPECT_EQ(s().get(fmt::format("/api/v1/patches/{}.jpeg", patch)).body, r.body) << "cached";
  EXPECT_EQ(s().get("/api/v1/patches/abc.jpeg").status, 400);
  EXPECT_EQ(s().get("/api/v1/patches/99999999999999999999.jpeg").status, 400);
  EXPECT_EQ(s().get(fmt::format("/api/v1/patches/{}.jpeg", int64_t{1} << 40)).status, 404);
  EXPECT_EQ(s().call("POST", fmt::format("/api/v1/patches/{}.jpeg", patch), "{}").status, 405);
}

TEST_F(ServeApiRoutes, SlidesServeDeepZoom) {
  serve::Response r = s().get("/api/v1/slides/b.dzi");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/xml");
  EXPECT_NE(r.body.find("Width=\"800\""), std::string::npos) << r.body;  // s1.tif: 800 x 600
  EXPECT_EQ(json::parse(header(r, "X-Slide-Size")), (json{{"width", 800}, {"height", 600}}));
  r = s().get("/api/v1/slides/b_files/10/0_0.jpeg");  // 800 px: level 10 is full resolution
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(is_jpeg(r));
  r = s().get("/api/v1/slides/b/thumbnail.jpeg");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(is_jpeg(r));
  r = s().get("/api/v1/slides/b_files/10/9_9.jpeg");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(error_of(r).find("has no tile 10/9_9"), std::string::npos) << r.body;
  EXPECT_EQ(s().get("/api/v1/slides/b_files/10/0-0.jpeg").status, 400);
  EXPECT_EQ(s().get("/api/v1/slides/b_files/99/0_0.jpeg").status, 400);
  EXPECT_EQ(s().get("/api/v1/slides/b.png").status, 404);
  EXPECT_EQ(s().get("/api/v1/slides/nosuch.dzi").status, 404);
  EXPECT_EQ(s().call("POST", "/api/v1/slides/b.dzi", "{}").status, 405);
}

TEST_F(ServeApiRoutes, StaticFilesAndUnknownRoutes) {
  serve::Response r = s().get("/");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "<html>page</html>");
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  r = s().get("/app.js");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(s().get("/nosuch.css").status, 404);
  EXPECT_EQ(s().call("POST", "/", "{}").status, 405);
  r = s().get("/api/v1/nosuch");
  EXPECT_EQ(r.status, 404);
  EXPECT_NE(error_of(r).find("no API route /api/v1/nosuch"), std::string::npos) << r.body;
}

TEST_F(ServeApiRoutes, MetricsCountEveryAnswerByRoute) {
  s().get("/api/v1/info");
  s().get("/api/v1/nosuch");
  s().call("GET", "/api/v1/info", "", {}, "");
  const serve::Response r = s().get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4");
  for (const char* line :
       {"tessera_serve_requests_total{route=\"info\",status=\"200\"}",
        "tessera_serve_requests_total{route=\"unknown\",status=\"404\"}",
        "tessera_serve_requests_total{route=\"auth\",status=\"401\"}",
        "tessera_serve_index_rows "}) {
    EXPECT_NE(r.body.find(line), std::string::npos) << line << "\n" << r.body;
  }
}

}  // namespace
}  // namespace tessera::inprocess
