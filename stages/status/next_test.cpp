#include "stages/status/next.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>

namespace tessera::status {
namespace {

namespace fs = std::filesystem;

TEST(NextShellWord, QuotesOnlyWhatAShellWouldSplitOrExpand) {
  EXPECT_EQ(shell_word("/a/b-c_d.e=f:g,h+i"), "/a/b-c_d.e=f:g,h+i");
  EXPECT_EQ(shell_word(""), "''");
  EXPECT_EQ(shell_word("my run"), "'my run'");
  EXPECT_EQ(shell_word("$HOME"), "'$HOME'");
  EXPECT_EQ(shell_word("it's"), "'it'\\''s'");
}

class NextTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("tessera_status_next_{}", ::getpid());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  // A stage directory with a config.ini.
  std::string with_config(const std::string& name) {
    const fs::path d = dir_ / name;
    fs::create_directories(d);
    std::ofstream(d / "config.ini") << "x = 1\n";
    return d.string();
  }
  fs::path dir_;
};

TEST_F(NextTest, RerunNeedsAConfigAndAWorldSize) {
  const std::string d = with_config("p");
  EXPECT_EQ(rerun_command("embed", d, 3, {"--part", "1"}),
            "mpirun -np 3 embed --config " + d + "/config.ini --part 1");
  EXPECT_EQ(rerun_command("embed", d, std::nullopt, {}), "");
  EXPECT_EQ(rerun_command("embed", (dir_ / "absent").string(), 3, {}), "");
}

TEST_F(NextTest, MissingPartStartsFromASiblingWithTheSameParts) {
  StageStatus other_split;  // a sibling of another split cannot be used
  other_split.part = 0;
  other_split.parts = 2;
  other_split.dir = with_config("q2");
  other_split.world_size = 5;
  StageStatus sibling;
  sibling.part = 2;
  sibling.parts = 3;
  sibling.dir = with_config("p2");
  sibling.world_size = 4;
  StageStatus missing;
  missing.part = 1;
  missing.parts = 3;
  missing.state = State::kMissing;
  set_part_next(missing, {other_split, sibling, missing}, "patchgen");
  EXPECT_EQ(missing.next, "mpirun -np 4 patchgen --config " + sibling.dir +
                              "/config.ini --part 1 --parts 3");
  StageStatus alone = missing;
  alone.next.clear();
  set_part_next(alone, {alone}, "patchgen");
  EXPECT_EQ(alone.next, "");
  EXPECT_EQ(alone.problem, "no other part's config.ini to start it from");
}

TEST_F(NextTest, NothingForCompleteRunningOrDamagedRows) {
  StageStatus s;
  s.dir = with_config("d");
  s.world_size = 2;
  for (State state : {State::kComplete, State::kCompleteWithFailures, State::kRunning}) {
    s.state = state;
    set_part_next(s, {s}, "embed");
    EXPECT_EQ(s.next, "") << to_string(state);
  }
  s.state = State::kIncomplete;
  s.run_json_damaged = true;
  set_part_next(s, {s}, "embed");
  EXPECT_EQ(s.next, "");
  s.run_json_damaged = false;
  set_part_next(s, {s}, "embed");
  EXPECT_EQ(s.next, "mpirun -np 2 embed --config " + s.dir + "/config.ini");
}

TEST_F(NextTest, GenerationsRerunWithNamesAndAppendAfterTheFirst) {
  std::vector<StageStatus> gens(3);
  for (int g = 0; g < 3; ++g) {
    gens[g].part = g;
    gens[g].dir = with_config(fmt::format("gen-{:05d}", g));
    gens[g].world_size = 2;
    gens[g].state = g == 0 ? State::kComplete : g == 1 ? State::kStale : State::kIncomplete;
  }
  set_generation_next(gens, "uni", "my idx");
  EXPECT_EQ(gens[0].next, "");
  EXPECT_EQ(gens[1].next, "mpirun -np 2 ingest --config " + gens[1].dir +
                              "/config.ini --tag uni --name 'my idx' --append");
  EXPECT_EQ(gens[2].next, "mpirun -np 2 ingest --config " + gens[2].dir +
                              "/config.ini --tag uni --name 'my idx' --append");
}

TEST_F(NextTest, DueGenerationOnlyWhenSettledAndPartsAreOut) {
  StageStatus g0;
  g0.part = 0;
  g0.dir = with_config("idx/gen-00000");
  g0.world_size = 3;
  g0.state = State::kComplete;
  EmbedTag embed{"uni", 3, true, 2};
  const std::string root = (dir_ / "idx").string();
  auto due = due_generation(root, "idx", "uni", {g0}, {{"parts_in", {0, 2}}}, embed);
  ASSERT_TRUE(due);
  EXPECT_EQ(due->part, 1);
  EXPECT_EQ(due->dir, root + "/gen-00001");
  EXPECT_EQ(due->state, State::kMissing);
  EXPECT_EQ(due->problem, "embed part(s) 1 of 'uni' not in the index yet");
  EXPECT_EQ(due->next, "mpirun -np 3 ingest --config " + g0.dir +
                           "/config.ini --tag uni --name idx --append --embed-parts all");
  EXPECT_FALSE(due_generation(root, "idx", "uni", {g0}, {{"parts_in", {0, 1, 2}}}, embed));
  g0.state = State::kIncomplete;  // an unfinished generation first
  EXPECT_FALSE(due_generation(root, "idx", "uni", {g0}, {{"parts_in", {0}}}, embed));
  EXPECT_FALSE(due_generation(root, "idx", "uni", {}, {{"parts_in", {0}}}, embed));
}

TEST(NextStaleNames, SpeltOutOnlyForStaleRowsOfStagesNamedByName) {
  StageStatus s;
  s.stage = "aggregate";
  s.tag = "uni";
  s.name = "mean uni";
  s.state = State::kStale;
  s.next = "mpirun -np 2 aggregate --config /r/config.ini";
  spell_out_stale_names(s, "--name");
  EXPECT_EQ(s.next, "mpirun -np 2 aggregate --config /r/config.ini --tag uni --name 'mean uni'");
  for (State state : {State::kIncomplete, State::kMissing}) {
    StageStatus t = s;
    t.state = state;
    t.next = "x";
    spell_out_stale_names(t, "--name");  // a resume keeps config.ini's values as given
    EXPECT_EQ(t.next, "x");
  }
  StageStatus embed = s;
  embed.next = "x";
  spell_out_stale_names(embed, "--tag");
  EXPECT_EQ(embed.next, "x");
  StageStatus unknown_tag = s;
  unknown_tag.tag.clear();
  unknown_tag.next = "x";
  spell_out_stale_names(unknown_tag, "--name");
  EXPECT_EQ(unknown_tag.next, "x");
}

TEST(NextSuggestions, IngestForCompleteTagsNotIngested) {
  std::map<std::string, EmbedTag> tags = {{"a", {"a", 1, true, 4}},
                                          {"b", {"b", 1, true, std::nullopt}},
                                          {"c", {"c", 1, false, 2}},
                                          {"d", {"d", 1, true, 2}}};
  EXPECT_EQ(ingest_suggestions("/r un", tags, {"d"}),
            (std::vector<std::string>{"mpirun -np 4 ingest --run '/r un' --tag a",
                                      "mpirun -np 1 ingest --run '/r un' --tag b"}));
}

}  // namespace
}  // namespace tessera::status
