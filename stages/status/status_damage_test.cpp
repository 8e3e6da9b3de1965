#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "stages/status/state.h"
#include "stages/status/status.h"
#include "stages/status/status_test_fixture.h"

// tessera-status on damaged run directories: a problem named, never a crash, a hang or a command
// that fails as printed.
namespace tessera::status {
namespace {

namespace fs = std::filesystem;
using test_support::StatusTest;

TEST_F(StatusTest, DamagedJsonIsAProblemNotACrash) {
  start("patchgen", "patchgen", 1);
  write(dir("patchgen/_SUCCESS"), "{not json");
  RunStatus s = scan();
  const StageStatus& p = s.stages.at(0);
  EXPECT_EQ(p.state, State::kIncomplete);
  EXPECT_NE(p.problem.find("_SUCCESS"), std::string::npos) << p.problem;
  EXPECT_NE(format_table(s).find(p.problem), std::string::npos);
}

// Issue 21, case 15: one non-UTF-8 byte in _SUCCESS, catalog.json or run.json; --json still prints
// valid JSON, naming the damaged file.
TEST_F(StatusTest, JsonIsValidAndNamesTheDamageWithNonUtf8Bytes) {
  for (const char* file : {"_SUCCESS", "catalog.json", "run.json"}) {
    SCOPED_TRACE(file);
    fs::remove_all(run_);
    complete("embed/t", "embed", 1, {{"patches", 5}});
    start("ingest/t/gen-00000", "ingest", 1, {{"tag", "t"}, {"name", "t"}});
    success("ingest/t/gen-00000", "ingest", 1, {{"rows", 5}});
    write(dir("ingest/t/catalog.json"), R"({"tag": "t", "parts_in": [0], "generations": [{"generation": 0}]})");
    const std::string damaged = std::string(file) == "catalog.json"
                                    ? dir("ingest/t/catalog.json")
                                    : dir("ingest/t/gen-00000/") + file;
    write(damaged, "{\"stage\": \"br\xe9" "ast\"}");
    std::string out;
    EXPECT_EQ(main({run_.string(), "--json"}, &out), kExitNotComplete);
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(out)) << out;
    const auto& g0 = j["stages"][1];
    EXPECT_EQ(g0["stage"], "ingest");
    EXPECT_NE(g0["state"], "complete");
    ASSERT_TRUE(g0["problem"].is_string()) << g0.dump();
    const std::string problem = g0["problem"];
    EXPECT_NE(problem.find(damaged), std::string::npos) << problem;
    EXPECT_NE(problem.find("\\xe9"), std::string::npos) << problem;
    EXPECT_FALSE(j["complete"].get<bool>());
  }
  // A folder name that is not UTF-8 is shown, not a failure.
  fs::remove_all(run_);
  complete("embed/t\xff", "embed", 1, {{"patches", 5}});
  std::string out;
  EXPECT_EQ(main({run_.string(), "--json"}, &out), 0);
  EXPECT_NO_THROW(nlohmann::json::parse(out)) << out;
}

// Issue 21, case 12: a deleted catalog.json leaves the index unusable: not complete, and the next
// command reruns ingest.
TEST_F(StatusTest, IngestWithoutItsCatalogIsNotComplete) {
  complete("embed/t", "embed", 2, {{"patches", 5}});
  for (int g = 0; g < 2; ++g) {
    const std::string gen = fmt::format("ingest/t/gen-{:05d}", g);
    start(gen, "ingest", 2, {{"tag", "t"}, {"name", "t"}});
    success(gen, "ingest", 2, {{"rows", 5}});
  }
  RunStatus s = scan();
  for (int g = 0; g < 2; ++g) {
    const StageStatus& row = find(s, "ingest", g, "t");
    EXPECT_EQ(row.state, State::kIncomplete);
    EXPECT_NE(row.problem.find("catalog.json is missing"), std::string::npos) << row.problem;
    EXPECT_EQ(row.next, fmt::format("mpirun -np 2 ingest --config {} --tag t --name t{} --run {}",
                                    dir(fmt::format("ingest/t/gen-{:05d}/config.ini", g)),
                                    g > 0 ? " --append" : "", run_.string()));
  }
  EXPECT_EQ(exit_code(s), kExitNotComplete);
  // A catalog written before the last generation finished lists only the first.
  write(dir("ingest/t/catalog.json"), R"({"tag": "t", "parts_in": [0], "generations": [{"generation": 0}]})");
  s = scan();
  EXPECT_EQ(find(s, "ingest", 0, "t").state, State::kComplete);
  EXPECT_EQ(find(s, "ingest", 1, "t").state, State::kIncomplete);
  EXPECT_NE(find(s, "ingest", 1, "t").problem.find("does not list generation 1"), std::string::npos);
}

// Issue 30, item 16: a world size no job had (damage, or an edit) costs nothing: the scan reads
// what is on disk, and the stage is shown damaged, with no command to rerun it.
TEST_F(StatusTest, AHugeOrNonPositiveWorldSizeIsDamageNotWork) {
  for (const int world : {2147483647, kMaxWorldSize + 1, 0, -5}) {
    SCOPED_TRACE(world);
    fs::remove_all(run_);
    start("patchgen", "patchgen", world);
    std::string out;
    EXPECT_EQ(main({run_.string(), "--json"}, &out), kExitNotComplete);
    const nlohmann::json j = nlohmann::json::parse(out);
    const auto& p = j["stages"][0];
    EXPECT_EQ(p["state"], "incomplete");
    EXPECT_TRUE(p["world_size"].is_null());
    EXPECT_TRUE(p["ranks_missing"].empty()) << p["ranks_missing"].size();
    EXPECT_NE(p["problem"].get<std::string>().find("not a rank count"), std::string::npos)
        << p.dump();
    EXPECT_TRUE(j["next"].empty()) << j["next"].dump();
  }
  // The largest accepted one is listed from the markers present, and resumes.
  fs::remove_all(run_);
  start("patchgen", "patchgen", kMaxWorldSize);
  marker("patchgen", 7, kMaxWorldSize, 3);
  const StageStatus p = scan().stages.at(0);
  EXPECT_EQ(p.ranks_done, std::vector<int>{7});
  EXPECT_EQ(p.ranks_missing.size(), static_cast<size_t>(kMaxWorldSize - 1));
  EXPECT_EQ(p.next.rfind(fmt::format("mpirun -np {} patchgen", kMaxWorldSize), 0), 0u) << p.next;
}

// Issue 30, item 16: a next command is printed only where it can succeed. A slide-level index
// whose run.json is garbage, or whose aggregate output is gone (its folder missing or emptied),
// says what is wrong instead; no ingest --level suggestion collides with its folder.
TEST_F(StatusTest, DamagedSlideLevelIndexesGetAProblemNotAFailingCommand) {
  const auto slide_index = [&](bool finished) {
    fs::remove_all(run_);
    complete("embed/uni", "embed", 1, {{"patches", 10}});
    start(aggregate("mean-uni"), "aggregate", 1, {{"tag", "uni"}, {"level", "slide"}});
    success(aggregate("mean-uni"), "aggregate", 1, {{"vectors", 4}});
    start("ingest/mean-uni", "ingest", 1, {{"level", "slide"}, {"slides", "mean-uni"}});
    if (finished) success("ingest/mean-uni", "ingest", 1, {{"rows", 4}});
    write(dir("ingest/mean-uni/slide_catalog.json"), R"({"format_version": 1})");
  };
  const std::string patch_ingest = "mpirun -np 1 ingest --run " + run_.string() + " --tag uni";

  slide_index(true);
  write(dir("ingest/mean-uni/run.json"), "{garbage");
  RunStatus s = scan();
  EXPECT_TRUE(find(s, "ingest", 0, "mean-uni").next.empty());
  EXPECT_FALSE(find(s, "ingest", 0, "mean-uni").problem.empty());
  EXPECT_EQ(s.next, std::vector<std::string>{patch_ingest});  // no --level slide --slides mean-uni

  for (const bool emptied : {false, true}) {
    SCOPED_TRACE(emptied);
    slide_index(false);  // killed before _SUCCESS: resumed from config.ini, if its input is there
    ASSERT_EQ(scan().next.front(), "mpirun -np 1 ingest --config " +
                                       dir("ingest/mean-uni/config.ini") + " --run " +
                                       run_.string());
    fs::remove_all(dir(aggregate("mean-uni")));
    if (!emptied) fs::remove_all(fs::path(dir(aggregate("mean-uni"))).parent_path());
    s = scan();
    const StageStatus& index = find(s, "ingest", 0, "mean-uni");
    EXPECT_TRUE(index.next.empty()) << index.next;
    EXPECT_NE(index.problem.find("aggregate output 'mean-uni' is missing"), std::string::npos)
        << index.problem;
    EXPECT_EQ(s.next, std::vector<std::string>{patch_ingest});
  }

  // Its aggregate output damaged: no command for the index either, and the reason is passed on.
  slide_index(false);
  write(dir(aggregate("mean-uni") + "/run.json"), "{garbage");
  s = scan();
  EXPECT_TRUE(find(s, "ingest", 0, "mean-uni").next.empty());
  EXPECT_NE(find(s, "ingest", 0, "mean-uni").problem.find("is incomplete"), std::string::npos)
      << find(s, "ingest", 0, "mean-uni").problem;
}

}  // namespace
}  // namespace tessera::status
