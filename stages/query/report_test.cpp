#include "stages/query/report.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "stages/query/search.h"

namespace tessera::query {
namespace {

VectorSlideTable make_slides() {
  VectorSlideTable t;
  t.slide_id = {"a", "b"};
  t.patient_id = {"P1", "P2"};
  t.metadata.push_back(MetaColumn::from_text("site", MetaType::kString, {"lung", "colon"}));
  t.metadata.push_back(MetaColumn::from_text("age", MetaType::kFloat, {"61.5", ""}));
  return t;
}

const VectorSlideTable table_ = make_slides();

// Five queries of 0..3 hits each.
struct Results {
  std::vector<QueryInfo> info;
  std::vector<std::vector<Hit>> hits;
  Results() {
    for (int q = 0; q < 5; ++q) {
      info.push_back({"query \"" + std::to_string(q) + "\"", q == 2 ? -1 : 100 + q, 0, 0.5 * q});
      std::vector<Hit> list;
      for (int r = 0; r < q % 4; ++r) {
        list.push_back({1.0f - 0.1f * r, (int64_t{r % 2} << 32) | (q * 10 + r), r % 2, 64 * r,
                        32 * q, 0.5f, r});
      }
      hits.push_back(list);
    }
  }
};

std::string streamed(const std::string& format, const Results& r, size_t batch,
                     const Timing& timing, const nlohmann::json& search) {
  ReportStream stream(format, table_, search);
  std::string out = stream.begin();
  for (size_t q0 = 0; q0 < r.hits.size(); q0 += batch) {
    const size_t end = std::min(r.hits.size(), q0 + batch);
    out += stream.batch(static_cast<int64_t>(q0), {r.info.begin() + q0, r.info.begin() + end},
                        {r.hits.begin() + q0, r.hits.begin() + end});
  }
  return out + stream.end(timing);
}

TEST(ReportStream, JsonInBatchesIsTheWholeDocumentsDump) {
  const Results r;
  Timing timing;
  timing.queries = 5;
  timing.total_s = 0.25;
  timing.latency_ms = {1, 2, 3, 4, 5};
  const nlohmann::json search = {{"k", 3}, {"filter", "site = lung"}};
  const std::string whole = format_report("json", r.info, r.hits, table_, timing, search);
  const nlohmann::json parsed = nlohmann::json::parse(whole);
  EXPECT_EQ(whole, parsed.dump(2) + "\n");
  ASSERT_EQ(parsed["queries"].size(), 5u);
  EXPECT_EQ(parsed["queries"][3]["hits"].size(), 3u);
  EXPECT_EQ(parsed["queries"][3]["hits"][1]["slide_id"], "b");
  EXPECT_TRUE(parsed["queries"][3]["hits"][1]["age"].is_null());
  EXPECT_FALSE(parsed["queries"][2].contains("patch_id"));
  EXPECT_EQ(parsed["search"], search);
  for (size_t batch : {1u, 2u, 5u}) {
    EXPECT_EQ(streamed("json", r, batch, timing, search), whole) << batch;
  }
}

TEST(ReportStream, CsvAndTableInBatchesEqualTheWholeReport) {
  const Results r;
  Timing timing;
  timing.queries = 5;
  for (const char* format : {"csv", "table"}) {
    const std::string whole = format_report(format, r.info, r.hits, table_, timing, {});
    for (size_t batch : {1u, 3u}) {
      EXPECT_EQ(streamed(format, r, batch, timing, {}), whole) << format << " " << batch;
    }
  }
  const std::string csv = format_report("csv", r.info, r.hits, table_, timing, {});
  // A header and one line per hit (0 + 1 + 2 + 3 + 0), the query number first.
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 7);
  EXPECT_NE(csv.find("\n3,2,"), std::string::npos) << csv;
}

}  // namespace
}  // namespace tessera::query
