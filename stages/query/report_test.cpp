#include "stages/query/report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "common/store/columns.h"

namespace tessera::query {
namespace {

// Two slides with an int, a float (one missing) and a string column.
VectorSlideTable slides() {
  VectorSlideTable t;
  t.slide_id = {"s-a", "s-b"};
  t.patient_id = {"P1", ""};
  t.metadata.push_back(MetaColumn::from_text("age", MetaType::kInt, {"61", "48"}));
  t.metadata.push_back(MetaColumn::from_text("grade", MetaType::kFloat, {"2.5", ""}));
  t.metadata.push_back(MetaColumn::from_text("site", MetaType::kString, {"lung", "colon, left"}));
  return t;
}

Hit hit(float score, int64_t id, int32_t slide, int64_t x, int64_t y, int32_t shard) {
  Hit h;
  h.score = score;
  h.patch_id = id;
  h.slide = slide;
  h.x = x;
  h.y = y;
  h.tissue = 0.75f;
  h.shard = shard;
  return h;
}

struct Fixture {
  std::vector<QueryInfo> queries = {{"patch 7 (s-a at 0, 64)", 7, 0, 1.5},
                                    {"vectors q.npy row 0", -1, -1, 2.25}};
  std::vector<std::vector<Hit>> hits = {
      {hit(0.98765432f, 7, 0, 0, 64, 2), hit(0.5f, (int64_t{1} << 32) | 3, 1, 128, 0, 0)}, {}};
  Timing timing;
  Fixture() {
    timing.total_s = 0.5;
    timing.queries = 2;
    timing.batch_size = 2;
    timing.latency_ms = {1.5, 2.25};
  }
};

TEST(Report, ColumnsAreTheFixedOnesThenTheMetadata) {
  EXPECT_EQ(report_columns(slides()),
            (std::vector<std::string>{"query", "rank", "score", "patch_id", "slide_id",
                                      "patient_id", "x", "y", "tissue", "shard", "age", "grade",
                                      "site"}));
}

TEST(Report, RowsNumberHitsFromOneAndJoinTheSlidesColumns) {
  const Fixture f;
  const auto rows = report_rows(f.queries, f.hits, slides());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"0", "1", "0.987654", "7", "s-a", "P1", "0", "64",
                                               "0.750", "2", "61", "2.5", "lung"}));
  EXPECT_EQ(rows[1][1], "2");
  EXPECT_EQ(rows[1][3], std::to_string((int64_t{1} << 32) | 3));
  EXPECT_EQ(rows[1][4], "s-b");
  EXPECT_EQ(rows[1][5], "");
  EXPECT_EQ(rows[1][12], "colon, left");
}

TEST(Report, CsvQuotesOnlyWhatNeedsIt) {
  const Fixture f;
  const std::string csv =
      format_report("csv", f.queries, f.hits, slides(), f.timing, nlohmann::json::object());
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "query,rank,score,patch_id,slide_id,patient_id,x,y,tissue,shard,age,grade,site");
  EXPECT_NE(csv.find("\n0,1,0.987654,7,s-a,P1,0,64,0.750,2,61,2.5,lung\n"), std::string::npos)
      << csv;
  EXPECT_NE(csv.find(",\"colon, left\"\n"), std::string::npos) << csv;
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 3);  // header and two hits
}

TEST(Report, JsonCarriesTypedMetadataAndEveryQueryEvenWithoutHits) {
  const Fixture f;
  const nlohmann::json search = {{"k", 2}, {"shards", 3}};
  const auto j = nlohmann::json::parse(
      format_report("json", f.queries, f.hits, slides(), f.timing, search));
  EXPECT_EQ(j.at("search"), search);
  EXPECT_EQ(j.at("timing").at("queries"), 2);
  ASSERT_EQ(j.at("queries").size(), 2u);
  const auto& q0 = j.at("queries")[0];
  EXPECT_EQ(q0.at("query"), 0);
  EXPECT_EQ(q0.at("source"), "patch 7 (s-a at 0, 64)");
  EXPECT_EQ(q0.at("patch_id"), 7);
  EXPECT_EQ(q0.at("latency_ms"), 1.5);
  ASSERT_EQ(q0.at("hits").size(), 2u);
  const auto& h0 = q0.at("hits")[0];
  EXPECT_EQ(h0.at("rank"), 1);
  EXPECT_EQ(h0.at("score"), 0.987654);  // 6 significant digits
  EXPECT_EQ(h0.at("slide_id"), "s-a");
  EXPECT_EQ(h0.at("x"), 0);
  EXPECT_EQ(h0.at("y"), 64);
  EXPECT_EQ(h0.at("shard"), 2);
  EXPECT_TRUE(h0.at("age").is_number_integer());
  EXPECT_EQ(h0.at("age"), 61);
  EXPECT_EQ(h0.at("grade"), 2.5);
  EXPECT_EQ(h0.at("site"), "lung");
  const auto& h1 = q0.at("hits")[1];
  EXPECT_TRUE(h1.at("grade").is_null()) << "a missing float is null, not NaN";
  EXPECT_EQ(h1.at("patient_id"), "");
  const auto& q1 = j.at("queries")[1];
  EXPECT_FALSE(q1.contains("patch_id")) << "a query that is not a stored patch has no patch_id";
  EXPECT_TRUE(q1.at("hits").empty());
}

TEST(Report, TableAlignsColumnsPerQueryAndEndsWithTheSummary) {
  const Fixture f;
  const std::string table =
      format_report("table", f.queries, f.hits, slides(), f.timing, nlohmann::json::object());
  EXPECT_EQ(table.rfind("query 0: patch 7 (s-a at 0, 64) (2 hits, 1.50 ms)\n", 0), 0u) << table;
  EXPECT_NE(table.find("query 1: vectors q.npy row 0 (0 hits, 2.25 ms)\n"), std::string::npos);
  EXPECT_NE(table.find("2 queries in 0.500 s: 4.0 queries/s, latency p50 1.88 ms, p99 2.24 ms\n"),
            std::string::npos)
      << table;
  // Lines of one block have the same column starts; no line ends in a blank.
  std::vector<std::string> lines;
  for (size_t at = 0, next; at < table.size(); at = next + 1) {
    next = table.find('\n', at);
    lines.push_back(table.substr(at, next - at));
  }
  for (const auto& l : lines) EXPECT_TRUE(l.empty() || l.back() != ' ') << "'" << l << "'";
  ASSERT_GE(lines.size(), 4u);
  const std::string& header = lines[1];
  const std::string& first = lines[2];
  EXPECT_EQ(header.find("slide_id"), first.find("s-a")) << header << "\n" << first;
  // Numbers are right-aligned: the score column ends where its header ends.
  EXPECT_EQ(header.find("score") + 5, first.find("0.987654") + 8) << header << "\n" << first;
}

// Issue 28, item 14: JSON without float noise (0.9999998807907104, 4.1936279999999995), and a
// table without the columns few readers need; CSV and JSON keep them.
TEST(Report, JsonRoundsScoresAndTimesAndTheTableShowsTheReadableColumns) {
  Fixture f;
  f.hits[0][0].score = 0.99999988f;
  f.hits[0][0].tissue = 0.3333333f;
  f.queries[0].latency_ms = 4.1936279999999995;
  f.timing.total_s = 0.0021428571428571;
  const std::string json =
      format_report("json", f.queries, f.hits, slides(), f.timing, nlohmann::json::object());
  EXPECT_NE(json.find("\"score\": 1.0,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"tissue\": 0.3333,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"latency_ms\": 4.194,"), std::string::npos) << json;
  EXPECT_NE(json.find("\"seconds\": 0.002143\n"), std::string::npos) << json;
  EXPECT_EQ(json.find("99999"), std::string::npos) << json;
  EXPECT_EQ(round_significant(0.5, 6), 0.5);
  EXPECT_TRUE(std::isnan(round_significant(std::nan(""), 6)));
  EXPECT_EQ(round_significant(-123456789.0, 4), -123500000.0);

  const std::string table =
      format_report("table", f.queries, f.hits, slides(), f.timing, nlohmann::json::object());
  const std::string header = table.substr(table.find('\n') + 1,
                                          table.find('\n', table.find('\n') + 1) - table.find('\n') - 1);
  EXPECT_EQ(header.rfind("rank  score", 0), 0u) << header;
  for (const char* hidden : {"query", "patch_id", "shard"}) {
    EXPECT_EQ(header.find(hidden), std::string::npos) << hidden << ": " << header;
  }
  EXPECT_EQ(table.find(std::to_string((int64_t{1} << 32) | 3)), std::string::npos) << table;
  const std::string csv =
      format_report("csv", f.queries, f.hits, slides(), f.timing, nlohmann::json::object());
  EXPECT_NE(csv.find(std::to_string((int64_t{1} << 32) | 3)), std::string::npos) << csv;
}

// Issue 28, item 2: a built-in model's index gets a notice at the top of the table, and a single
// query no throughput line (its time is in its title).
TEST(Report, ABuiltinModelsTableOpensWithTheRandomWeightNotice) {
  const Fixture f;
  const nlohmann::json builtin = {{"kind", "builtin"}, {"model", "vit-s16"}, {"seed", 0}};
  EXPECT_EQ(model_notice({{"kind", "torchscript"}, {"model", "/m/uni.pt"}}), "");
  EXPECT_EQ(model_notice(nlohmann::json()), "");
  const std::string notice = model_notice(builtin);
  EXPECT_NE(notice.find("built-in model 'vit-s16' has random weights"), std::string::npos);
  const VectorSlideTable table_slides = slides();  // the stream refers to it
  ReportStream stream("table", table_slides, nlohmann::json::object(), notice);
  Timing one;
  one.queries = 1;
  one.total_s = 0.001;
  one.latency_ms = {1};
  const std::string table =
      stream.begin() + stream.batch(0, {f.queries[0]}, {f.hits[0]}) + stream.end(one);
  EXPECT_EQ(table.rfind(notice + "\nquery 0: ", 0), 0u) << table;
  EXPECT_EQ(table.find("queries/s"), std::string::npos) << table;
  ReportStream json("json", table_slides, nlohmann::json::object(), notice);
  EXPECT_EQ(json.begin().find("random"), std::string::npos);
}

TEST(Timing, PercentilesInterpolateAndEmptyTimingsAreZero) {
  Timing t;
  t.queries = 4;
  t.total_s = 2;
  t.latency_ms = {4, 1, 3, 2};
  const auto j = t.to_json();
  EXPECT_EQ(j.at("qps"), 2.0);
  EXPECT_DOUBLE_EQ(j.at("latency_ms").at("p50").get<double>(), 2.5);
  EXPECT_DOUBLE_EQ(j.at("latency_ms").at("p99").get<double>(), 3.97);
  EXPECT_EQ(j.at("latency_ms").at("min"), 1.0);
  EXPECT_EQ(j.at("latency_ms").at("max"), 4.0);
  const auto none = Timing{}.to_json();
  EXPECT_EQ(none.at("qps"), 0.0);
  EXPECT_EQ(none.at("latency_ms").at("p50"), 0.0);
  EXPECT_EQ(none.at("latency_ms").at("max"), 0.0);
}

// Issue 21, case 10: reports are written in pieces per batch of queries.
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

// Issue 21, case 4: patchgen refuses metadata columns named like these (common/store/columns.h),
// so the list there must hold every column query reports besides the metadata.
TEST(BuiltinColumns, EveryColumnQueryReportsIsReserved) {
  const VectorSlideTable no_metadata;
  for (const auto& name : report_columns(no_metadata)) {
    EXPECT_TRUE(is_builtin_column(name)) << name;
  }
}

}  // namespace
}  // namespace tessera::query
