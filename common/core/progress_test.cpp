#include "common/core/progress.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace tessera {
namespace {

TEST(Progress, RateAndEta) {
  auto r = make_progress_record("extract", 250, 1000, 5.0);
  EXPECT_DOUBLE_EQ(r.rate, 50.0);
  EXPECT_DOUBLE_EQ(r.eta_s, 15.0);
  EXPECT_EQ(r.to_text(), "extract: 250/1000 (25.0%), 50.0/s, ETA 15s");
  EXPECT_EQ(r.to_json()["done"], 250);
}

TEST(Progress, UnknownEtaAndDone) {
  EXPECT_LT(make_progress_record("x", 0, 10, 0.0).eta_s, 0);
  EXPECT_EQ(make_progress_record("x", 10, 10, 2.0).eta_s, 0);
}

TEST(Progress, AppendsJsonLines) {
  auto path = (std::filesystem::temp_directory_path() / "tessera_progress_test.jsonl").string();
  std::filesystem::remove(path);
  {
    Progress progress("p", 4, true, path, 0.0);
    progress.update(1);
    progress.finish(4);
  }
  std::ifstream in(path);
  std::string line;
  int lines = 0;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j["total"], 4);
    ++lines;
  }
  EXPECT_EQ(lines, 2);
}

}  // namespace
}  // namespace tessera
