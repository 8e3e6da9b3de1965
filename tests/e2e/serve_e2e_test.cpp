// serve end to end: generated slides through patchgen, embed and ingest, then
//   - every route of the API in process (serve_inprocess_e2e_test.cpp);
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
#include "tests/e2e/serve_compare.h"
#include "tests/e2e/serve_service.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {
namespace {

using nlohmann::json;

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
    Service service(OneRun::dir(), R, OneRun::index("flat"), "", fmt::format("r{}", R));
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
  Service service(OneRun::dir(), 2, OneRun::index("grown"), "--poll 0", "grown");
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
  ASSERT_EQ(run_command(mpirun(2) + kIngest + " --run " + OneRun::run() +
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
    Service service(OneRun::dir(), R, OneRun::index("flat"), "", fmt::format("stop-r{}", R), launcher);
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
  EXPECT_EQ(run_command(kServe + " --index " + OneRun::index("flat") + " --web-dir " +
                            (OneRun::dir() / "no-such-web").string(), &log), 2) << log;
  EXPECT_NE(log.find("--web-dir"), std::string::npos) << log;
}

TEST(ServeE2E, ANonLoopbackBindNeedsItsToken) {
  std::string log;
  EXPECT_EQ(run_command(kServe + " --index " + OneRun::index("flat") + " --bind 0.0.0.0", &log), 2) << log;
  EXPECT_NE(log.find("--token-file"), std::string::npos) << log;
  const std::string token_file = (OneRun::dir() / "token").string();
  write_text(token_file, "s3cret-0123456789abcdef\n");
  Service service(OneRun::dir(), 1, OneRun::index("flat"), "--bind 0.0.0.0 --token-file " + token_file, "token");
  ASSERT_TRUE(service.running());
  httplib::Client c("127.0.0.1", service.port());
  EXPECT_EQ(c.Get("/api/v1/info")->status, 401);
  EXPECT_EQ(c.Get("/api/v1/info", {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(c.Get("/api/v1/info", {{"Authorization", "Bearer s3cret-0123456789abcdef"}})->status, 200);
  EXPECT_EQ(c.Get("/healthz")->status, 200);
  EXPECT_EQ(service.stop(), 0) << service.log();
}

TEST(ServeE2E, ThePageInHeadlessChromium) {
  Service service(OneRun::dir(), 1, OneRun::index("flat"), "", "browser");
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
  ::testing::AddGlobalTestEnvironment(new tessera::e2e::OneRun);
  return RUN_ALL_TESTS();
}
