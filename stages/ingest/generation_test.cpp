// ingest's decision of which generation to build from which embed parts, over fake run folders
// (the files it reads: each part's run.json and _SUCCESS, the output's catalog), without MPI.
#include "stages/ingest/generation.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/core/error.h"
#include "common/core/options.h"
#include "common/stage/layout.h"

namespace tessera::ingest {
namespace {

namespace fs = std::filesystem;

class Generation : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = fs::temp_directory_path() /
           fmt::format("tessera_ingest_generation_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(run_);
  }
  void TearDown() override { fs::remove_all(run_); }

  Config parse(std::vector<std::string> args) const {
    po::options_description desc = option_table().description();
    add_common_options(desc);
    args.insert(args.begin(), {"--run", run_.string()});
    return config_from(parse_options(desc, args).values);
  }
  // Part p of q of embed tag `tag`, complete or only started.
  std::string embed_part(const std::string& tag, int p, int q, bool complete) const {
    const std::string dir = part_dir(RunLayout(run_.string()).stage_root("embed", tag), p, q);
    fs::create_directories(dir);
    std::ofstream(dir + "/run.json") << R"({"stage": "embed", "world_size": 1})";
    if (complete) std::ofstream(dir + "/_SUCCESS") << R"({"stage": "embed", "exit_code": 0})";
    return dir;
  }
  static std::string refusal(const Config& config) {
    try {
      decide(config);
    } catch (const InvalidInput& e) {
      return e.what();
    }
    return "";
  }

  fs::path run_;
};

TEST_F(Generation, ANewIndexTakesEveryWantedPartAndEachMustBeComplete) {
  embed_part("uni", 0, 3, true);
  const std::string waiting = embed_part("uni", 1, 3, false);
  embed_part("uni", 2, 3, true);
  const std::string why = refusal(parse({}));
  EXPECT_NE(why.find("1 of the embed parts to ingest are not complete"), std::string::npos) << why;
  EXPECT_NE(why.find(waiting), std::string::npos) << why;
  const Decision d = decide(parse({"--embed-parts", "0,2"}));
  EXPECT_EQ(d.tag, "uni");
  EXPECT_EQ(d.name, "uni");
  EXPECT_EQ(d.embed_parts, 3);
  EXPECT_EQ(d.generation, 0);
  EXPECT_EQ(d.parts, (std::vector<int>{0, 2}));
  EXPECT_FALSE(d.nothing_to_do);
  EXPECT_FALSE(d.previous);
  EXPECT_NE(refusal(parse({"--embed-parts", "3"})).find("there is no part 3"), std::string::npos);
}

TEST_F(Generation, AnAppendTakesTheCompletePartsAndLeavesTheRest) {
  embed_part("uni", 0, 2, false);
  embed_part("uni", 1, 2, true);
  const Decision d = decide(parse({"--append", "--name", "idx"}));
  EXPECT_EQ(d.name, "idx");
  EXPECT_EQ(d.generation, 0);
  EXPECT_EQ(d.parts, std::vector<int>{1});
  fs::remove(fs::path(embed_part("uni", 1, 2, false)) / "_SUCCESS");
  EXPECT_NE(refusal(parse({"--append"})).find("no part of"), std::string::npos);
}

TEST_F(Generation, TheTagIsTheOnlyEmbedOutputOrNamed) {
  EXPECT_NE(refusal(parse({})).find("holds no embed output"), std::string::npos);
  embed_part("uni", 0, 1, true);
  embed_part("virchow", 0, 1, true);
  const std::string why = refusal(parse({}));
  EXPECT_NE(why.find("several embed outputs; choose one with --tag: uni virchow"),
            std::string::npos)
      << why;
  EXPECT_EQ(decide(parse({"--tag", "virchow"})).tag, "virchow");
}

TEST_F(Generation, PartsOfTwoSplitsAreRefused) {
  embed_part("uni", 0, 2, true);
  embed_part("uni", 0, 3, true);
  const std::string root = RunLayout(run_.string()).stage_root("embed", "uni");
  try {
    discover_parts(root);
    ADD_FAILURE() << "no refusal";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("holds parts of 2 and of 3 parts"), std::string::npos)
        << e.what();
  }
}

TEST_F(Generation, TheDecisionTravelsAsJson) {
  Decision d;
  d.tag = "uni";
  d.name = "idx";
  d.embed_parts = 4;
  d.generation = 2;
  d.parts = {1, 3};
  const Decision back = decision_from(decision_json(d), run_.string());
  EXPECT_EQ(back.tag, "uni");
  EXPECT_EQ(back.name, "idx");
  EXPECT_EQ(back.embed_parts, 4);
  EXPECT_EQ(back.generation, 2);
  EXPECT_EQ(back.parts, (std::vector<int>{1, 3}));
  EXPECT_FALSE(back.nothing_to_do);
  EXPECT_FALSE(back.previous);
}

TEST_F(Generation, ACatalogThatDoesNotListAGenerationIsAGap) {
  const std::string out = (run_ / "ingest/idx").string();
  fs::create_directories(out);
  EXPECT_NE(catalog_gap(out, 0).find("catalog.json' is missing"), std::string::npos);
  std::ofstream(out + "/catalog.json") << "{damaged";
  EXPECT_NE(catalog_gap(out, 0).find("its catalog is damaged"), std::string::npos);
  EXPECT_EQ(next_unlisted_generation(out), -1);
}

}  // namespace
}  // namespace tessera::ingest
