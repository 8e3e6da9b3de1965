#include "common/stage/layout.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

TEST(Layout, PartNamesRoundTrip) {
  for (int parts : {1, 2, 7, 99999}) {
    for (int part : {0, parts / 2, parts - 1}) {
      const auto parsed = parse_part_name(part_name(part, parts));
      ASSERT_TRUE(parsed) << part << " of " << parts;
      EXPECT_EQ(parsed->part, part);
      EXPECT_EQ(parsed->parts, parts);
    }
  }
  EXPECT_EQ(part_name(3, 12), "part-00003-of-00012");
  for (const char* bad : {"part-00003-of-00003", "part-3-of-12", "part-00003-of-00012x",
                          "part-0000a-of-00012", "part-00000-of-00000", "gen-00001", ""}) {
    EXPECT_FALSE(parse_part_name(bad)) << bad;
  }
  EXPECT_EQ(part_dir("/r/patchgen", 0, 1), "/r/patchgen");
  EXPECT_EQ(part_dir("/r/patchgen", 1, 2), "/r/patchgen/part-00001-of-00002");
}

TEST(Layout, GenerationNamesRoundTrip) {
  EXPECT_EQ(generation_name(0), "gen-00000");
  EXPECT_EQ(parse_generation_name(generation_name(42)), 42);
  for (const char* bad : {"gen-1", "gen-000001", "gen-0000x", "part-00000-of-00001"}) {
    EXPECT_FALSE(parse_generation_name(bad)) << bad;
  }
}

TEST(Layout, StageGraphIsInChainOrderAndDownstreamIsTransitive) {
  const auto& graph = stage_graph();
  for (size_t i = 0; i < graph.size(); ++i) {
    for (const auto& read : graph[i].reads) {
      bool earlier = false;
      for (size_t j = 0; j < i; ++j) earlier = earlier || graph[j].name == read;
      EXPECT_TRUE(earlier) << graph[i].name << " reads " << read << " declared after it";
    }
  }
  EXPECT_EQ(downstream_stages(kPatchgenStage),
            (std::vector<std::string>{kEmbedStage, kAggregateStage, kIngestStage}));
  EXPECT_EQ(downstream_stages(kEmbedStage),
            (std::vector<std::string>{kAggregateStage, kIngestStage}));
  EXPECT_EQ(downstream_stages(kAggregateStage), (std::vector<std::string>{kIngestStage}));
  EXPECT_TRUE(downstream_stages(kIngestStage).empty());
  EXPECT_THROW(stage_decl("nonsense"), InvalidInput);
}

TEST(Layout, EveryStageHasItsOwnFolder) {
  std::set<std::string> folders = {kServicesDir, "slurm"};  // RUN/serve, launchers' RUN/slurm
  for (const auto& decl : stage_graph()) {
    EXPECT_FALSE(decl.folder.empty()) << decl.name;
    EXPECT_TRUE(folders.insert(decl.folder).second) << decl.name << ": " << decl.folder;
  }
  EXPECT_EQ(stage_decl(kAggregateStage).folder, "slides");
  EXPECT_EQ(stage_decl(kEmbedStage).folder, kEmbedStage);
}

// What the launchers rely on when they build commands from the graph alone.
TEST(Layout, EveryStageCanBeLaunchedFromItsDeclaration) {
  for (const auto& decl : stage_graph()) {
    EXPECT_TRUE(decl.run_option == "--run" || decl.run_option == "--out") << decl.name;
    // A job array task p of a per-part stage waits for task p of what it reads (aftercorr), so
    // it may read per-part stages only.
    if (decl.launch == Launch::kPerPart) {
      for (const auto& read : decl.reads) {
        EXPECT_EQ(stage_decl(read).launch, Launch::kPerPart) << decl.name << " reads " << read;
      }
    }
    // A stage run only when named needs a name option to take the name.
    if (decl.launch == Launch::kWhenNamed) EXPECT_EQ(decl.name_option, "--name") << decl.name;
    for (const auto& option : decl.chain_options) EXPECT_EQ(option.rfind("--", 0), 0u) << option;
  }
  EXPECT_EQ(stage_decl(kPatchgenStage).run_option, "--out");
  EXPECT_EQ(stage_decl(kEmbedStage).chain_options, std::vector<std::string>{"--model"});
}

TEST(Layout, RunLayoutBuildsAndListsStageDirectories) {
  const fs::path run = fs::temp_directory_path() / ("tessera_layout_" + std::to_string(::getpid()));
  fs::remove_all(run);
  const RunLayout layout((run / "." / "").string());
  EXPECT_EQ(layout.run(), run.string());
  EXPECT_EQ(layout.stage_root(kPatchgenStage), (run / "patchgen").string());
  EXPECT_EQ(layout.stage_dir(kEmbedStage, "uni", 1, 3),
            (run / "embed" / "uni" / "part-00001-of-00003").string());
  EXPECT_EQ(layout.stage_dir(kIngestStage, "uni", 2, 1),
            (run / "ingest" / "uni" / "gen-00002").string());
  EXPECT_THROW(layout.stage_root(kEmbedStage), InvalidInput);
  // aggregate (a stage) writes RUN/slides/<name> (its folder).
  EXPECT_EQ(layout.stage_base(kAggregateStage), (run / "slides").string());
  EXPECT_EQ(layout.stage_root(kAggregateStage, "mean-uni"), (run / "slides" / "mean-uni").string());

  // A split embed with part 1 missing, a one-part patchgen, two ingest generations.
  make_directories(layout.stage_root(kPatchgenStage));
  atomic_write_file(stage_file(layout.stage_root(kPatchgenStage), kRunFile), "{}");
  make_directories(layout.stage_dir(kEmbedStage, "uni", 0, 2));
  make_directories(layout.stage_dir(kIngestStage, "uni", 0, 1));
  make_directories(layout.stage_dir(kIngestStage, "uni", 1, 1));
  make_directories((run / "ingest" / "uni" / "not-a-generation").string());

  const auto pg = layout.stage_dirs(kPatchgenStage);
  ASSERT_EQ(pg.size(), 1u);
  EXPECT_EQ(pg[0].dir, layout.stage_root(kPatchgenStage));
  const auto em = layout.stage_dirs(kEmbedStage);
  ASSERT_EQ(em.size(), 2u);
  EXPECT_EQ(em[1].part, 1);
  EXPECT_EQ(em[1].parts, 2);
  EXPECT_FALSE(fs::exists(em[1].dir));  // expected, not there
  EXPECT_EQ(layout.names(kEmbedStage), (std::vector<std::string>{"uni"}));
  const auto in = layout.stage_dirs(kIngestStage);
  ASSERT_EQ(in.size(), 2u);
  EXPECT_EQ(in[1].part, 1);
  EXPECT_EQ(in[1].name, "uni");
  // Names and directories of aggregate are found under its folder, not under RUN/aggregate.
  make_directories(layout.stage_root(kAggregateStage, "mean-uni"));
  atomic_write_file(stage_file(layout.stage_root(kAggregateStage, "mean-uni"), kRunFile), "{}");
  make_directories((run / kAggregateStage / "decoy").string());
  EXPECT_EQ(layout.names(kAggregateStage), (std::vector<std::string>{"mean-uni"}));
  const auto ag = layout.stage_dirs(kAggregateStage);
  ASSERT_EQ(ag.size(), 1u);
  EXPECT_EQ(ag[0].dir, (run / "slides" / "mean-uni").string());
  // A slide-level index is one stage directory at its name's root (no generations).
  make_directories(layout.stage_root(kIngestStage, "slides-uni"));
  atomic_write_file(stage_file(layout.stage_root(kIngestStage, "slides-uni"), kRunFile), "{}");
  const auto si = layout.stage_dirs(kIngestStage, "slides-uni");
  ASSERT_EQ(si.size(), 1u);
  EXPECT_EQ(si[0].dir, layout.stage_root(kIngestStage, "slides-uni"));
  EXPECT_EQ(layout.stage_dirs(kIngestStage).size(), 3u);  // uni's two generations, slides-uni
  fs::remove_all(run);
}

}  // namespace
}  // namespace tessera
