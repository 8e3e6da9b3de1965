// serve end to end: generated slides through patchgen, embed and ingest, then
//   - every route of the API in process (Api::handle, no sockets), bad inputs included;
//   - serve itself under mpirun with 1..3 ranks over loopback: the same answers as query (patch
//     search, similar slides and patients over the slide and patient indexes, mosaic voting);
//   - a generation swap under load, SIGTERM to mpirun, a token on a non-loopback bind (the load
//     tests are in serve_load_e2e_test.cpp, the cohort in serve_cohort.h);
//   - the page in headless chromium (web/browser_test.js), with a screenshot kept.
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
#include "tests/e2e/serve_service.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {
namespace {

using nlohmann::json;

std::vector<std::pair<int64_t, float>> pairs(const json& hits) {
  std::vector<std::pair<int64_t, float>> out;
  for (const auto& h : hits) out.emplace_back(h.at("patch_id").get<int64_t>(), h.at("score").get<float>());
  return out;
}

void expect_same_hits(const json& a, const json& b, const std::string& what) {
  const auto x = pairs(a), y = pairs(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].first, y[i].first) << what << " rank " << i;
    EXPECT_NEAR(x[i].second, y[i].second, 1e-5) << what << " rank " << i;
  }
}

json query_hits(const std::string& name, const std::string& args) {
  std::string log;
  const std::string command = kQuery + " --index " + Cohort::index(name) +
                              " --threads 1 --format json --log-level error " + args;
  EXPECT_EQ(run_command(command, &log), 0) << command << "\n" << log;
  const size_t start = log.find('{');
  if (start == std::string::npos) return json::array();
  return json::parse(log.substr(start)).at("queries").at(0).at("hits");
}

// query's whole JSON report for `args` over index `name`.
json query_json(const std::string& name, const std::string& args) {
  std::string log;
  const std::string command = kQuery + " --index " + Cohort::index(name) +
                              " --threads 1 --format json --log-level error " + args;
  EXPECT_EQ(run_command(command, &log), 0) << command << "\n" << log;
  const size_t start = log.find('{');
  if (start == std::string::npos) return json::object();
  return json::parse(log.substr(start));
}

// A similar-slides/patients answer equals query's report (the same rows, ids, scores, labels).
void expect_same_similar(const json& served, const json& queried, const std::string& what) {
  ASSERT_TRUE(served.contains("hits")) << what << ": " << served.dump();
  EXPECT_EQ(served.at("query"), queried.at("query")) << what;
  EXPECT_EQ(served.at("hits"), queried.at("hits")) << what;
  EXPECT_EQ(served.at("search").at("rows"), queried.at("search").at("rows")) << what;
}

// A ranking of votes equals query's: ids, votes and metadata exactly, best scores within 1e-5.
void expect_same_votes(const json& a, const json& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what << "\n" << a.dump() << "\n" << b.dump();
  for (size_t i = 0; i < a.size(); ++i) {
    json x = a[i], y = b[i];
    EXPECT_NEAR(x.at("best_score").get<double>(), y.at("best_score").get<double>(), 1e-5) << what;
    x.erase("best_score");
    y.erase("best_score");
    EXPECT_EQ(x, y) << what << " rank " << i;
  }
}

void expect_same_vote_report(const json& served, const json& queried, const std::string& what) {
  ASSERT_TRUE(served.contains("slides")) << what << ": " << served.dump();
  EXPECT_EQ(served.at("query").at("mosaic"), queried.at("query").at("mosaic")) << what;
  EXPECT_FALSE(served.at("slides").empty()) << what;
  expect_same_votes(served.at("slides"), queried.at("slides"), what + " (slides)");
  expect_same_votes(served.at("patients"), queried.at("patients"), what + " (patients)");
}

// The slide and case searches compared with query: (request path, body, query arguments).
struct SlideCase {
  std::string path;
  json body;
  std::string index;  // query's --index
  std::string args;
};

std::vector<SlideCase> slide_cases() {
  std::vector<SlideCase> cases;
  for (const char* s : {"a", "b", "c", "d"}) {
    cases.push_back({"/api/v1/similar-slides", {{"slide_id", s}, {"k", 3}}, Cohort::kSlideIndex,
                     fmt::format("--similar-slide {} -k 3", s)});
    cases.push_back({"/api/v1/mosaic-vote", {{"slide_id", s}, {"k", 5}}, "flat",
                     fmt::format("--slide {} --mosaic-vote -k 5", s)});
  }
  cases.push_back({"/api/v1/similar-slides", {{"slide_id", "a"}, {"k", 5}, {"exclude_same_patient", true}},
                   Cohort::kSlideIndex, "--similar-slide a -k 5 --exclude-same-patient"});
  for (const char* p : {"P1", "P2", "P3"}) {
    cases.push_back({"/api/v1/similar-patients", {{"patient_id", p}, {"k", 2}}, Cohort::kPatientIndex,
                     fmt::format("--similar-patient {} -k 2", p)});
  }
  cases.push_back({"/api/v1/mosaic-vote",
                   {{"slide_id", "a"}, {"k", 4}, {"exclude_same_patient", true}, {"filter", "site = lung"},
                    {"mosaic_percent", 20}, {"mosaic_min", 3}},
                   "flat",
                   "--slide a --mosaic-vote -k 4 --exclude-same-patient --filter \"site = lung\" "
                   "--mosaic-percent 20 --mosaic-min 3"});
  cases.push_back({"/api/v1/mosaic-vote", {{"slide_id", "d"}, {"k", 3}, {"mosaic_min", 2}, {"mosaic_percent", 1}},
                   "flat", "--slide d --mosaic-vote -k 3 --mosaic-min 2 --mosaic-percent 1"});
  return cases;
}

void expect_same_answer(const SlideCase& c, const json& served, const json& queried,
                        const std::string& what) {
  if (c.path == "/api/v1/mosaic-vote") {
    expect_same_vote_report(served, queried, what);
  } else {
    expect_same_similar(served, queried, what);
  }
}

// ---------------------------------------------------------------------------------------------
// In process: Api::handle over the resident state, a thread running the rounds.

class InProcess {
 public:
  explicit InProcess(const std::string& token = "", const std::string& slide_index = "auto")
      : shards_(Cohort::index("flat"), 0, 1, true, VerifyLevel::kCheap) {
    config_.index = Cohort::index("flat");
    auto front = std::make_shared<const serve::Front>(shards_.catalog(), shards_.slides(), shards_.rows(), 0);
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
  EXPECT_EQ(indexes[0].at("name"), Cohort::kSlideIndex);
  EXPECT_EQ(indexes[0].at("level"), "slide");
  EXPECT_EQ(indexes[0].at("rows"), 4);
  EXPECT_EQ(indexes[1].at("name"), Cohort::kPatientIndex);
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
      {"POST", "/api/v1/similar-slides", json{{"slide_id", "a"}, {"index", Cohort::kPatientIndex}}.dump(), 404},
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
  const Catalog catalog = load_catalog(Cohort::index("flat"));
  EXPECT_EQ(SlideIndexes::load("auto", catalog).describe().size(), 2u);
  EXPECT_TRUE(SlideIndexes::load("none", catalog).empty());
  const SlideIndexes one = SlideIndexes::load(Cohort::index(Cohort::kPatientIndex), catalog);
  EXPECT_EQ(one.describe().size(), 1u);
  EXPECT_EQ(one.find("slide", ""), nullptr);
  EXPECT_NE(one.find("patient", ""), nullptr);
  EXPECT_NE(one.find("patient", Cohort::kPatientIndex), nullptr);
  EXPECT_EQ(one.find("patient", "other"), nullptr);
  EXPECT_EQ(SlideIndexes::load(Cohort::index(Cohort::kSlideIndex) + "," +
                                   Cohort::index(Cohort::kPatientIndex), catalog)
                .describe()
                .size(),
            2u);
  // A patch index or a missing folder is no slide index; the same one twice is refused.
  EXPECT_THROW(SlideIndexes::load(Cohort::index("flat"), catalog), InvalidInput);
  EXPECT_THROW(SlideIndexes::load(Cohort::index("nosuch"), catalog), InvalidInput);
  EXPECT_THROW(SlideIndexes::load(Cohort::index(Cohort::kSlideIndex) + "," +
                                      Cohort::index(Cohort::kSlideIndex), catalog),
               InvalidInput);
  // Vectors of another embed tag: not found by auto, served when named.
  Catalog other = catalog;
  other.tag = "another-model";
  EXPECT_TRUE(SlideIndexes::load("auto", other).empty());
  EXPECT_EQ(SlideIndexes::load(Cohort::index(Cohort::kSlideIndex), other).describe().size(), 1u);
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

// ---------------------------------------------------------------------------------------------
// The serve executable under mpirun, over loopback.

json post(httplib::Client& c, const std::string& path, const json& body, int* status = nullptr) {
  auto r = c.Post(path.c_str(), body.dump(), "application/json");
  if (!r) {
    ADD_FAILURE() << "no answer to " << path;
    return {};
  }
  if (status) *status = r->status;
  return json::parse(r->body);
}

TEST(ServeE2E, AnswersEqualQueryAtOneTwoAndThreeRanks) {
  const std::vector<int64_t> patches = some_patches();
  const std::vector<std::pair<std::string, json>> variants = {
      {"", json::object()},
      {"--filter \"site = lung\"", {{"filter", "site = lung"}}},
      {"--exclude-same-patient", {{"exclude_same_patient", true}}},
      {"--exclude-same-slide --filter \"age < 65\"", {{"exclude_same_slide", true}, {"filter", "age < 65"}}}};
  std::vector<json> expected;
  for (int64_t p : patches) {
    for (const auto& [args, fields] : variants) {
      expected.push_back(query_hits("flat", fmt::format("--patch {} -k 9 {}", p, args)));
    }
  }
  const std::vector<SlideCase> slide_cases = e2e::slide_cases();
  std::vector<json> slide_expected;
  for (const SlideCase& sc : slide_cases) slide_expected.push_back(query_json(sc.index, sc.args));
  for (int R = 1; R <= 3; ++R) {
    Service service(Cohort::dir(), R, Cohort::index("flat"), "", fmt::format("r{}", R));
    ASSERT_TRUE(service.running());
    httplib::Client c("127.0.0.1", service.port());
    auto info = c.Get("/api/v1/info");
    ASSERT_TRUE(info);
    EXPECT_EQ(json::parse(info->body).at("ranks"), R);
    size_t at = 0;
    for (int64_t p : patches) {
      for (const auto& [args, fields] : variants) {
        json body = fields;
        body["patch_id"] = p;
        body["k"] = 9;
        int status = 0;
        const json r = post(c, "/api/v1/search", body, &status);
        ASSERT_EQ(status, 200) << r.dump();
        expect_same_hits(r.at("hits"), expected.at(at++), fmt::format("R={} patch {} {}", R, p, args));
      }
    }
    // Similar slides and patients, and mosaic votes whose searches go through the rounds.
    for (size_t i = 0; i < slide_cases.size(); ++i) {
      const SlideCase& sc = slide_cases[i];
      int status = 0;
      const json r = post(c, sc.path, sc.body, &status);
      ASSERT_EQ(status, 200) << r.dump();
      expect_same_answer(sc, r, slide_expected[i], fmt::format("R={} {} {}", R, sc.path, sc.body.dump()));
    }
    // Several mosaic votes at once share rounds and still give query's answers.
    {
      std::vector<std::thread> clients;
      std::vector<json> answers(4);
      for (size_t t = 0; t < answers.size(); ++t) {
        clients.emplace_back([&, t] {
          httplib::Client cc("127.0.0.1", service.port());
          answers[t] = post(cc, slide_cases[2 * t + 1].path, slide_cases[2 * t + 1].body);
        });
      }
      for (auto& t : clients) t.join();
      for (size_t t = 0; t < answers.size(); ++t) {
        expect_same_vote_report(answers[t], slide_expected[2 * t + 1], fmt::format("R={} concurrent vote {}", R, t));
      }
    }
    // A point on a slide, as query --slide --x --y.
    const json point = post(c, "/api/v1/search", {{"slide_id", "c"}, {"x", 900}, {"y", 500}, {"k", 6}});
    expect_same_hits(point.at("hits"), query_hits("flat", "--slide c --x 900 --y 500 -k 6"), "point");
    // Bad inputs over the wire.
    int status = 0;
    auto bad = c.Post("/api/v1/search", "{\"patch_id\": ", "application/json");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    post(c, "/api/v1/search", {{"patch_id", patches[0]}, {"k", 0}}, &status);
    EXPECT_EQ(status, 400);
    auto evil = c.Get("/api/v1/slides/..%2F..%2Fetc%2Fpasswd.dzi");
    ASSERT_TRUE(evil);
    EXPECT_EQ(evil->status, 404);
    auto big = c.Post("/api/v1/search", std::string(9 << 20, ' '), "application/json");
    ASSERT_TRUE(big);
    EXPECT_EQ(big->status, 413);
    EXPECT_EQ(service.stop(), 0) << service.log();
  }
}

TEST(ServeE2E, AnAppendedGenerationIsSwappedInWithoutFailingRequests) {
  Service service(Cohort::dir(), 2, Cohort::index("grown"), "--poll 0", "grown");
  ASSERT_TRUE(service.running());
  httplib::Client c("127.0.0.1", service.port());
  const int64_t rows0 = json::parse(c.Get("/api/v1/info")->body).at("rows");
  const int64_t patch = some_patches().at(0);
  std::atomic<bool> done{false};
  std::atomic<int64_t> ok{0}, bad{0};
  std::thread load([&] {
    httplib::Client cli("127.0.0.1", service.port());
    cli.set_read_timeout(120);  // slow is not failed: only a dropped connection is
    while (!done) {
      auto r = cli.Post("/api/v1/search", json{{"patch_id", patch}, {"k", 5}}.dump(), "application/json");
      (r && r->status == 200 ? ok : bad)++;
    }
  });
  std::string log;
  ASSERT_EQ(run_command(mpirun(2) + kIngest + " --run " + Cohort::run() +
                            " --tag vit-tiny --name grown --threads 1 --shards 3 --normalize --append",
                        &log), 0) << log;
  ::kill(service.rank0(), SIGHUP);
  int64_t rows1 = rows0;
  for (int i = 0; i < 600 && rows1 == rows0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    rows1 = json::parse(c.Get("/api/v1/info")->body).at("rows");
  }
  done = true;
  load.join();
  const json flat = json::parse(c.Get("/api/v1/info")->body);
  EXPECT_GT(rows1, rows0);
  EXPECT_EQ(flat.at("service_generation"), 1);
  EXPECT_EQ(bad, 0);
  EXPECT_GT(ok, 0);
  // The grown index now answers as the one ingested whole.
  const json r = post(c, "/api/v1/search", {{"patch_id", patch}, {"k", 9}});
  expect_same_hits(r.at("hits"), query_hits("flat", fmt::format("--patch {} -k 9", patch)), "after the swap");
  EXPECT_EQ(service.stop(), 0) << service.log();
}

// Issue 30, item 14: SIGTERM to mpirun under load left rank 0 waiting 30 s for searches that no
// round would answer, until mpirun SIGKILLed every rank (exit 1, the registration left behind).
// With Open MPI's default grace (the tests' mpirun flags set none), mpirun forwards the signal to
// every rank and SIGKILLs them a second later: the searches in flight are answered (or refused
// with 503), every rank's run() returns 0 and the registration is removed within it. (mpirun
// itself exits 1 after a signal whatever its ranks did, and drops the last lines they print.)
TEST(ServeE2E, ASignalToMpirunStopsEveryRankWithinTheGrace) {
  const int64_t patch = some_patches().at(0);
  for (int R = 1; R <= 2; ++R) {
    std::string launcher = mpirun(R);
    const std::string no_grace = "odls_base_sigkill_timeout 0";
    if (const size_t at = launcher.find(no_grace); at != std::string::npos) {
      launcher.replace(at, no_grace.size(), "odls_base_sigkill_timeout 1");  // Open MPI's default
    }
    Service service(Cohort::dir(), R, Cohort::index("flat"), "", fmt::format("stop-r{}", R), launcher);
    ASSERT_TRUE(service.running());
    std::atomic<bool> done{false};
    std::atomic<int> ok{0}, refused{0}, other{0};
    std::vector<std::thread> clients;
    for (int c = 0; c < 4; ++c) {
      clients.emplace_back([&] {
        httplib::Client cli("127.0.0.1", service.port());
        cli.set_read_timeout(60);
        while (!done) {
          auto r = cli.Post("/api/v1/search", json{{"patch_id", patch}, {"k", 200}}.dump(),
                            "application/json");
          if (!r) break;  // the service closed the connection: it stopped
          (r->status == 200 ? ok : r->status == 503 ? refused : other)++;
        }
      });
    }
    for (int i = 0; i < 600 && ok < 8; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const auto start = std::chrono::steady_clock::now();
    service.signal_launcher(SIGTERM);  // fails the test when the registration is left
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    done = true;
    for (auto& t : clients) t.join();
    const std::string log = service.log();
    EXPECT_LT(seconds, 30) << log;
    EXPECT_GT(ok, 0) << log;
    EXPECT_EQ(other, 0) << "answers other than 200 and 503\n" << log;
    for (int r = 0; r < R; ++r) {
      const std::string stopped = fmt::format("[rank {}/{}] stopped", r, R);
      EXPECT_NE(log.find(stopped), std::string::npos) << "R = " << R << ": no '" << stopped << "'\n" << log;
    }
  }
}

TEST(ServeE2E, AMissingPageFolderIsBadInput) {
  std::string log;
  EXPECT_EQ(run_command(kServe + " --index " + Cohort::index("flat") + " --web-dir " +
                            (Cohort::dir() / "no-such-web").string(), &log), 2) << log;
  EXPECT_NE(log.find("--web-dir"), std::string::npos) << log;
}

TEST(ServeE2E, ANonLoopbackBindNeedsItsToken) {
  std::string log;
  EXPECT_EQ(run_command(kServe + " --index " + Cohort::index("flat") + " --bind 0.0.0.0", &log), 2) << log;
  EXPECT_NE(log.find("--token-file"), std::string::npos) << log;
  const std::string token_file = (Cohort::dir() / "token").string();
  write_text(token_file, "s3cret-0123456789abcdef\n");
  Service service(Cohort::dir(), 1, Cohort::index("flat"), "--bind 0.0.0.0 --token-file " + token_file, "token");
  ASSERT_TRUE(service.running());
  httplib::Client c("127.0.0.1", service.port());
  EXPECT_EQ(c.Get("/api/v1/info")->status, 401);
  EXPECT_EQ(c.Get("/api/v1/info", {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(c.Get("/api/v1/info", {{"Authorization", "Bearer s3cret-0123456789abcdef"}})->status, 200);
  EXPECT_EQ(c.Get("/healthz")->status, 200);
  EXPECT_EQ(service.stop(), 0) << service.log();
}

TEST(ServeE2E, ThePageInHeadlessChromium) {
  Service service(Cohort::dir(), 1, Cohort::index("flat"), "", "browser");
  ASSERT_TRUE(service.running());
  const std::string shot = std::string(TESSERA_BROWSER_ARTIFACTS) + "/serve-page.png";
  std::string log;
  const int code = run_command(fmt::format("{} http://127.0.0.1:{}/ {} {}", TESSERA_BROWSER_TEST,
                                           service.port(), TESSERA_CHROMIUM, shot), &log);
  EXPECT_EQ(code, 0) << log;
  EXPECT_TRUE(fs::exists(shot)) << shot;
  EXPECT_EQ(service.stop(), 0) << service.log();
}

}  // namespace
}  // namespace tessera::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // The in-process Api finds query's image helper through this (the test is not beside it).
  ::setenv("TESSERA_EMBED_IMAGE", TESSERA_EMBED_IMAGE_EXE, 0);
  ::testing::AddGlobalTestEnvironment(new tessera::e2e::Cohort);
  return RUN_ALL_TESTS();
}
