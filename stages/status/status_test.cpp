#include "stages/status/status.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/layout.h"
#include "common/stage/marker.h"
#include "stages/status/status_test_fixture.h"

namespace tessera::status {
namespace {

namespace fs = std::filesystem;
using test_support::StatusTest;


TEST(StatusFormat, Ranks) {
  EXPECT_EQ(format_ranks({}), "-");
  EXPECT_EQ(format_ranks({3}), "3");
  EXPECT_EQ(format_ranks({0, 1, 2, 5, 7, 8}), "0-2,5,7-8");
  EXPECT_EQ(format_ranks({0, 2, 4}), "0,2,4");
}

TEST_F(StatusTest, CompleteRunWithIngest) {
  complete("patchgen", "patchgen", 2,
           {{"patches", 7200},
            {"slides_ok", 3},
            {"slides_failed", 0},
            {"failed", nlohmann::json::array()}});
  complete("embed/vit-s16", "embed", 2, {{"patches", 7200}, {"slides", 3}});
  start("ingest/vit-s16/gen-00000", "ingest", 2, {{"tag", "vit-s16"}, {"name", "vit-s16"}});
  success("ingest/vit-s16/gen-00000", "ingest", 2, {{"rows", 7200}});
  write(dir("ingest/vit-s16/catalog.json"), R"({"tag": "vit-s16", "parts_in": [0], "generations": [{"generation": 0}]})");
  write(dir("patchgen/progress.jsonl"),
        R"({"label":"extract","rank":0,"part":0,"parts":1,"done":3600,"total":3600,"elapsed_s":8,)"
        R"("rate":450,"eta_s":0,"time":"2026-11-30T10:59:00.000Z"})" "\n");

  RunStatus s = scan();
  ASSERT_EQ(s.stages.size(), 3u);
  EXPECT_EQ(s.stages[0].stage, "patchgen");
  EXPECT_EQ(s.stages[1].stage, "embed");
  EXPECT_EQ(s.stages[2].stage, "ingest");
  for (const auto& row : s.stages) {
    EXPECT_EQ(row.state, State::kComplete) << row.dir;
    EXPECT_EQ(row.ranks_done, (std::vector<int>{0, 1}));
    EXPECT_TRUE(row.ranks_missing.empty());
    EXPECT_TRUE(row.next.empty());
    ASSERT_TRUE(row.duration_s);
    EXPECT_DOUBLE_EQ(*row.duration_s, 3723.5);
    ASSERT_TRUE(row.rows_per_s);
    EXPECT_DOUBLE_EQ(*row.rows_per_s, 7200 / 3723.5);
  }
  EXPECT_EQ(s.stages[2].tag, "vit-s16");
  EXPECT_EQ(*s.stages[1].slides_ok, 3);
  EXPECT_TRUE(s.next.empty());
  EXPECT_EQ(exit_code(s), 0);
  EXPECT_EQ(format_incomplete(s), "");

  const std::string table = format_table(s);
  EXPECT_NE(table.find("patchgen  -         0 of 1  complete  2/2    7200  3        1:02:04"
                       "     1.9\n"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("all 3 stage directories complete"), std::string::npos);

  nlohmann::json j = to_json(s);
  EXPECT_EQ(j["format_version"], 1);
  EXPECT_EQ(j["exit_code"], 0);
  EXPECT_TRUE(j["complete"].get<bool>());
  const auto& p = j["stages"][0];
  for (const char* key : {"stage", "tag", "name", "generation", "part", "parts", "dir", "state",
                          "world_size", "ranks_done", "ranks_missing", "exit_code", "status",
                          "rows", "slides_ok", "slides_failed", "failed_slides", "duration_s",
                          "rows_per_s", "progress", "next", "problem"}) {
    EXPECT_TRUE(p.contains(key)) << key;
  }
  EXPECT_EQ(p["state"], "complete");
  EXPECT_TRUE(p["tag"].is_null());
  EXPECT_TRUE(p["next"].is_null());
  EXPECT_EQ(p["rows"], 7200);
  EXPECT_EQ(p["progress"]["done"], 3600);
  EXPECT_EQ(j["stages"][1]["tag"], "vit-s16");
  EXPECT_EQ(j["stages"][2]["name"], "vit-s16");
  EXPECT_EQ(j["stages"][2]["generation"], 0);
  EXPECT_TRUE(j["next"].is_array() && j["next"].empty());

  std::string out;
  EXPECT_EQ(main({run_.string(), "--json"}, &out), 0);
  EXPECT_EQ(nlohmann::json::parse(out)["stages"].size(), 3u);
}

TEST_F(StatusTest, IncompleteListsRanksFromMarkersAndResumes) {
  start("patchgen", "patchgen", 4);
  marker("patchgen", 0, 4, 100, "2026-11-30T10:00:00.000Z", "2026-11-30T10:00:20.000Z");
  marker("patchgen", 2, 4, 60, "2026-11-30T10:00:05.000Z", "2026-11-30T10:00:30.000Z");
  marker("patchgen", 3, 4, 50);
  // Rank 3's shard was damaged after its marker: its work is redone, so it counts as missing.
  write(dir("patchgen/shards/rank-00003.h5"), "short");
  // A marker of another configuration is not valid either.
  write(dir("patchgen/markers/rank-00001.json"),
        marker_base("patchgen", 1, 4, "another").dump());
  write(dir("patchgen/progress.jsonl"),
        R"({"label":"extract","rank":0,"part":0,"parts":1,"done":100,"total":400,"elapsed_s":10,)"
        R"("rate":10,"eta_s":3725,"time":"2026-11-30T10:00:10.000Z"})" "\n"
        R"({"label":"extract","rank":0,"part":0,"parts":1,"do)");  // half-written last line

  RunStatus s = scan();
  ASSERT_EQ(s.stages.size(), 1u);
  const StageStatus& p = s.stages[0];
  EXPECT_EQ(p.state, State::kIncomplete);
  EXPECT_EQ(*p.world_size, 4);
  EXPECT_EQ(p.ranks_done, (std::vector<int>{0, 2}));
  EXPECT_EQ(p.ranks_missing, (std::vector<int>{1, 3}));
  EXPECT_EQ(*p.rows, 160);
  EXPECT_DOUBLE_EQ(*p.duration_s, 30.0);
  EXPECT_FALSE(p.exit_code);
  const std::string config = dir("patchgen/config.ini");
  EXPECT_EQ(p.next, "mpirun -np 4 patchgen --config " + config + " --out " + run_.string());
  EXPECT_EQ(s.next, std::vector<std::string>{p.next});
  ASSERT_TRUE(p.progress);
  EXPECT_EQ((*p.progress)["done"], 100);
  EXPECT_EQ(exit_code(s), kExitNotComplete);
  EXPECT_EQ(format_incomplete(s), "patchgen - 0 1 incomplete\n");

  const std::string table = format_table(s);
  EXPECT_NE(table.find("patchgen part 0 of 1: incomplete, ranks done 0,2, missing 1,3"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("last progress: extract (rank 0): 100/400 (25.0%), 10.0/s, ETA 1:02:05"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("next:\n  mpirun -np 4 patchgen --config " + config + " --out " + run_.string()),
            std::string::npos);
  EXPECT_NE(table.find("0 of 1 stage directories complete"), std::string::npos);

  nlohmann::json j = to_json(s)["stages"][0];
  EXPECT_EQ(j["ranks_done"], nlohmann::json({0, 2}));
  EXPECT_EQ(j["ranks_missing"], nlohmann::json({1, 3}));
  EXPECT_TRUE(j["exit_code"].is_null());
  EXPECT_EQ(j["next"], p.next);
  EXPECT_EQ(main({"--run", run_.string()}), kExitNotComplete);
}

TEST_F(StatusTest, FailedSlidesAreCompleteWithFailures) {
  complete("patchgen", "patchgen", 1,
           {{"status", "completed_with_failures"},
            {"exit_code", 3},
            {"patches", 10},
            {"slides_ok", 1},
            {"slides_failed", 2},
            {"failed", {{{"slide_id", "S2"}, {"reason", "no tissue"}},
                        {{"slide_id", "S3"}, {"reason", "cannot open"}}}}});
  RunStatus s = scan();
  const StageStatus& p = s.stages.at(0);
  EXPECT_EQ(p.state, State::kCompleteWithFailures);
  EXPECT_EQ(*p.exit_code, 3);
  EXPECT_EQ(*p.slides_failed, 2);
  ASSERT_EQ(p.failed_slides.size(), 2u);
  EXPECT_EQ(p.failed_slides[1].slide_id, "S3");
  EXPECT_EQ(p.failed_slides[1].reason, "cannot open");
  EXPECT_EQ(exit_code(s), 0);  // nothing a rerun would change
  EXPECT_EQ(format_incomplete(s), "");
  const std::string table = format_table(s);
  EXPECT_NE(table.find("complete_with_failures"), std::string::npos);
  EXPECT_NE(table.find("1 (+2 failed)"), std::string::npos) << table;
  EXPECT_NE(table.find("failed slides:\n  patchgen part 0 of 1: S2: no tissue\n"
                       "  patchgen part 0 of 1: S3: cannot open\n"),
            std::string::npos)
      << table;
  nlohmann::json j = to_json(s)["stages"][0];
  EXPECT_EQ(j["failed_slides"][0], (nlohmann::json{{"slide_id", "S2"}, {"reason", "no tissue"}}));
  EXPECT_EQ(j["status"], "completed_with_failures");
  EXPECT_EQ(j["exit_code"], 3);
}

TEST_F(StatusTest, StaleEmbedIsRerunFromItsConfig) {
  complete("patchgen", "patchgen", 2, {{"patches", 10}});
  complete("embed/uni", "embed", 3, {{"patches", 10}});
  write(dir("embed/uni/_STALE"), R"({"reason": "its input was replaced"})");
  RunStatus s = scan();
  const StageStatus& e = find(s, "embed", 0, "uni");
  EXPECT_EQ(e.state, State::kStale);
  EXPECT_TRUE(e.ranks_done.empty());
  EXPECT_EQ(e.ranks_missing, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(e.next, "mpirun -np 3 embed --config " + dir("embed/uni/config.ini") + " --run " +
                        run_.string());
  EXPECT_EQ(format_incomplete(s), "embed uni 0 1 stale\n");
  EXPECT_EQ(exit_code(s), kExitNotComplete);
  EXPECT_EQ(s.next, std::vector<std::string>{e.next});  // no ingest suggested for a stale tag
}

TEST_F(StatusTest, MissingPartsAreStartedFromASiblingsConfig) {
  complete("patchgen/part-00000-of-00003", "patchgen", 2, {{"patches", 5}});
  complete("patchgen/part-00002-of-00003", "patchgen", 2, {{"patches", 5}});
  complete("embed/uni/part-00000-of-00003", "embed", 4, {{"patches", 5}});
  start("embed/uni/part-00002-of-00003", "embed", 4);
  RunStatus s = scan();
  ASSERT_EQ(s.stages.size(), 6u);
  const StageStatus& p1 = find(s, "patchgen", 1);
  EXPECT_EQ(p1.state, State::kMissing);
  EXPECT_EQ(p1.parts, 3);
  EXPECT_EQ(p1.dir, dir("patchgen/part-00001-of-00003"));
  EXPECT_EQ(p1.next, "mpirun -np 2 patchgen --config " +
                         dir("patchgen/part-00000-of-00003/config.ini") + " --part 1 --parts 3 --out " +
                         run_.string());
  const StageStatus& e1 = find(s, "embed", 1, "uni");
  EXPECT_EQ(e1.state, State::kMissing);
  EXPECT_EQ(e1.next, "mpirun -np 4 embed --config " +
                         dir("embed/uni/part-00000-of-00003/config.ini") + " --part 1 --parts 3 --run " +
                         run_.string());
  const StageStatus& e2 = find(s, "embed", 2, "uni");
  EXPECT_EQ(e2.state, State::kIncomplete);
  EXPECT_EQ(e2.ranks_missing, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(e2.next,
            "mpirun -np 4 embed --config " + dir("embed/uni/part-00002-of-00003/config.ini") +
                " --run " + run_.string());
  // Patchgen's commands come before embed's.
  EXPECT_EQ(s.next, (std::vector<std::string>{p1.next, e1.next, e2.next}));
  EXPECT_EQ(format_incomplete(s),
            "patchgen - 1 3 missing\n"
            "embed uni 1 3 missing\n"
            "embed uni 2 3 incomplete\n");
  EXPECT_EQ(to_json(s)["stages"][1]["state"], "missing");
}

TEST_F(StatusTest, IngestAppendDueForPartsNotInTheCatalog) {
  for (int p = 0; p < 2; ++p) {
    complete(fmt::format("patchgen/part-{:05d}-of-00002", p), "patchgen", 2, {{"patches", 5}});
    complete(fmt::format("embed/uni/part-{:05d}-of-00002", p), "embed", 2, {{"patches", 5}});
  }
  start("ingest/uni-flat/gen-00000", "ingest", 3, {{"tag", "uni"}, {"name", "uni-flat"}});
  success("ingest/uni-flat/gen-00000", "ingest", 3, {{"rows", 5}});
  write(dir("ingest/uni-flat/catalog.json"), R"({"tag": "uni", "parts_in": [0], "generations": [{"generation": 0}]})");

  RunStatus s = scan();
  const StageStatus& g0 = find(s, "ingest", 0, "uni-flat");
  EXPECT_EQ(g0.state, State::kComplete);
  EXPECT_EQ(g0.tag, "uni");
  const StageStatus& g1 = find(s, "ingest", 1, "uni-flat");
  EXPECT_EQ(g1.state, State::kMissing);
  EXPECT_EQ(g1.parts, 2);
  EXPECT_EQ(g1.next, "mpirun -np 3 ingest --config " + dir("ingest/uni-flat/gen-00000/config.ini") +
                         " --tag uni --name uni-flat --append --embed-parts all --run " + run_.string());
  EXPECT_EQ(s.next, std::vector<std::string>{g1.next});
  EXPECT_EQ(format_incomplete(s), "ingest uni-flat 1 2 missing\n");
  EXPECT_EQ(exit_code(s), kExitNotComplete);

  // Once the append ran (and was interrupted), it is resumed with --append.
  start("ingest/uni-flat/gen-00001", "ingest", 3, {{"tag", "uni"}, {"name", "uni-flat"}});
  s = scan();
  const StageStatus& r1 = find(s, "ingest", 1, "uni-flat");
  EXPECT_EQ(r1.state, State::kIncomplete);
  EXPECT_EQ(r1.next, "mpirun -np 3 ingest --config " + dir("ingest/uni-flat/gen-00001/config.ini") +
                         " --tag uni --name uni-flat --append --run " + run_.string());
  EXPECT_EQ(s.stages.size(), 6u);  // no second due generation while one is unfinished

  // Every part in the catalog: nothing left.
  success("ingest/uni-flat/gen-00001", "ingest", 3, {{"rows", 5}});
  write(dir("ingest/uni-flat/catalog.json"), R"({"tag": "uni", "parts_in": [0, 1], )"
                                                 R"("generations": [{"generation": 0}, {"generation": 1}]})");
  s = scan();
  EXPECT_EQ(exit_code(s), 0);
  EXPECT_TRUE(s.next.empty());
}

TEST_F(StatusTest, IngestSuggestedForACompleteEmbedTag) {
  complete("patchgen", "patchgen", 2, {{"patches", 5}});
  complete("embed/uni", "embed", 2, {{"patches", 5}});
  RunStatus s = scan();
  EXPECT_EQ(exit_code(s), 0);  // a suggestion, not a stage directory that is not complete
  EXPECT_EQ(s.next, std::vector<std::string>{"mpirun -np 2 ingest --run " + run_.string() +
                                             " --tag uni"});
  EXPECT_EQ(format_incomplete(s), "");
  EXPECT_EQ(to_json(s)["next"][0], s.next[0]);
}

TEST_F(StatusTest, RunningWhileAnotherProcessHoldsTheRanksLock) {
  start("patchgen", "patchgen", 2);
  marker("patchgen", 1, 2, 10);
  const std::string lock = dir("patchgen/.ranks.lock");
  int ready[2], done[2];
  ASSERT_EQ(::pipe(ready), 0);
  ASSERT_EQ(::pipe(done), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    auto held = FileLock::try_acquire(lock, nullptr, FileLock::Mode::kShared);
    char c = held ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    (void)!::read(done[0], &c, 1);
    ::_exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  RunStatus s = scan();
  c = 'x';
  (void)!::write(done[1], &c, 1);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  const StageStatus& p = s.stages.at(0);
  EXPECT_EQ(p.state, State::kRunning);
  EXPECT_EQ(p.ranks_done, std::vector<int>{1});
  EXPECT_EQ(p.ranks_missing, std::vector<int>{0});
  EXPECT_TRUE(p.next.empty());  // wait for it
  EXPECT_EQ(format_incomplete(s), "patchgen - 0 1 running\n");
  EXPECT_EQ(exit_code(s), kExitNotComplete);
  // The lock died with the process: the directory is incomplete now.
  EXPECT_EQ(scan().stages.at(0).state, State::kIncomplete);
}

TEST_F(StatusTest, BadRunDirectoriesAndOptions) {
  EXPECT_EQ(main({(run_ / "absent").string()}), 2);
  EXPECT_EQ(main({run_.string()}), 2);  // no patchgen/, embed/, ingest/
  EXPECT_THROW(scan(), InvalidInput);
  EXPECT_EQ(main({}), 2);
  EXPECT_EQ(main({"--bogus"}), 2);
  complete("patchgen", "patchgen", 1);
  EXPECT_EQ(main({run_.string(), "--json", "--incomplete"}), 2);
  std::string out;
  EXPECT_EQ(main({"--help"}, &out), 0);
  EXPECT_NE(out.find("--incomplete"), std::string::npos);
  EXPECT_EQ(main({run_.string() + "/", "--incomplete"}, &out), 0);
  EXPECT_EQ(out, "");
}

// config.ini keeps --run as the stage was given it (relative to where it ran, or the run's place
// before a move): a next command without --run acted on another run, or none, from elsewhere.
TEST_F(StatusTest, NextCommandsNameTheRunTheyActOn) {
  complete("patchgen", "patchgen", 2, {{"patches", 10}});
  start("embed/uni", "embed", 2);
  write(dir("embed/uni/config.ini"), "run = elsewhere\ntag = uni\n");
  RunStatus s = scan();
  ASSERT_EQ(s.next.size(), 1u);
  EXPECT_EQ(s.next[0], "mpirun -np 2 embed --config " + dir("embed/uni/config.ini") + " --run " +
                           run_.string());
}

TEST_F(StatusTest, PathsWithSpacesAreQuotedInCommands) {
  run_ /= "my run";
  fs::create_directories(run_);
  start("patchgen", "patchgen", 1);
  RunStatus s = scan();
  EXPECT_EQ(s.stages.at(0).next, "mpirun -np 1 patchgen --config '" + dir("patchgen/config.ini") +
                                     "' --out '" + run_.string() + "'");
  fs::remove_all(run_);
  run_ = run_.parent_path();
}

}  // namespace
}  // namespace tessera::status

namespace tessera::status {
namespace {

using test_support::StatusTest;

TEST_F(StatusTest, RunningServicesAreListedAndStaleRegistrationsIgnored) {
  complete("patchgen", "patchgen", 1, {{"patches", 5}});
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  // This process stands for a running service; a pid that cannot exist for one that was killed.
  write(dir("serve/uni.json"), nlohmann::json{{"index", dir("ingest/uni")}, {"host", host},
                                              {"port", 8470}, {"url", "http://127.0.0.1:8470/"},
                                              {"pid", ::getpid()}, {"ranks", 2}}.dump());
  write(dir("serve/old.json"), nlohmann::json{{"index", "x"}, {"host", host}, {"port", 1},
                                              {"pid", 2147483647}}.dump());
  const RunStatus s = scan();
  ASSERT_EQ(s.services.size(), 1u);
  EXPECT_EQ(s.services[0].at("port"), 8470);
  EXPECT_NE(format_table(s).find("serving:\n  " + dir("ingest/uni") + " at http://127.0.0.1:8470/"),
            std::string::npos) << format_table(s);
  EXPECT_EQ(to_json(s).at("services").size(), 1u);
}

}  // namespace
}  // namespace tessera::status
