// tessera-status on stage directories whose last run failed (common/stage/failure.h), and the
// commands it prints naming the stages' executables by path.
#include <sys/stat.h>

#include "common/stage/failure.h"
#include "stages/status/next.h"
#include "stages/status/status_test_fixture.h"

namespace tessera::status {
namespace {

using test_support::StatusTest;

// A failure on invalid input is shown with its message, and no command is proposed: a rerun from
// its config.ini would fail the same way.
TEST_F(StatusTest, AFailureOnInvalidInputIsShownAndNotRerun) {
  complete("patchgen", "patchgen", 2, {{"patches", 10}});
  complete("embed/uni", "embed", 2, {{"patches", 10}});
  start("ingest/ivf/gen-00000", "ingest", 2, {{"tag", "uni"}, {"name", "ivf"}, {"generation", 0}});
  record_failure(dir("ingest/ivf/gen-00000"),
                 {0, kExitBadInput, "--index IVF4096,Flat is trained on at least 4096 vectors",
                  "2026-11-30T10:00:01.000Z"});
  const RunStatus s = scan();
  const StageStatus& g = find(s, "ingest", 0, "ivf");
  EXPECT_EQ(g.state, State::kIncomplete);
  ASSERT_TRUE(g.failure);
  EXPECT_EQ(g.failure->exit_code, kExitBadInput);
  EXPECT_TRUE(g.next.empty()) << g.next;
  EXPECT_TRUE(s.next.empty()) << s.next.front();
  EXPECT_NE(g.problem.find("--overwrite"), std::string::npos) << g.problem;
  const std::string table = format_table(s);
  EXPECT_NE(table.find("last run failed (rank 0, exit code 2, 2026-11-30T10:00:01.000Z): --index "
                       "IVF4096,Flat is trained on at least 4096 vectors"),
            std::string::npos)
      << table;
  EXPECT_EQ(table.find("next:"), std::string::npos) << table;
  const nlohmann::json j = to_json(s);
  bool found = false;
  for (const auto& row : j["stages"]) {
    if (row["stage"] != "ingest") continue;
    found = true;
    EXPECT_EQ(row["failure"]["exit_code"], kExitBadInput);
    EXPECT_EQ(row["failure"]["rank"], 0);
    EXPECT_TRUE(row["next"].is_null());
  }
  EXPECT_TRUE(found) << j.dump(2);
  EXPECT_EQ(exit_code(s), kExitNotComplete);
}

// Another failure (I/O, exit 1) keeps its rerun, which resumes; the lowest rank's record is shown,
// and records of ranks beyond run.json's world size are not.
TEST_F(StatusTest, AnIoFailureIsShownAndRerun) {
  start("patchgen", "patchgen", 2);
  marker("patchgen", 0, 2, 5);
  record_failure(dir("patchgen"), {1, kExitError, "cannot write shard", "t1"});
  record_failure(dir("patchgen"), {3, kExitBadInput, "from a run of 4 ranks", "t0"});
  const RunStatus s = scan();
  ASSERT_EQ(s.stages.size(), 1u);
  const StageStatus& p = s.stages[0];
  ASSERT_TRUE(p.failure);
  EXPECT_EQ(p.failure->rank, 1);
  EXPECT_EQ(p.failure->message, "cannot write shard");
  EXPECT_FALSE(p.next.empty());
  EXPECT_EQ(s.next.size(), 1u);
}

// Commands name the executables beside tessera-status: build/stages/<stage>/<stage> in a build
// tree, or bin/<stage> in one folder; the bare name when neither exists.
TEST_F(StatusTest, CommandsNameTheExecutablesByPath) {
  const auto executable = [&](const std::string& relative) {
    write(dir(relative), "#!/bin/sh\n");
    ::chmod(dir(relative).c_str(), 0755);
  };
  executable("tree/stages/status/tessera-status");
  executable("tree/stages/patchgen/patchgen");
  executable("bin/patchgen");
  write(dir("bin/embed"), "not executable");
  EXPECT_EQ(program_path("patchgen", dir("tree/stages/status")),
            dir("tree/stages/patchgen/patchgen"));
  EXPECT_EQ(program_path("patchgen", dir("bin")), dir("bin/patchgen"));
  EXPECT_EQ(program_path("embed", dir("bin")), "embed");
  EXPECT_EQ(program_path("patchgen", ""), "patchgen");
  EXPECT_EQ(with_program_path("mpirun -np 3 patchgen --config c.ini", dir("bin")),
            "mpirun -np 3 " + dir("bin/patchgen") + " --config c.ini");
  EXPECT_EQ(with_program_path("something else", dir("bin")), "something else");

  start("patchgen", "patchgen", 2);
  const RunStatus s = scan_run(run_.string(), dir("tree/stages/status"));
  ASSERT_EQ(s.next.size(), 1u);
  EXPECT_EQ(s.next[0], "mpirun -np 2 " + dir("tree/stages/patchgen/patchgen") + " --config " +
                           dir("patchgen/config.ini") + " --out " + run_.string());
  EXPECT_EQ(s.stages[0].next, s.next[0]);
}

}  // namespace
}  // namespace tessera::status
