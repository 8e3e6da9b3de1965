// What serve's end-to-end tests compare: served answers against query's (the same hits, similar
// slides and patients, mosaic votes), and the slide and case searches they compare. Shared by
// serve_e2e_test.cpp (under mpirun) and serve_inprocess_e2e_test.cpp (Api::handle in process).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/cohort.h"
#include "tests/e2e/e2e_util.h"
#include "tests/e2e/serve_cohort.h"

namespace tessera::e2e {

using nlohmann::json;

inline std::vector<std::pair<int64_t, float>> pairs(const json& hits) {
  std::vector<std::pair<int64_t, float>> out;
  for (const auto& h : hits) out.emplace_back(h.at("patch_id").get<int64_t>(), h.at("score").get<float>());
  return out;
}

inline void expect_same_hits(const json& a, const json& b, const std::string& what) {
  const auto x = pairs(a), y = pairs(b);
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(x[i].first, y[i].first) << what << " rank " << i;
    EXPECT_NEAR(x[i].second, y[i].second, 1e-5) << what << " rank " << i;
  }
}

inline json query_hits(const std::string& name, const std::string& args) {
  std::string log;
  const std::string command = kQuery + " --index " + OneRun::index(name) +
                              " --threads 1 --format json --log-level error " + args;
  EXPECT_EQ(run_command(command, &log), 0) << command << "\n" << log;
  const size_t start = log.find('{');
  if (start == std::string::npos) return json::array();
  return json::parse(log.substr(start)).at("queries").at(0).at("hits");
}

// query's whole JSON report for `args` over index `name`.
inline json query_json(const std::string& name, const std::string& args) {
  std::string log;
  const std::string command = kQuery + " --index " + OneRun::index(name) +
                              " --threads 1 --format json --log-level error " + args;
  EXPECT_EQ(run_command(command, &log), 0) << command << "\n" << log;
  const size_t start = log.find('{');
  if (start == std::string::npos) return json::object();
  return json::parse(log.substr(start));
}

// A similar-slides/patients answer equals query's report (the same rows, ids, scores, labels).
inline void expect_same_similar(const json& served, const json& queried, const std::string& what) {
  ASSERT_TRUE(served.contains("hits")) << what << ": " << served.dump();
  EXPECT_EQ(served.at("query"), queried.at("query")) << what;
  EXPECT_EQ(served.at("hits"), queried.at("hits")) << what;
  EXPECT_EQ(served.at("search").at("rows"), queried.at("search").at("rows")) << what;
}

// A ranking of votes equals query's: ids, votes and metadata exactly, best scores within 1e-5.
inline void expect_same_votes(const json& a, const json& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what << "\n" << a.dump() << "\n" << b.dump();
  for (size_t i = 0; i < a.size(); ++i) {
    json x = a[i], y = b[i];
    EXPECT_NEAR(x.at("best_score").get<double>(), y.at("best_score").get<double>(), 1e-5) << what;
    x.erase("best_score");
    y.erase("best_score");
    EXPECT_EQ(x, y) << what << " rank " << i;
  }
}

inline void expect_same_vote_report(const json& served, const json& queried, const std::string& what) {
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

inline std::vector<SlideCase> slide_cases() {
  std::vector<SlideCase> cases;
  for (const char* s : {"a", "b", "c", "d"}) {
    cases.push_back({"/api/v1/similar-slides", {{"slide_id", s}, {"k", 3}}, OneRun::kSlideIndex,
                     fmt::format("--similar-slide {} -k 3", s)});
    cases.push_back({"/api/v1/mosaic-vote", {{"slide_id", s}, {"k", 5}}, "flat",
                     fmt::format("--slide {} --mosaic-vote -k 5", s)});
  }
  cases.push_back({"/api/v1/similar-slides", {{"slide_id", "a"}, {"k", 5}, {"exclude_same_patient", true}},
                   OneRun::kSlideIndex, "--similar-slide a -k 5 --exclude-same-patient"});
  for (const char* p : {"P1", "P2", "P3"}) {
    cases.push_back({"/api/v1/similar-patients", {{"patient_id", p}, {"k", 2}}, OneRun::kPatientIndex,
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

inline void expect_same_answer(const SlideCase& c, const json& served, const json& queried,
                        const std::string& what) {
  if (c.path == "/api/v1/mosaic-vote") {
    expect_same_vote_report(served, queried, what);
  } else {
    expect_same_similar(served, queried, what);
  }
}

}  // namespace tessera::e2e
