// extract_rank on a generated slide, called directly with rank and world size as values.
#include "stages/patchgen/extract.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <numeric>
#include <tuple>

#include "common/core/error.h"
#include <algorithm>

#include "common/stage/partition.h"
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
    SlidePlan plan = plan_slide(manifest_.slides[0], config_, (dir_ / "qc").string());
    ASSERT_TRUE(plan.ok) << plan.reason;
    ASSERT_GT(plan.patches.size(), 8u);
    fs::create_directories(dir_ / "patchgen/plans");
    write_plan(plan_path(stage_dir(), "A"), plan, manifest_.slides[0], "fp");
    part_.slides = {0};
    part_.counts = {plan.patch_count};
    part_.failed = {0};
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string stage_dir() const { return (dir_ / "patchgen").string(); }

  fs::path dir_;
  Manifest manifest_;
  Config config_;
  PartPlan part_;
};

TEST_F(ExtractTest, RanksShareThePatchesReadFromThePlanFile) {
  for (const char* spec : {"cyclic", "block-cyclic:3", "contiguous"}) {
    config_.partition = Partition::Spec::parse(spec, "partition");
    int64_t rows = 0;
    std::vector<int64_t> ids;
    for (int rank = 0; rank < 3; ++rank) {
      ExtractStats stats = extract_rank(manifest_, part_, config_, rank, 3, stage_dir(), "fp",
                                        (dir_ / "patchgen" / shard_file(rank)).string());
      EXPECT_TRUE(stats.failed_slides.empty());
      EXPECT_EQ(stats.patches, stats.planned);
      ShardReader shard((dir_ / "patchgen" / shard_file(rank)).string());
      rows += shard.rows();
      auto columns = shard.read_columns();
      EXPECT_TRUE(std::is_sorted(columns.patch_id.begin(), columns.patch_id.end()));
      ids.insert(ids.end(), columns.patch_id.begin(), columns.patch_id.end());
    }
    EXPECT_EQ(rows, part_.counts[0]) << spec;
    std::sort(ids.begin(), ids.end());
    EXPECT_EQ(std::adjacent_find(ids.begin(), ids.end()), ids.end()) << spec;
  }
}

// Reader threads, batch size and read-ahead decide only how the rank reads: every combination
// writes the same rows in the same order with the same pixels, raw or JPEG-encoded (by the reader
// threads).
TEST_F(ExtractTest, ReaderThreadsBatchesAndReadAheadDoNotChangeTheShard) {
  for (const char* encoding : {"raw", "jpeg"}) {
  config_.layout.encoding = encoding;
  auto shard_content = [&](int rank) {
    ShardReader shard((dir_ / "patchgen" / shard_file(rank)).string());
    ShardColumns columns = shard.read_columns();
    std::vector<uint64_t> rows(static_cast<size_t>(shard.rows()));
    std::iota(rows.begin(), rows.end(), 0);
    std::vector<uint8_t> pixels(rows.size() * 128 * 128 * 3);
    shard.read_patches(rows, pixels.data());
    return std::make_pair(columns.patch_id, pixels);
  };
  for (int rank = 0; rank < 2; ++rank) {
    config_.reader_threads = 1;
    config_.read_batch = 16;
    config_.read_ahead = 8;
    extract_rank(manifest_, part_, config_, rank, 2, stage_dir(), "fp",
                 (dir_ / "patchgen" / shard_file(rank)).string());
    const auto expected = shard_content(rank);
    ASSERT_FALSE(expected.first.empty());
    for (auto [threads, batch, ahead] : {std::tuple{3, 1, 1}, {4, 5, 2}, {2, 3, 64}}) {
      config_.reader_threads = threads;
      config_.read_batch = batch;
      config_.read_ahead = ahead;
      const ExtractStats stats = extract_rank(manifest_, part_, config_, rank, 2, stage_dir(), "fp",
                                              (dir_ / "patchgen" / shard_file(rank)).string());
      EXPECT_EQ(stats.patches, stats.planned);
      const auto got = shard_content(rank);
      EXPECT_EQ(got.first, expected.first) << encoding << ", " << threads << " threads";
      EXPECT_TRUE(got.second == expected.second) << encoding << ", " << threads << " threads";
      if (std::string(encoding) == "jpeg") EXPECT_GT(stats.encode_s, 0.0);
    }
  }
  }
}

// A plan that does not match the exchanged counts (another configuration's) is refused, not used.
TEST_F(ExtractTest, APlanOfAnotherConfigurationIsRefused) {
  try {
    extract_rank(manifest_, part_, config_, 0, 1, stage_dir(), "other fingerprint",
                 (dir_ / "patchgen" / shard_file(0)).string());
    FAIL() << "a plan of another configuration was used";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("plans/A.h5"), std::string::npos) << e.what();
  }
}

// A shard that cannot be written (--debug-file-size-limit, as on a full disk) fails the rank
// with an I/O error naming the shard. It is not taken for a failure of the slide being read (with
// --fail-fast that would be exit code 3), and no marker is written. Run in a child process: HDF5
// cannot close a file it cannot flush, and its teardown at exit would then crash the test program.
TEST_F(ExtractTest, ShardWriteFailureIsTheRanksNotTheSlides) {
  config_.fail_fast = true;
  config_.stage.faults.file_size_limit = 200 << 10;  // a few chunks of 128 px patches
  EXPECT_EXIT(
      {
        try {
          extract_rank(manifest_, part_, config_, 0, 1, stage_dir(), "fp",
                       (dir_ / "patchgen" / shard_file(0)).string());
        } catch (const Error& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(e.exit_code());
        }
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(kExitError), "rank-00000\\.h5");
}

TEST_F(ExtractTest, ASlideThatCannotBeReadIsRecordedAndItsPatchesSkipped) {
  // The slide is replaced by garbage after planning: the reader threads' failure reaches the
  // rank as a failed slide, the shard is written with its other rows (none here).
  config_.reader_threads = 3;
  config_.read_batch = 2;
  {
    std::FILE* f = std::fopen((dir_ / "s.tif").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fputs("not a slide any more", f);
    std::fclose(f);
  }
  const ExtractStats stats = extract_rank(manifest_, part_, config_, 0, 1, stage_dir(), "fp",
                                          (dir_ / "patchgen" / shard_file(0)).string());
  ASSERT_EQ(stats.failed_slides.count(0), 1u);
  EXPECT_NE(stats.failed_slides.at(0).find("s.tif"), std::string::npos)
      << stats.failed_slides.at(0);
  EXPECT_EQ(stats.patches, 0);
  EXPECT_EQ(stats.planned, part_.counts[0]);
  EXPECT_EQ(ShardReader((dir_ / "patchgen" / shard_file(0)).string()).rows(), 0);

  config_.fail_fast = true;
  try {
    extract_rank(manifest_, part_, config_, 0, 1, stage_dir(), "fp",
                 (dir_ / "patchgen" / shard_file(0)).string());
    FAIL() << "--fail-fast did not stop at the failed slide";
  } catch (const Error& e) {
    EXPECT_EQ(e.exit_code(), kExitSlidesFailed);
    EXPECT_NE(std::string(e.what()).find("slide 'A' failed (--fail-fast)"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessera::patchgen
