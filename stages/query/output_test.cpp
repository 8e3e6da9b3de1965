// check_output_path: query writes beside a run's stage folders, never inside one, whatever the
// stage's folder is called (aggregate's is RUN/slides).
#include "stages/query/output.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/core/error.h"
#include "common/stage/layout.h"

namespace tessera::query {
namespace {

namespace fs = std::filesystem;

TEST(OutputPath, RefusedInsideEveryStageFolderOfTheIndexRun) {
  const fs::path run = fs::temp_directory_path() / ("tessera_output_" + std::to_string(::getpid()));
  fs::remove_all(run);
  const RunLayout layout(run.string());
  const std::string index = layout.stage_root(kIngestStage, "uni");
  fs::create_directories(index);
  for (const auto& decl : stage_graph()) {
    // Folders without any stage file yet: refused for being a stage folder of the run.
    const fs::path folder = layout.stage_base(decl.name);
    fs::create_directories(folder);
    EXPECT_THROW(check_output_path("--output", (folder / "hits.csv").string(), index),
                 InvalidInput)
        << decl.folder;
  }
  EXPECT_EQ(layout.stage_base("aggregate"), (run / "slides").string());
  EXPECT_NO_THROW(check_output_path("--output", (run / "hits.csv").string(), index));
  fs::create_directories(run / "aggregate");  // not a stage folder: aggregate's is slides/
  EXPECT_NO_THROW(check_output_path("--output", (run / "aggregate" / "hits.csv").string(), index));
  fs::remove_all(run);
}

}  // namespace
}  // namespace tessera::query
