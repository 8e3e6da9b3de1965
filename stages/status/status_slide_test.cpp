// tessera-status on aggregate outputs and slide- and patient-level indexes: what is complete,
// stale or unfinished, and the commands that rerun them in chain order.
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

// Issue 19: aggregate outputs and slide- or patient-level indexes are rows with their level; a
// complete aggregate output that no index takes in gets an ingest --level suggestion.
TEST_F(StatusTest, AggregateOutputsAndSlideLevelIndexes) {
  complete("patchgen", "patchgen", 2, {{"patches", 10}});
  complete("embed/uni", "embed", 2, {{"patches", 10}});
  start(aggregate("mean-uni"), "aggregate", 2, {{"tag", "uni"}, {"level", "slide"}});
  success(aggregate("mean-uni"), "aggregate", 2, {{"vectors", 4}, {"level", "slide"}});
  start(aggregate("mean-uni-patient"), "aggregate", 3, {{"tag", "uni"}, {"level", "patient"}});
  success(aggregate("mean-uni-patient"), "aggregate", 3, {{"vectors", 2}, {"level", "patient"}});
  start("ingest/mean-uni", "ingest", 1, {{"level", "slide"}, {"slides", "mean-uni"}});
  success("ingest/mean-uni", "ingest", 1, {{"rows", 4}});
  write(dir("ingest/mean-uni/slide_catalog.json"), R"({"format_version": 1})");
  start("ingest/uni/gen-00000", "ingest", 2, {{"tag", "uni"}, {"name", "uni"}});
  success("ingest/uni/gen-00000", "ingest", 2, {{"rows", 10}});
  write(dir("ingest/uni/catalog.json"),
        R"({"tag": "uni", "parts_in": [0], "generations": [{"generation": 0}]})");

  RunStatus s = scan();
  ASSERT_EQ(s.stages.size(), 6u);
  const StageStatus& a = s.stages[2];
  EXPECT_EQ(a.stage, "aggregate");
  EXPECT_EQ(a.name, "mean-uni");
  EXPECT_EQ(a.tag, "uni");  // the embed tag it read
  EXPECT_EQ(a.level, "slide");
  EXPECT_EQ(*a.rows, 4);
  EXPECT_EQ(a.state, State::kComplete);
  EXPECT_EQ(s.stages[3].level, "patient");
  const StageStatus& index = s.stages[4];
  EXPECT_EQ(index.stage, "ingest");
  EXPECT_EQ(index.name, "mean-uni");
  EXPECT_EQ(index.tag, "mean-uni");  // the aggregate output it indexes
  EXPECT_EQ(index.level, "slide");
  EXPECT_EQ(index.dir, dir("ingest/mean-uni"));
  EXPECT_EQ(index.state, State::kComplete);
  EXPECT_EQ(s.stages[5].level, "patch");
  EXPECT_EQ(exit_code(s), 0);
  // The patient-level output is not indexed yet: suggested, with one rank.
  EXPECT_EQ(s.next, std::vector<std::string>{"mpirun -np 1 ingest --run " + run_.string() +
                                             " --level patient --slides mean-uni-patient"});

  const std::string table = format_table(s);
  EXPECT_NE(table.find("aggregate  mean-uni          0 of 1  complete  2/2"), std::string::npos)
      << table;
  EXPECT_NE(table.find("ingest     mean-uni          slide   complete  1/1"), std::string::npos)
      << table;
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j["stages"][2]["name"], "mean-uni");
  EXPECT_EQ(j["stages"][2]["tag"], "uni");
  EXPECT_EQ(j["stages"][2]["level"], "slide");
  EXPECT_TRUE(j["stages"][4]["generation"].is_null());
  EXPECT_EQ(j["stages"][4]["level"], "slide");
  EXPECT_EQ(j["stages"][5]["generation"], 0);
  EXPECT_TRUE(j["stages"][0]["level"].is_null());
}

// embed --overwrite marks the aggregate outputs and the indexes made from them stale: each is
// rerun from its own config.ini, in chain order.
TEST_F(StatusTest, StaleAggregateAndSlideIndexAreRerunInChainOrder) {
  complete("patchgen", "patchgen", 2, {{"patches", 10}});
  complete("embed/uni", "embed", 2, {{"patches", 10}});
  start(aggregate("mean-uni"), "aggregate", 2, {{"tag", "uni"}, {"level", "slide"}});
  success(aggregate("mean-uni"), "aggregate", 2, {{"vectors", 4}});
  write(dir(aggregate("mean-uni") + "/_STALE"), R"({"reason": "its input was replaced"})");
  start("ingest/mean-uni", "ingest", 1, {{"level", "slide"}, {"slides", "mean-uni"}});
  success("ingest/mean-uni", "ingest", 1, {{"rows", 4}});
  write(dir("ingest/mean-uni/slide_catalog.json"), R"({"format_version": 1})");
  write(dir("ingest/mean-uni/_STALE"), R"({"reason": "its input was replaced"})");

  RunStatus s = scan();
  const StageStatus& a = find(s, "aggregate", 0);
  const StageStatus& index = find(s, "ingest", 0, "mean-uni");
  EXPECT_EQ(a.state, State::kStale);
  EXPECT_EQ(index.state, State::kStale);
  // Started afresh: what config.ini may have left to defaults is spelt out.
  EXPECT_EQ(a.next, "mpirun -np 2 aggregate --config " +
                        dir(aggregate("mean-uni") + "/config.ini") +
                        " --tag uni --name mean-uni --run " + run_.string());
  EXPECT_EQ(index.next, "mpirun -np 1 ingest --config " + dir("ingest/mean-uni/config.ini") +
                            " --slides mean-uni --name mean-uni --run " + run_.string());
  // The embed tag is complete and not ingested at patch level: that suggestion comes last.
  EXPECT_EQ(s.next, (std::vector<std::string>{
                        a.next, index.next,
                        "mpirun -np 2 ingest --run " + run_.string() + " --tag uni"}));
  EXPECT_EQ(format_incomplete(s), "aggregate mean-uni 0 1 stale\ningest mean-uni 0 1 stale\n");
  EXPECT_EQ(exit_code(s), kExitNotComplete);
  EXPECT_NE(format_table(s).find("  ingest mean-uni slide: stale"), std::string::npos)
      << format_table(s);
}

// A slide-level index killed before _SUCCESS resumes from its config.ini; one complete without
// its slide_catalog.json (which query reads) is rebuilt with --overwrite.
TEST_F(StatusTest, UnfinishedSlideIndexes) {
  complete("embed/uni", "embed", 1, {{"patches", 10}});
  start(aggregate("mean-uni"), "aggregate", 1, {{"tag", "uni"}, {"level", "slide"}});
  success(aggregate("mean-uni"), "aggregate", 1, {{"vectors", 4}});
  start("ingest/mean-uni", "ingest", 2, {{"level", "slide"}, {"slides", "mean-uni"}});
  RunStatus s = scan();
  const StageStatus* index = &find(s, "ingest", 0, "mean-uni");
  EXPECT_EQ(index->state, State::kIncomplete);
  EXPECT_EQ(index->next, "mpirun -np 2 ingest --config " + dir("ingest/mean-uni/config.ini") +
                             " --run " + run_.string());
  EXPECT_EQ(s.next.size(), 2u);  // the rerun, and the patch-level ingest of tag uni
  EXPECT_EQ(s.next[0], index->next);

  success("ingest/mean-uni", "ingest", 2, {{"rows", 4}});
  s = scan();
  index = &find(s, "ingest", 0, "mean-uni");
  EXPECT_EQ(index->state, State::kIncomplete);
  EXPECT_NE(index->problem.find("slide_catalog.json is missing"), std::string::npos)
      << index->problem;
  EXPECT_EQ(index->next,
            "mpirun -np 2 ingest --config " + dir("ingest/mean-uni/config.ini") +
                " --overwrite --run " + run_.string());

  write(dir("ingest/mean-uni/slide_catalog.json"), R"({"format_version": 1})");
  s = scan();
  EXPECT_EQ(find(s, "ingest", 0, "mean-uni").state, State::kComplete);
  EXPECT_EQ(exit_code(s), 0);
  // An aggregate output that has no vectors (exit code 3) gets no index suggestion.
  start(aggregate("empty"), "aggregate", 1, {{"tag", "uni"}, {"level", "slide"}});
  success(aggregate("empty"), "aggregate", 1,
          {{"vectors", 0}, {"exit_code", 3}, {"status", "completed_without_vectors"}});
  s = scan();
  EXPECT_EQ(find(s, "aggregate", 0, "empty").state, State::kCompleteWithFailures);
  EXPECT_EQ(s.next, std::vector<std::string>{"mpirun -np 1 ingest --run " + run_.string() +
                                             " --tag uni"});
}

}  // namespace
}  // namespace tessera::status
