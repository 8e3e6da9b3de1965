// extract_rank on a generated slide, called directly with rank and world size as values.
#include "stages/patchgen/extract.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "common/core/error.h"
#include "common/stage/marker.h"
#include "stages/patchgen/plan.h"
#include "common/store/store.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::patchgen {
namespace {

namespace fs = std::filesystem;

class ExtractTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_extract_" + std::to_string(::getpid()));
    fs::create_directories(dir_ / "patchgen");
    synth::SlideSpec spec;
    spec.path = (dir_ / "s.tif").string();
    spec.width = 2000;
    spec.height = 1500;
    spec.seed = 11;
    synth::write_slide(spec);
    manifest_ = parse_manifest("slide_id,path\nA,s.tif\n", (dir_ / "m.csv").string());
    config_.patch_size = 128;
    config_.stride = 128;
    config_.layout.patch_size = 128;
    config_.layout.chunk_patches = 4;
    config_.qc = false;
    plans_.push_back(plan_slide(manifest_.slides[0], config_, (dir_ / "qc").string()));
    ASSERT_TRUE(plans_[0].ok) << plans_[0].reason;
    ASSERT_GT(plans_[0].patches.size(), 8u);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string stage_dir() const { return (dir_ / "patchgen").string(); }

  fs::path dir_;
  Manifest manifest_;
  Config config_;
  std::vector<SlidePlan> plans_;
};

TEST_F(ExtractTest, RanksShareThePatchesAndWriteMarkers) {
  int64_t rows = 0;
  for (int rank = 0; rank < 2; ++rank) {
    ExtractStats stats = extract_rank(manifest_, plans_, config_, rank, 2, stage_dir(), "fp");
    EXPECT_TRUE(stats.failed_slides.empty());
    EXPECT_EQ(stats.patches, stats.planned);
    EXPECT_TRUE(fs::exists(dir_ / "patchgen/markers" / rank_file_name(rank, ".json")));
    rows += ShardReader((dir_ / "patchgen/shards" / rank_file_name(rank, ".h5")).string()).rows();
  }
  EXPECT_EQ(rows, static_cast<int64_t>(plans_[0].patches.size()));
}

// A shard that cannot be written (--debug-file-size-limit, as on a full disk) fails the rank
// with an I/O error naming the shard. It is not taken for a failure of the slide being read (with
// --fail-fast that would be exit code 3), and no marker is written. Run in a child process: HDF5
// cannot close a file it cannot flush, and its teardown at exit would then crash the test program.
TEST_F(ExtractTest, ShardWriteFailureIsTheRanksNotTheSlides) {
  config_.fail_fast = true;
  config_.debug_file_size_limit = 200 << 10;  // a few chunks of 128 px patches
  EXPECT_EXIT(
      {
        try {
          extract_rank(manifest_, plans_, config_, 0, 1, stage_dir(), "fp");
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(e.exit_code());
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(kExitError), "rank-00000\\.h5");
  EXPECT_FALSE(fs::exists(dir_ / "patchgen/markers/rank-00000.json"));
}

}  // namespace
}  // namespace tessera::patchgen
