#include "stages/status/read.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace tessera::status {
namespace {

namespace fs = std::filesystem;

class ReadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("tessera_status_read_{}", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }
  fs::path dir_;
};

TEST_F(ReadTest, JsonProblemsAreNotedOnceNotThrown) {
  std::string problem;
  EXPECT_FALSE(read_json_noted((dir_ / "absent.json").string(), problem));
  EXPECT_EQ(problem, "");  // absent is not a problem
  const std::string bad = write("bad.json", "{\"a\": \"\xff");
  EXPECT_FALSE(read_json_noted(bad, problem));
  EXPECT_NE(problem.find(bad), std::string::npos) << problem;
  EXPECT_NE(problem.find("\\xff"), std::string::npos) << problem;
  const std::string first = problem;
  EXPECT_FALSE(read_json_noted(write("worse.json", "["), problem));
  EXPECT_EQ(problem, first);  // the first problem is kept
  auto good = read_json_noted(write("good.json", R"({"n": 3})"), problem);
  ASSERT_TRUE(good);
  EXPECT_EQ((*good)["n"], 3);
}

TEST(ReadJsonGet, WrongTypesAndAbsenceAreEmpty) {
  const std::optional<nlohmann::json> j = nlohmann::json{{"n", 3}, {"s", "x"}};
  EXPECT_EQ(json_get<int>(j, "n"), 3);
  EXPECT_EQ(json_get<std::string>(j, "s"), "x");
  EXPECT_FALSE(json_get<int>(j, "s"));
  EXPECT_FALSE(json_get<int>(j, "absent"));
  EXPECT_FALSE(json_get<int>(std::nullopt, "n"));
  EXPECT_FALSE(json_get<int>(nlohmann::json::array({1}), "n"));
}

TEST_F(ReadTest, LastProgressSkipsHalfWrittenAndBlankLines) {
  EXPECT_FALSE(last_progress((dir_ / "absent.jsonl").string()));
  EXPECT_FALSE(last_progress(write("empty.jsonl", "")));
  const std::string p = write("p.jsonl", "{\"done\": 1}\n{\"done\": 2}\n\n  \n[3]\n{\"do");
  auto last = last_progress(p);
  ASSERT_TRUE(last);
  EXPECT_EQ((*last)["done"], 2);  // "[3]" is not an object, the last line is half-written
  // Only the last 64 KiB are read: a record before them is not found.
  const std::string far = write("far.jsonl", "{\"done\": 9}\n" + std::string(70 * 1024, ' '));
  EXPECT_FALSE(last_progress(far));
}

}  // namespace
}  // namespace tessera::status
