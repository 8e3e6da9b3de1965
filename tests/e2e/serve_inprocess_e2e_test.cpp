// serve end to end, in process: every route of the API through Api::handle over the resident
// state of the e2e cohort's index (no sockets), bad inputs included, slide and case searches equal
// to query's, which slide indexes are served, and the token. Part of serve_e2e_test (its main and
// cohort are in serve_e2e_test.cpp; what it compares in serve_compare.h).
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <random>
#include <set>
#include <tuple>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/mpi/comm.h"
#include "common/store/index.h"
#include "stages/serve/api.h"
#include "stages/serve/image_query.h"
#include "common/search/rank_shards.h"
#include "tests/e2e/cohort.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/serve_cohort.h"
#include "tests/e2e/serve_compare.h"
#include "tests/e2e/serve_service.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {
namespace {

using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// In process: Api::handle over the resident state, a thread running the rounds.

class InProcess {
 public:
  explicit InProcess(const std::string& token = "", const std::string& slide_index = "auto")
      : shards_(OneRun::index("flat"), 0, 1, true, VerifyLevel::kCheap) {
    config_.index = OneRun::index("flat");
    auto front = std::make_shared<const serve::GenerationView>(shards_.catalog(), shards_.slides(), shards_.rows(), 0);
    api_ = std::make_unique<serve::Api>(
        front, batcher_, metrics_, config_,
        std::map<std::string, std::string>{{"/index.html", "<html></html>"}}, token, 1,
        std::make_shared<const serve::SlideIndexes>(
            serve::SlideIndexes::load(slide_index, shards_.catalog())));
    rounds_ = std::thread([this] {
      SerialComm comm;
      while (!stop_) {
        auto pending = batcher_.take(std::chrono::milliseconds(20), std::chrono::milliseconds(1), 64);
        if (pending.empty()) continue;
        std::vector<search::SearchJob> jobs;
        for (auto& p : pending) jobs.push_back(p.job);
        try {
          auto hits = search::search_round(comm, shards_, jobs, 1);
          for (size_t i = 0; i < pending.size(); ++i) pending[i].result.set_value(hits[i]);
        } catch (...) {
          for (auto& p : pending) p.result.set_exception(std::current_exception());
        }
      }
    });
  }
  ~InProcess() {
    stop_ = true;
    rounds_.join();
  }
  serve::Response get(const std::string& path, const std::multimap<std::string, std::string>& params = {},
                      const std::string& auth = "", const std::string& cookie = "") {
    serve::Request r;
    r.method = "GET";
    r.path = path;
    r.params = params;
    r.authorization = auth;
    r.cookie = cookie;
    return api_->handle(r);
  }
  serve::Response post(const std::string& path, const std::string& body, const std::string& auth = "") {
    return request("POST", path, body, auth);
  }
  serve::Response request(const std::string& method, const std::string& path,
                          const std::string& body, const std::string& auth = "") {
    serve::Request r;
    r.method = method;
    r.path = path;
    r.body = body;
    r.authorization = auth;
    return api_->handle(r);
  }

 private:
  search::RankShards shards_;
  serve::Config config_;
  serve::Batcher batcher_;
  serve::Metrics metrics_;
  std::unique_ptr<serve::Api> api_;
  std::atomic<bool> stop_{false};
  std::thread rounds_;
};

json body_of(const serve::Response& r) { return json::parse(r.body); }

std::string base64(const std::string& bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i < bytes.size()) {
    uint32_t v = uint8_t(bytes[i]) << 16;
    if (i + 1 < bytes.size()) v |= uint8_t(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

TEST(ServeE2E, EveryRouteInProcess) {
  InProcess s;
  auto r = s.get("/healthz");
  EXPECT_EQ(r.status, 200);
  r = s.get("/api/v1/info");
  ASSERT_EQ(r.status, 200) << r.body;
  const json info = body_of(r);
  EXPECT_EQ(info.at("shards"), 3);
  EXPECT_EQ(info.at("ranks"), 1);
  EXPECT_GT(info.at("rows").get<int64_t>(), 100);
  EXPECT_EQ(info.at("dimension"), info.at("dimension").get<int>());

  r = s.get("/api/v1/slides");
  ASSERT_EQ(r.status, 200);
  json slides = body_of(r);
  ASSERT_EQ(slides.at("count"), 4);
  int64_t patches = 0;
  for (const auto& sl : slides.at("slides")) patches += sl.at("patches").get<int64_t>();
  EXPECT_EQ(patches, info.at("rows").get<int64_t>());
  EXPECT_EQ(slides.at("slides")[0].at("metadata").at("site"), "lung");
  EXPECT_EQ(body_of(s.get("/api/v1/slides", {{"q", "P1"}})).at("count"), 2);
  EXPECT_EQ(body_of(s.get("/api/v1/slides", {{"filter", "site = lung and age > 50"}})).at("count"), 1);
  EXPECT_EQ(s.get("/api/v1/slides", {{"filter", "nosuch = 1"}}).status, 400);

  const int64_t patch = some_patches().at(0);
  r = s.post("/api/v1/search", json{{"patch_id", patch}, {"k", 7}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  json result = body_of(r);
  ASSERT_EQ(result.at("hits").size(), 7u);
  EXPECT_EQ(result.at("hits")[0].at("patch_id"), patch);  // itself first
  EXPECT_GT(result.at("hits")[0].at("footprint").get<double>(), 0);
  EXPECT_TRUE(result.at("hits")[0].contains("site"));
  const json at_point = body_of(s.post("/api/v1/search", json{{"slide_id", "c"}, {"x", 700}, {"y", 600}, {"k", 3}}.dump()));
  EXPECT_EQ(at_point.at("query").at("slide_id"), "c");
  EXPECT_EQ(at_point.at("hits").size(), 3u);
  const json box = body_of(s.post("/api/v1/search", json{{"slide_id", "c"}, {"x", 700}, {"y", 600}, {"box", {400, 400, 600, 500}}}.dump()));
  EXPECT_GT(box.at("query").at("patches").get<int>(), 1);
  const std::vector<float> v(info.at("dimension").get<int>(), 0.5f);
  EXPECT_EQ(s.post("/api/v1/search", json{{"vector", v}, {"k", 4}}.dump()).status, 200);

  // Filters and exclusions narrow the hits.
  result = body_of(s.post("/api/v1/search", json{{"patch_id", patch}, {"k", 20}, {"filter", "site = colon"}}.dump()));
  ASSERT_EQ(result.at("hits").size(), 20u);
  for (const auto& h : result.at("hits")) EXPECT_EQ(h.at("site"), "colon");
  result = body_of(s.post("/api/v1/search", json{{"patch_id", patch}, {"k", 20}, {"exclude_same_patient", true}}.dump()));
  const std::string own = body_of(s.post("/api/v1/search", json{{"patch_id", patch}, {"k", 1}}.dump())).at("hits")[0].at("patient_id");
  for (const auto& h : result.at("hits")) EXPECT_NE(h.at("patient_id"), own);

  r = s.get(fmt::format("/api/v1/patches/{}.jpeg", patch));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "image/jpeg");
  EXPECT_EQ(static_cast<unsigned char>(r.body.at(0)), 0xFF);
  // Search by an uploaded image: the patch's own JPEG finds hits (its nearest is itself or a twin).
  if (serve::image_search_available()) {
    r = s.post("/api/v1/search", json{{"image", base64(s.get(fmt::format("/api/v1/patches/{}.jpeg", patch)).body)}, {"k", 5}}.dump());
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(body_of(r).at("hits").size(), 5u);
  }
  r = s.get("/api/v1/slides/a.dzi");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("Width=\"1400\" Height=\"1200\""), std::string::npos) << r.body;
  for (const std::string tile : {"0/0_0", "11/0_0", "11/5_4", "9/1_1"}) {
    r = s.get("/api/v1/slides/a_files/" + tile + ".jpeg");
    EXPECT_EQ(r.status, 200) << tile << r.body;
    EXPECT_EQ(r.content_type, "image/jpeg") << tile;
  }
  EXPECT_EQ(s.get("/api/v1/slides/a/thumbnail.jpeg").status, 200);
  r = s.post("/api/v1/heatmap", json{{"target", "b"}, {"patch_id", patch}}.dump());
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(body_of(r).at("patches").size(), slides.at("slides")[1].at("patches").get<size_t>());
  r = s.get("/metrics");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.body.find("tessera_serve_requests_total{route=\"search\",status=\"200\"}"), std::string::npos);
  EXPECT_NE(r.body.find("tessera_serve_batch_size_count"), std::string::npos);
  EXPECT_EQ(s.get("/").status, 200);
}

TEST(ServeE2E, BadRequestsGetA4xxAndTheServiceGoesOn) {
  InProcess s;
  const int64_t patch = some_patches().at(0);
  const std::vector<std::tuple<std::string, std::string, std::string, int>> cases = {
      {"POST", "/api/v1/search", "{\"patch_id\": ", 400},
      {"POST", "/api/v1/search", json{{"patch_id", 99999999999}}.dump(), 404},
      {"POST", "/api/v1/search", json{{"slide_id", "nosuch"}, {"x", 1}, {"y", 1}}.dump(), 404},
      {"POST", "/api/v1/search", json{{"patch_id", patch}, {"k", 0}}.dump(), 400},
      {"POST", "/api/v1/search", json{{"patch_id", patch}, {"k", 1000000000}}.dump(), 400},
      {"POST", "/api/v1/search", json{{"patch_id", patch}, {"filter", std::string(1 << 20, 'x')}}.dump(), 400},
      {"POST", "/api/v1/search", json{{"patch_id", patch}, {"filter", "site = "}}.dump(), 400},
      {"POST", "/api/v1/search", json{{"patch_id", patch}, {"filter", "nosuch = 1"}}.dump(), 400},
      {"POST", "/api/v1/search", json{{"vector", {1, 2, 3}}}.dump(), 400},
      {"POST", "/api/v1/search", json{{"vector", {1, 2, 3}}, {"exclude_same_slide", true}}.dump(), 400},
      {"POST", "/api/v1/search", json{{"image", "aGVsbG8="}}.dump(), serve::image_search_available() ? 400 : 501},
      {"POST", "/api/v1/heatmap", json{{"target", "../../etc/passwd"}, {"patch_id", patch}}.dump(), 404},
      {"POST", "/api/v1/heatmap", json{{"patch_id", patch}}.dump(), 400},
      // Issue 30: nesting 100,000 deep (serve crashed re-serialising it), a trailing NUL,
      // booleans as numbers, and bytes that are not UTF-8 echoed in the error.
      {"POST", "/api/v1/heatmap", "{\"target\": \"a\", \"patch_id\": 0, \"pad\": " +
           std::string(100000, '[') + std::string(100000, ']') + "}", 400},
      {"POST", "/api/v1/search", json{{"patch_id", patch}}.dump() + std::string(1, '\0'), 400},
      {"POST", "/api/v1/search", "{\"vector\": [true, false, true]}", 400},
      {"POST", "/api/v1/similar-slides", "{\"slide_id\": \"\xff\"}", 400},
      // Non-UTF-8 anywhere else (issue 30, item 7): a key, a bare body, a filter, base64 text
      // with a character beyond ASCII, a path; each a 400 whose message stays valid JSON.
      {"POST", "/api/v1/search", "{\"\xff\": 1}", 400},
      {"POST", "/api/v1/search", "\xff\xfe", 400},
      {"POST", "/api/v1/search", "{\"patch_id\": " + std::to_string(patch) + ", \"filter\": \"site = \xff\"}", 400},
      {"POST", "/api/v1/search", "{\"image\": \"aGVs\\u00ffbG8=\"}", serve::image_search_available() ? 400 : 501},
      {"GET", "/\xff", "", 404},
      {"GET", "/\xc0\xae\xc0\xae/etc/passwd", "", 404},
      {"GET", "/api/v1/search", "", 405},
      {"GET", "/api/v1/patches/../../etc/passwd.jpeg", "", 400},
      {"GET", "/api/v1/patches/-1.jpeg", "", 400},
      {"GET", "/api/v1/patches/99999.jpeg", "", 404},
      {"GET", "/api/v1/slides/../../etc/passwd.dzi", "", 404},
      {"GET", "/api/v1/slides/a_files/../../../etc/passwd", "", 404},
      {"GET", "/api/v1/slides/a_files/12/0_0.jpeg", "", 404},
      {"GET", "/api/v1/slides/a_files/11/99_0.jpeg", "", 404},
      {"GET", "/api/v1/slides/a_files/x/0_0.jpeg", "", 400},
      // Numbers in a path beyond int64_t (issue 30: a 500 from std::stoll).
      {"GET", "/api/v1/patches/9999999999999999999.jpeg", "", 400},
      {"GET", "/api/v1/slides/a_files/11/9999999999999999999_0.jpeg", "", 400},
      {"GET", "/api/v1/slides/a_files/9999999999999999999/0_0.jpeg", "", 400},
      {"GET", "/api/v1/slides/a_files/11/0_9223372036854775807.jpeg", "", 404},
      {"GET", "/api/v1/slides/nosuch/thumbnail.jpeg", "", 404},
      {"GET", "/api/v1/nosuch", "", 404},
      {"GET", "/../../etc/passwd", "", 404},
      {"DELETE", "/api/v1/info", "", 405},
  };
  for (const auto& [method, path, body, status] : cases) {
    const serve::Response r = s.request(method, path, body);
    EXPECT_EQ(r.status, status) << method << " " << path << " " << body.substr(0, 80) << ": " << r.body;
    const json e = body_of(r);
    EXPECT_EQ(e.at("error").at("code"), status) << path;
    EXPECT_FALSE(e.at("error").at("message").get<std::string>().empty()) << path;
  }
  // A query string that is not UTF-8.
  const serve::Response q = s.get("/api/v1/slides", {{"filter", "site = \xff\xc0"}});
  EXPECT_EQ(q.status, 400) << q.body;
  EXPECT_EQ(body_of(q).at("error").at("code"), 400);
  // ... and it still answers.
  EXPECT_EQ(s.post("/api/v1/search", json{{"patch_id", patch}, {"k", 3}}.dump()).status, 200);
}

TEST(ServeE2E, SlideAndCaseSearchInProcessEqualQuery) {
  InProcess s;
  const json info = body_of(s.get("/api/v1/info"));
  const json& indexes = info.at("slide_indexes");
  ASSERT_EQ(indexes.size(), 2u) << info.dump();
  EXPECT_EQ(indexes[0].at("name"), OneRun::kSlideIndex);
  EXPECT_EQ(indexes[0].at("level"), "slide");
  EXPECT_EQ(indexes[0].at("rows"), 4);
  EXPECT_EQ(indexes[1].at("name"), OneRun::kPatientIndex);
  EXPECT_EQ(indexes[1].at("level"), "patient");
  EXPECT_EQ(indexes[1].at("rows"), 3);
  for (const SlideCase& c : slide_cases()) {
    const serve::Response r = s.post(c.path, c.body.dump());
    ASSERT_EQ(r.status, 200) << c.path << " " << c.body.dump() << ": " << r.body;
    expect_same_answer(c, body_of(r), query_json(c.index, c.args), c.path + " " + c.body.dump());
  }
  // What the page shows: labels and metadata of every slide found, a mosaic of the slide.
  const json similar = body_of(s.post("/api/v1/similar-slides", json{{"slide_id", "a"}, {"k", 3}}.dump()));
  ASSERT_EQ(similar.at("hits").size(), 3u);
  for (const auto& h : similar.at("hits")) {
    EXPECT_NE(h.at("slide_id"), "a");
    EXPECT_TRUE(h.contains("site") && h.contains("patient_id") && h.contains("score")) << h.dump();
  }
  const json vote = body_of(s.post("/api/v1/mosaic-vote", json{{"slide_id", "c"}, {"exclude_same_patient", true}}.dump()));
  for (const auto& v : vote.at("slides")) {
    EXPECT_NE(v.at("patient_id"), "P2");
    EXPECT_GT(v.at("votes").get<int>(), 0);
  }
  EXPECT_FALSE(vote.at("query").at("mosaic").empty());
  EXPECT_GT(vote.at("query").at("footprint").get<double>(), 0);
  // The rows listed (top) are apart from the hits each mosaic patch searches (k): the same votes,
  // fewer rows.
  const json all = body_of(s.post("/api/v1/mosaic-vote", json{{"slide_id", "a"}, {"k", 5}}.dump()));
  const json two = body_of(s.post("/api/v1/mosaic-vote", json{{"slide_id", "a"}, {"k", 5}, {"top", 2}}.dump()));
  ASSERT_GE(all.at("slides").size(), 3u) << all.dump();
  EXPECT_EQ(two.at("search").at("top"), 2);
  EXPECT_EQ(two.at("search").at("k"), 5);
  ASSERT_EQ(two.at("slides").size(), 2u) << two.dump();
  ASSERT_EQ(two.at("patients").size(), std::min<size_t>(2, all.at("patients").size())) << two.dump();
  for (size_t i = 0; i < 2; ++i) EXPECT_EQ(two.at("slides")[i], all.at("slides")[i]) << i;

  // Bad inputs: 4xx with the JSON error body; the service goes on.
  const std::vector<std::tuple<std::string, std::string, std::string, int>> cases = {
      {"POST", "/api/v1/similar-slides", json{{"slide_id", "nosuch"}}.dump(), 404},
      {"POST", "/api/v1/similar-slides", json{{"slide_id", "../../etc/passwd"}}.dump(), 404},
      {"POST", "/api/v1/similar-slides", json{{"slide_id", "a"}, {"k", 0}}.dump(), 400},
      {"POST", "/api/v1/similar-slides", json{{"slide_id", "a"}, {"k", 1000000000}}.dump(), 400},
      {"POST", "/api/v1/similar-slides", json{{"slide_id", "a"}, {"index", "nosuch"}}.dump(), 404},
      {"POST", "/api/v1/similar-slides", json{{"slide_id", "a"}, {"index", OneRun::kPatientIndex}}.dump(), 404},
      {"POST", "/api/v1/similar-slides", "{\"slide_id\": ", 400},
      {"POST", "/api/v1/similar-patients", json{{"patient_id", "P9"}}.dump(), 404},
      {"POST", "/api/v1/similar-patients", json{{"slide_id", "a"}}.dump(), 400},
      {"POST", "/api/v1/mosaic-vote", json{{"slide_id", "nosuch"}}.dump(), 404},
      {"POST", "/api/v1/mosaic-vote", json{{"slide_id", "a"}, {"k", 0}}.dump(), 400},
      {"POST", "/api/v1/mosaic-vote", json{{"slide_id", "a"}, {"k", 1000000000}}.dump(), 400},
      {"POST", "/api/v1/mosaic-vote", json{{"slide_id", "a"}, {"filter", "nosuch = 1"}}.dump(), 400},
      {"POST", "/api/v1/mosaic-vote", json{{"slide_id", "a"}, {"mosaic_percent", 0}}.dump(), 400},
      {"GET", "/api/v1/similar-slides", "", 405},
      {"GET", "/api/v1/mosaic-vote", "", 405},
  };
  for (const auto& [method, path, body, status] : cases) {
    const serve::Response r = s.request(method, path, body);
    EXPECT_EQ(r.status, status) << method << " " << path << " " << body << ": " << r.body;
    const json e = body_of(r);
    EXPECT_EQ(e.at("error").at("code"), status) << path;
    EXPECT_FALSE(e.at("error").at("message").get<std::string>().empty()) << path;
  }
  EXPECT_EQ(s.post("/api/v1/similar-slides", json{{"slide_id", "b"}}.dump()).status, 200);

  // Without slide indexes: the patch index still votes; slide and patient search say what to do.
  InProcess bare("", "none");
  EXPECT_EQ(body_of(bare.get("/api/v1/info")).at("slide_indexes"), json::array());
  for (const auto& [path, body] : std::vector<std::pair<std::string, json>>{
           {"/api/v1/similar-slides", {{"slide_id", "a"}}},
           {"/api/v1/similar-patients", {{"patient_id", "P1"}}}}) {
    const serve::Response r = bare.post(path, body.dump());
    EXPECT_EQ(r.status, 404) << path << ": " << r.body;
    EXPECT_NE(r.body.find("--slide-index"), std::string::npos) << r.body;
  }
  EXPECT_EQ(bare.post("/api/v1/mosaic-vote", json{{"slide_id", "a"}}.dump()).status, 200);
}

TEST(ServeE2E, WhichSlideIndexesAreServed) {
  using serve::SlideIndexes;
  const Catalog catalog = load_catalog(OneRun::index("flat"));
  EXPECT_EQ(SlideIndexes::load("auto", catalog).describe().size(), 2u);
  EXPECT_TRUE(SlideIndexes::load("none", catalog).empty());
  const SlideIndexes one = SlideIndexes::load(OneRun::index(OneRun::kPatientIndex), catalog);
  EXPECT_EQ(one.describe().size(), 1u);
  EXPECT_EQ(one.find("slide", ""), nullptr);
  EXPECT_NE(one.find("patient", ""), nullptr);
  EXPECT_NE(one.find("patient", OneRun::kPatientIndex), nullptr);
  EXPECT_EQ(one.find("patient", "other"), nullptr);
  EXPECT_EQ(SlideIndexes::load(OneRun::index(OneRun::kSlideIndex) + "," +
                                   OneRun::index(OneRun::kPatientIndex), catalog)
                .describe()
                .size(),
            2u);
  // A patch index or a missing folder is no slide index; the same one twice is refused.
  EXPECT_THROW(SlideIndexes::load(OneRun::index("flat"), catalog), InvalidInput);
  EXPECT_THROW(SlideIndexes::load(OneRun::index("nosuch"), catalog), InvalidInput);
  EXPECT_THROW(SlideIndexes::load(OneRun::index(OneRun::kSlideIndex) + "," +
                                      OneRun::index(OneRun::kSlideIndex), catalog),
               InvalidInput);
  // Vectors of another embed tag: not found by auto, served when named.
  Catalog other = catalog;
  other.tag = "another-model";
  EXPECT_TRUE(SlideIndexes::load("auto", other).empty());
  EXPECT_EQ(SlideIndexes::load(OneRun::index(OneRun::kSlideIndex), other).describe().size(), 1u);
}

TEST(ServeE2E, ATokenIsRequiredWhenGiven) {
  const std::string token = "0123456789abcdef-token";
  InProcess s(token);
  EXPECT_EQ(s.get("/api/v1/info").status, 401);
  EXPECT_EQ(s.get("/api/v1/info", {}, "Bearer wrong-token-0123456789").status, 401);
  EXPECT_EQ(s.get("/api/v1/info", {}, "Bearer " + token + "x").status, 401);
  EXPECT_EQ(s.get("/api/v1/info", {}, token).status, 401);
  EXPECT_EQ(s.get("/api/v1/info", {}, "Bearer " + token).status, 200);
  EXPECT_EQ(s.get("/api/v1/info", {}, "", "theme=dark; tessera_token=" + token).status, 200);
  EXPECT_EQ(s.get("/api/v1/info", {}, "", "xtessera_token=" + token).status, 401);
  EXPECT_EQ(s.get("/api/v1/info", {}, "", "tessera_token=" + token + "x").status, 401);
  EXPECT_EQ(s.get("/healthz").status, 200);
}

}  // namespace
}  // namespace tessera::e2e
