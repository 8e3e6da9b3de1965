#include "stages/serve/metrics.h"

#include <gtest/gtest.h>

#include "stages/serve/lru_cache.h"

namespace tessera::serve {
namespace {

TEST(ServeMetrics, HistogramBucketsAreCumulative) {
  Histogram h({1, 2, 5});
  for (double v : {0.5, 1.0, 1.5, 3.0, 9.0}) h.observe(v);
  const std::string t = h.text("x_seconds", "route=\"a\"");
  EXPECT_NE(t.find("x_seconds_bucket{route=\"a\",le=\"1\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_bucket{route=\"a\",le=\"2\"} 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_bucket{route=\"a\",le=\"5\"} 4\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_bucket{route=\"a\",le=\"+Inf\"} 5\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_sum{route=\"a\"} 15\n"), std::string::npos) << t;
  EXPECT_NE(t.find("x_seconds_count{route=\"a\"} 5\n"), std::string::npos) << t;
}

TEST(ServeMetrics, RequestsErrorsBatchesAndMemory) {
  Metrics m;
  m.request("search", 200, 0.003);
  m.request("search", 400, 0.001);
  m.request("tile", 200, 0.02);
  m.batch(4, 0.002);
  m.set_gauge("tessera_serve_index_rows", "rows", 42);
  const std::string t = m.text();
  EXPECT_NE(t.find("tessera_serve_requests_total{route=\"search\",status=\"200\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("tessera_serve_errors_total{route=\"search\"} 1\n"), std::string::npos);
  EXPECT_EQ(t.find("tessera_serve_errors_total{route=\"tile\"}"), std::string::npos);
  EXPECT_NE(t.find("tessera_serve_request_duration_seconds_count{route=\"search\"} 2\n"), std::string::npos);
  EXPECT_NE(t.find("tessera_serve_batch_size_bucket{le=\"4\"} 1\n"), std::string::npos);
  EXPECT_NE(t.find("# TYPE tessera_serve_index_rows gauge\ntessera_serve_index_rows 42\n"), std::string::npos);
  EXPECT_NE(t.find("tessera_serve_resident_memory_bytes "), std::string::npos);
  EXPECT_GT(resident_bytes(), 0);
}

TEST(LruCache, EvictsTheLeastRecentlyUsedToStayWithinItsBytes) {
  LruCache c(10);
  auto v = [](size_t n) { return std::make_shared<const std::string>(n, 'x'); };
  c.put("a", v(4));
  c.put("b", v(4));
  ASSERT_NE(c.get("a"), nullptr);  // a is now the most recent
  c.put("c", v(4));                // evicts b
  EXPECT_EQ(c.get("b"), nullptr);
  EXPECT_NE(c.get("a"), nullptr);
  EXPECT_NE(c.get("c"), nullptr);
  EXPECT_EQ(c.bytes(), 8u);
  c.put("huge", v(11));  // larger than the cache: not kept
  EXPECT_EQ(c.get("huge"), nullptr);
  c.put("a", v(2));      // replaced, not counted twice
  EXPECT_EQ(c.bytes(), 6u);
  EXPECT_EQ(c.hits(), 3);
  EXPECT_EQ(c.misses(), 2);
  c.clear();
  EXPECT_EQ(c.entries(), 0u);
}

}  // namespace
}  // namespace tessera::serve
