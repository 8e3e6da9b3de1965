// The consolidation's streaming merge and the plan files, on shards written here with known
// patch ids (no slides): rows come out sorted, with their shard and row, failed slides left out,
// and inconsistent shards refused.
#include "stages/patchgen/consolidate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/stage/marker.h"
#include "common/store/store.h"
#include "stages/patchgen/extract.h"

namespace tessera::patchgen {
namespace {

namespace fs = std::filesystem;

SlidePlan synthetic_plan(int slide, int patches) {
  SlidePlan p;
  p.index = slide;
  p.ok = true;
  p.width = 1000;
  p.height = 800;
  p.mpp_x = p.mpp_y = 0.5;
  p.mpp_source = "default";
  p.vendor = "generic-tiff";
  p.level.read_size = 8;
  p.level.footprint = 8;
  for (int i = 0; i < patches; ++i) p.patches.push_back({8 * i, 16 * slide, 0.5f + 0.01f * i});
  p.patch_count = patches;
  return p;
}

class ConsolidateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_consolidate_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "plans");
    fs::create_directories(dir_ / "shards");
    manifest_ = parse_manifest("slide_id,path\nA,a.tif\nB,b.tif\nC,c.tif\n",
                               (dir_ / "m.csv").string());
    config_.patch_size = 8;
    config_.layout.patch_size = 8;
    const int counts[] = {5, 0, 7};  // slide B failed at planning
    for (int s = 0; s < 3; ++s) {
      SlidePlan plan = synthetic_plan(s, counts[s]);
      if (s == 1) {
        plan.ok = false;
        plan.reason = "no tissue detected";
      }
      write_plan(plan_path(dir_.string(), manifest_.slides[s].slide_id), plan,
                 manifest_.slides[s], "fp");
      part_.slides.push_back(s);
      part_.counts.push_back(counts[s]);
      part_.failed.push_back(s == 1 ? 1 : 0);
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Writes the shards of `ranks` ranks under the cyclic partition, as extract_rank would, and
  // returns their markers.
  std::vector<nlohmann::json> write_shards(int ranks, int64_t duplicate_rank = -1) {
    const PatchOrder order = part_.order();
    const Partition partition(Partition::Spec{}, order.total(), ranks);
    std::vector<nlohmann::json> markers;
    std::vector<uint8_t> pixels(8 * 8 * 3, 7);
    for (int r = 0; r < ranks; ++r) {
      ShardWriter w((dir_ / shard_file(r)).string(), config_.layout, r, ranks);
      int64_t rows = 0;
      for (const auto& run : partition.runs(r)) {
        for (int64_t i = run.first; i < run.first + run.count; ++i) {
          const auto [position, ordinal] = order.locate(i);
          const int s = part_.slides[position];
          w.add(make_patch_id(s, ordinal), s, 8 * ordinal, 16 * s, 0.5f, pixels.data());
          ++rows;
        }
      }
      if (r == duplicate_rank) {  // the last patch of the part again: the shard stays sorted
        w.add(make_patch_id(2, 6), 2, 48, 32, 0.5f, pixels.data());
        ++rows;
      }
      w.close();
      nlohmann::json m = marker_base("patchgen", r, ranks, "fp");
      m["outputs"] = {seal_output(dir_.string(), shard_file(r)).to_json()};
      m["rows"] = rows;
      m["seal_s"] = 0.0;
      m["stats"] = {{"failed_slides", nlohmann::json::array()}, {"read_s", 0.0},
                    {"resize_s", 0.0}, {"encode_s", 0.0}, {"write_s", 0.0}, {"total_s", 0.0}};
      markers.push_back(m);
    }
    return markers;
  }

  fs::path dir_;
  Manifest manifest_;
  Config config_;
  PartPlan part_;
};

TEST_F(ConsolidateTest, PlanFilesRoundTripAndAreTiedToTheirFingerprint) {
  auto plan = read_plan(plan_path(dir_.string(), "C"), "fp", /*with_patches=*/true);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(plan->patch_count, 7);
  ASSERT_EQ(plan->patches.size(), 7u);
  EXPECT_EQ(plan->patches[3].x, 24);
  EXPECT_FLOAT_EQ(plan->patches[3].tissue, 0.53f);
  auto summary = read_plan(plan_path(dir_.string(), "B"), "fp", /*with_patches=*/false);
  ASSERT_TRUE(summary.has_value());
  EXPECT_FALSE(summary->ok);
  EXPECT_EQ(summary->reason, "no tissue detected");
  EXPECT_TRUE(summary->patches.empty());
  EXPECT_FALSE(read_plan(plan_path(dir_.string(), "C"), "other", true).has_value());
  EXPECT_FALSE(read_plan(plan_path(dir_.string(), "missing"), "fp", true).has_value());
}

TEST_F(ConsolidateTest, MergeIsSortedAndTheSameForAnyRankCount) {
  std::vector<int64_t> first_ids;
  for (int ranks : {1, 2, 3, 5}) {
    for (const auto& e : fs::directory_iterator(dir_ / "shards")) fs::remove(e.path());
    auto markers = write_shards(ranks);
    // Rank 1's shard loses slide C while extracting (recorded in its marker).
    if (ranks > 1) {
      markers[1]["stats"]["failed_slides"] = {{{"slide", 2}, {"reason", "read error"}}};
    }
    nlohmann::json summary =
        consolidate(manifest_, part_, config_, dir_.string(), "fp", markers);
    h5::File index = h5::File::open((dir_ / "index.h5").string(), h5::Mode::kRead);
    const auto ids = index.open_dataset("patch_id").read_all<int64_t>();
    const auto shard = index.open_dataset("shard").read_all<int32_t>();
    const auto row = index.open_dataset("row").read_all<int64_t>();
    EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
    const auto status = index.open_group("slides").open_dataset("status").read_strings();
    EXPECT_EQ(status[1], "failed");
    if (ranks == 1) {
      EXPECT_EQ(ids.size(), 12u);
      EXPECT_EQ(summary["exit_code"], kExitSlidesFailed);  // B failed at planning
      first_ids = ids;
    } else {
      EXPECT_EQ(ids.size(), 5u) << ranks;  // C failed on rank 1: all of its rows left out
      EXPECT_EQ(status[2], "failed");
      EXPECT_EQ(summary["slides_failed"], 2);
    }
    // Each row points at the shard row holding it.
    for (size_t i = 0; i < ids.size(); ++i) {
      ShardReader reader((dir_ / shard_file(shard[i])).string());
      EXPECT_EQ(reader.read_columns().patch_id.at(static_cast<size_t>(row[i])), ids[i]);
    }
  }
}

TEST_F(ConsolidateTest, InconsistentShardsAreRefused) {
  auto markers = write_shards(2, /*duplicate_rank=*/1);
  try {
    consolidate(manifest_, part_, config_, dir_.string(), "fp", markers);
    FAIL() << "a duplicate patch id was accepted";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("appears twice"), std::string::npos) << e.what();
  }
  markers = write_shards(2);
  markers[0]["rows"] = 99;
  EXPECT_THROW(consolidate(manifest_, part_, config_, dir_.string(), "fp", markers), IoError);
  EXPECT_FALSE(fs::exists(dir_ / "index.h5"));
}

}  // namespace
}  // namespace tessera::patchgen
