// Request parsing and the checks that need no index; every route against an index is tested in
// tests/e2e/serve_e2e_test.cpp (in process through Api::handle, and over loopback).
#include "stages/serve/api.h"

#include <gtest/gtest.h>

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
  refused(R"({"image": "not base64!"})", "base64");
  refused(R"({"patch_id": 1, "exclude_same_slide": "yes"})", "'exclude_same_slide'");
  refused(R"({"patch_id": 1, "nprobe": -1})", "'nprobe'");
  refused("{\"patch_id\": 1, \"filter\": \"" + std::string(1 << 20, 'a') + "\"}", "limit is 4096");
}

TEST(ServeApi, ErrorsHaveTheJsonBody) {
  const Response r = error_response(404, "unknown slide 'x'");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(r.content_type, "application/json");
  const auto j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j.at("error").at("code"), 404);
  EXPECT_EQ(j.at("error").at("message"), "unknown slide 'x'");
}

TEST(ServeApi, TokensCompareWhole) {
  EXPECT_TRUE(constant_time_equal("secret-token-123", "secret-token-123"));
  EXPECT_FALSE(constant_time_equal("secret-token-123", "secret-token-124"));
  EXPECT_FALSE(constant_time_equal("secret-token-123", "secret-token-12"));
  EXPECT_FALSE(constant_time_equal("", "x"));
  EXPECT_TRUE(constant_time_equal("", ""));
}

}  // namespace
}  // namespace tessera::serve
