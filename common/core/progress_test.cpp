#include "common/core/progress.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

TEST(Progress, RateAndEta) {
  auto r = make_progress_record("extract", 250, 1000, 5.0);
  EXPECT_DOUBLE_EQ(r.rate, 50.0);
  EXPECT_DOUBLE_EQ(r.eta_s, 15.0);
  EXPECT_EQ(r.to_text(), "extract (rank 0): 250/1000 (25.0%), 50.0/s, ETA 0:00:15");
  EXPECT_EQ(r.to_json()["done"], 250);
}

TEST(Progress, UnknownEtaAndDone) {
  EXPECT_LT(make_progress_record("x", 0, 10, 0.0).eta_s, 0);
  EXPECT_EQ(make_progress_record("x", 10, 10, 2.0).eta_s, 0);
  EXPECT_EQ(make_progress_record("x", 0, 10, 0.0).to_text(),
            "x (rank 0): 0/10 (0.0%), 0.0/s, ETA ?");
}

TEST(Progress, HoursMinutesSeconds) {
  EXPECT_EQ(format_hms(0), "0:00:00");
  EXPECT_EQ(format_hms(0.4), "0:00:00");
  EXPECT_EQ(format_hms(59.6), "0:01:00");
  EXPECT_EQ(format_hms(75), "0:01:15");
  EXPECT_EQ(format_hms(3599), "0:59:59");
  EXPECT_EQ(format_hms(3600), "1:00:00");
  EXPECT_EQ(format_hms(90061), "25:01:01");
  EXPECT_EQ(format_hms(-1), "?");
  EXPECT_EQ(format_hms(std::nan("")), "?");
  EXPECT_EQ(format_hms(INFINITY), "?");
}

TEST(Progress, RankAndPartInTextAndJson) {
  auto r = make_progress_record("embed", 1200, 5000, 4.0, {3, 1, 4});
  EXPECT_EQ(r.to_text(), "embed (rank 3, part 1 of 4): 1200/5000 (24.0%), 300.0/s, ETA 0:00:13");
  auto j = r.to_json();
  EXPECT_EQ(j["rank"], 3);
  EXPECT_EQ(j["part"], 1);
  EXPECT_EQ(j["parts"], 4);
  EXPECT_EQ(j["label"], "embed");
  EXPECT_TRUE(j["time"].is_string());

  ProgressRecord back = ProgressRecord::from_json(j);
  EXPECT_EQ(back.to_text(), r.to_text());
  EXPECT_EQ(back.time, j["time"].get<std::string>());
  EXPECT_EQ(back.to_json(), j);  // the recorded time is kept, not restamped
}

TEST(Progress, FromJsonOfAnOlderRecordDefaultsRankAndPart) {
  auto r = ProgressRecord::from_json(nlohmann::json::parse(
      R"({"done":136,"elapsed_s":0.49,"eta_s":0.0,"label":"extract","rate":279.7,)"
      R"("time":"2026-11-30T16:18:02.135Z","total":136})"));
  EXPECT_EQ(r.source.rank, 0);
  EXPECT_EQ(r.source.part, 0);
  EXPECT_EQ(r.source.parts, 1);
  EXPECT_EQ(r.done, 136);
  EXPECT_EQ(r.to_text(), "extract (rank 0): 136/136 (100.0%), 279.7/s, ETA 0:00:00");
}

TEST(Progress, AppendsJsonLines) {
  auto path = (std::filesystem::temp_directory_path() / "tessera_progress_test.jsonl").string();
  std::filesystem::remove(path);
  {
    Progress progress("p", 4, {0, 2, 3}, true, path, 0.0);
    progress.update(1);
    progress.finish(4);
  }
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["total"], 4);
    EXPECT_EQ(j["rank"], 0);
    EXPECT_EQ(j["part"], 2);
    EXPECT_EQ(j["parts"], 3);
    ++lines;
  }
  EXPECT_EQ(lines, 2);
  std::filesystem::remove(path);
}

TEST(Progress, InactiveReporterWritesNothing) {
  auto path = (std::filesystem::temp_directory_path() / "tessera_progress_inactive.jsonl").string();
  std::filesystem::remove(path);
  {
    Progress progress("p", 4, {1, 0, 1}, false, path, 0.0);
    progress.finish(4);
  }
  EXPECT_FALSE(std::filesystem::exists(path));
}

}  // namespace
}  // namespace tessera
