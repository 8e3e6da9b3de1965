// Request parsing and the checks that need no index; every route against an index is tested in
// stages/serve/api_handle_test.cpp (Api::handle route by route on a tiny index) and
// tests/e2e/serve_e2e_test.cpp (the e2e cohort, in process and over loopback).
#include "stages/serve/api.h"

#include <gtest/gtest.h>

#include <functional>

#include "common/core/error.h"

namespace tessera::serve {
namespace {

TEST(ServeApi, ParsesEachQuerySource) {
  const Limits limits;
  QuerySpec q = parse_query(R"({"patch_id": 4294967299, "k": 5, "filter": "site = lung",
                                 "exclude_same_patient": true})", limits);
  EXPECT_EQ(*q.patch_id, 4294967299);
  EXPECT_EQ(q.k, 5);
  EXPECT_EQ(q.filter, "site = lung");
  EXPECT_TRUE(q.exclude_same_patient);
  EXPECT_FALSE(q.exclude_same_slide);
  q = parse_query(R"({"slide_id": "a", "x": 10, "y": 20, "box": [0, 0, 40, 30]})", limits);
  EXPECT_EQ(q.slide_id, "a");
  EXPECT_EQ(q.y, 20);
  EXPECT_EQ(q.box, (std::vector<int64_t>{0, 0, 40, 30}));
  EXPECT_EQ(q.k, 10);
  q = parse_query(R"({"vector": [1, 2.5, -3]})", limits);
  EXPECT_EQ(q.vector, (std::vector<float>{1, 2.5f, -3}));
  q = parse_query(R"({"image": "aGVsbG8="})", limits);
  EXPECT_EQ(q.image, "hello");
  q = parse_query(R"({"patch_id": 1, "filter": "   "})", limits);
  EXPECT_TRUE(q.filter.empty());
}

TEST(ServeApi, RefusesBadQueriesNamingTheField) {
  const Limits limits;
  auto refused = [&](const std::string& body, const std::string& says) {
    try {
      parse_query(body, limits);
      ADD_FAILURE() << body << " was accepted";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused("{\"patch_id\": 1", "not JSON");
  refused("[1, 2]", "JSON object");
  refused("{}", "exactly one query");
  refused(R"({"patch_id": 1, "vector": [1]})", "exactly one query");
  refused(R"({"patch_id": "12"})", "'patch_id'");
  refused(R"({"slide_id": "a", "x": 1})", "'x' and 'y'");
  refused(R"({"slide_id": "a", "x": 1, "y": 1, "box": [1, 2, 0, 4]})", "'box'");
  refused(R"({"patch_id": 1, "k": 0})", "'k' must be 1..1000");
  refused(R"({"patch_id": 1, "k": 1000000000})", "'k' must be 1..1000");
  refused(R"({"patch_id": 1, "k": 2.5})", "'k'");
  refused(R"({"vector": []})", "empty");
  refused(R"({"vector": [1, "a"]})", "'vector'");
  // Issue 30: what is not the documented schema, and nesting that would recurse unbounded.
  refused(R"({"vector": [true, 1]})", "'vector'");
  refused(R"({"vector": 1})", "'vector'");
  refused(std::string(R"({"patch_id": 1})") + '\0', "NUL byte");
  refused(R"({"patch_id": 1, "pad": )" + std::string(100000, '[') + std::string(100000, ']') + "}",
          "deeper than 32");
  refused(R"({"image": "not base64!"})", "base64");
  refused(R"({"patch_id": 1, "exclude_same_slide": "yes"})", "'exclude_same_slide'");
  refused(R"({"patch_id": 1, "nprobe": -1})", "'nprobe'");
  refused("{\"patch_id\": 1, \"filter\": \"" + std::string(1 << 20, 'a') + "\"}", "limit is 4096");
}

TEST(ServeApi, ParsesSimilarAndVoteBodies) {
  const Limits limits;
  SimilarSpec s = parse_similar(R"({"slide_id": "S1", "k": 4, "exclude_same_patient": true})",
                                "slide_id", limits);
  EXPECT_EQ(s.id, "S1");
  EXPECT_EQ(s.k, 4);
  EXPECT_TRUE(s.exclude_same_patient);
  EXPECT_TRUE(s.index.empty());
  s = parse_similar(R"({"patient_id": "P1", "index": "mean-x-patient"})", "patient_id", limits);
  EXPECT_EQ(s.id, "P1");
  EXPECT_EQ(s.k, 10);
  EXPECT_EQ(s.index, "mean-x-patient");
  VoteSpec v = parse_vote(R"({"slide_id": "S1", "k": 3, "filter": "site = lung", "nprobe": 4,
                             "mosaic_percent": 10, "mosaic_min": 2})", limits);
  EXPECT_EQ(v.slide_id, "S1");
  EXPECT_EQ(v.k, 3);
  EXPECT_EQ(v.filter, "site = lung");
  EXPECT_EQ(v.nprobe, 4);
  EXPECT_DOUBLE_EQ(v.mosaic_percent, 10);
  EXPECT_EQ(v.mosaic_min, 2);
  EXPECT_EQ(v.top, 3);  // the rows listed default to k, as query lists k
  v = parse_vote(R"({"slide_id": "S1", "k": 4, "top": 20})", limits);
  EXPECT_EQ(v.k, 4);
  EXPECT_EQ(v.top, 20);
  v = parse_vote(R"({"slide_id": "S1"})", limits);
  EXPECT_DOUBLE_EQ(v.mosaic_percent, 5);
  EXPECT_EQ(v.mosaic_min, 8);
  EXPECT_FALSE(v.exclude_same_patient);
}

TEST(ServeApi, RefusesBadSimilarAndVoteBodiesNamingTheField) {
  const Limits limits;
  auto refused = [&](const std::function<void()>& parse, const std::string& says) {
    try {
      parse();
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  auto similar = [&](const std::string& body) {
    return [body, &limits] { parse_similar(body, "slide_id", limits); };
  };
  auto vote = [&](const std::string& body) { return [body, &limits] { parse_vote(body, limits); }; };
  refused(similar("{"), "not JSON");
  refused(similar("[]"), "JSON object");
  refused(similar("{}"), "give 'slide_id'");
  refused(similar(R"({"patient_id": "P1"})"), "give 'slide_id'");
  refused(similar(R"({"slide_id": 3})"), "'slide_id' must be a string");
  refused(similar(R"({"slide_id": ""})"), "empty");
  refused(similar(R"({"slide_id": "a", "k": 0})"), "'k' must be 1..1000");
  refused(similar(R"({"slide_id": "a", "k": 1000000000})"), "'k' must be 1..1000");
  refused(similar(R"({"slide_id": "a", "exclude_same_patient": 1})"), "'exclude_same_patient'");
  refused(similar(R"({"slide_id": "a", "index": 2})"), "'index'");
  refused(vote(R"({"k": 3})"), "give 'slide_id'");
  refused(vote(R"({"slide_id": "a", "k": -1})"), "'k' must be 1..1000");
  refused(vote(R"({"slide_id": "a", "mosaic_percent": 0})"), "'mosaic_percent'");
  refused(vote(R"({"slide_id": "a", "mosaic_percent": 101})"), "'mosaic_percent'");
  refused(vote(R"({"slide_id": "a", "mosaic_min": 0})"), "'mosaic_min' must be 1..256");
  refused(vote(R"({"slide_id": "a", "mosaic_min": 1.5})"), "'mosaic_min'");
  refused(vote(R"({"slide_id": "a", "top": 0})"), "'top' must be 1..1000");
  refused(vote(R"({"slide_id": "a", "top": "5"})"), "'top'");
  refused(vote(R"({"slide_id": "a", "nprobe": -2})"), "'nprobe'");
  refused(vote("{\"slide_id\": \"a\", \"filter\": \"" + std::string(5000, 'a') + "\"}"),
          "limit is 4096");
}

TEST(ServeApi, ErrorsHaveTheJsonBody) {
  const Response r = error_response(404, "unknown slide 'x'");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.content_type, "application/json");
  const auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j.at("error").at("code"), 404);
  EXPECT_EQ(j.at("error").at("message"), "unknown slide 'x'");
  // A message quoting bytes of a request that are not UTF-8 is still a JSON body (issue 30).
  const Response bad = error_response(400, "unknown slide '\xff\xfe'");
  EXPECT_EQ(nlohmann::json::parse(bad.body).at("error").at("message"), "unknown slide '\\xff\\xfe'");
}

TEST(ServeApi, TokensCompareWhole) {
  EXPECT_TRUE(constant_time_equal("secret-token-123", "secret-token-123"));
  EXPECT_FALSE(constant_time_equal("secret-token-123", "secret-token-124"));
  EXPECT_FALSE(constant_time_equal("secret-token-123", "secret-token-12"));
  EXPECT_FALSE(constant_time_equal("", "x"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

// Cookies are matched by their whole name (issue 30: "xtessera_token" passed for the token's).
TEST(ServeApi, CookiesAreFoundByTheirExactName) {
  EXPECT_EQ(cookie_value("tessera_token=abc", "tessera_token"), "abc");
  EXPECT_EQ(cookie_value("a=1; tessera_token=abc; b=2", "tessera_token"), "abc");
  EXPECT_EQ(cookie_value("a=1;tessera_token= abc ", "tessera_token"), "abc");
  EXPECT_EQ(cookie_value("tessera_token=; tessera_token=abc", "tessera_token"), "");
  EXPECT_EQ(cookie_value("xtessera_token=abc", "tessera_token"), std::nullopt);
  EXPECT_EQ(cookie_value("tessera_token_x=abc; x=tessera_token=abc", "tessera_token"),
            std::nullopt);
  EXPECT_EQ(cookie_value("", "tessera_token"), std::nullopt);
  EXPECT_EQ(cookie_value("tessera_token", "tessera_token"), std::nullopt);
}

}  // namespace
}  // namespace tessera::serve
