#include "stages/patchgen/plan.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/mpi/thread_comm.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::patchgen {
namespace {

namespace fs = std::filesystem;

TEST(PatchOrder, LocatesEveryItemAcrossEmptySlides) {
  const PatchOrder order({3, 0, 2, 0, 5});
  EXPECT_EQ(order.total(), 10);
  EXPECT_EQ(order.offset(2), 3);
  EXPECT_EQ(order.count(1), 0);
  EXPECT_EQ(order.count(4), 5);
  const std::vector<std::pair<int, int64_t>> expected = {{0, 0}, {0, 1}, {0, 2}, {2, 0}, {2, 1},
                                                         {4, 0}, {4, 1}, {4, 2}, {4, 3}, {4, 4}};
  for (int64_t i = 0; i < order.total(); ++i) EXPECT_EQ(order.locate(i), expected[i]) << i;
  EXPECT_EQ(PatchOrder({}).total(), 0);
  EXPECT_EQ(PatchOrder({0, 0}).total(), 0);
}

TEST(PatchId, IsTheSlideAboveTheOrdinal) {
  EXPECT_EQ(make_patch_id(0, 5), 5);
  EXPECT_EQ(make_patch_id(3, 7), (int64_t{3} << 32) | 7);
  EXPECT_EQ(make_patch_id(2, 0) >> 32, 2);
}

// Each rank plans slides k = rank, rank + R, ...; after the exchange every rank has them all.
TEST(SharePlanCounts, EveryRankEndsWithEverySlidesCountAndFlag) {
  const std::vector<int64_t> counts = {5, 0, 12, 7, 0, 3, 9};
  const std::vector<uint8_t> failed = {0, 1, 0, 0, 1, 0, 0};
  for (int R = 1; R <= 4; ++R) {
    run_ranks(R, [&](Comm& comm) {
      PartPlan part;
      part.slides = {0, 1, 2, 3, 4, 5, 6};
      part.counts.assign(counts.size(), 0);
      part.failed.assign(counts.size(), 0);
      for (size_t k = comm.rank(); k < counts.size(); k += comm.size()) {
        part.counts[k] = counts[k];
        part.failed[k] = failed[k];
      }
      share_plan_counts(comm, part);
      EXPECT_EQ(part.counts, counts) << "R=" << R << " rank " << comm.rank();
      EXPECT_EQ(part.failed, failed) << "R=" << R << " rank " << comm.rank();
      EXPECT_EQ(part.order().total(), 36);
      return 0;
    });
  }
  SerialComm serial;
  PartPlan bad;
  bad.slides = {0, 1};
  bad.counts = {1};
  bad.failed = {0, 0};
  EXPECT_THROW(share_plan_counts(serial, bad), Error);
}

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_plan_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "qc");
    fs::create_directories(dir_ / "plans");
    config_.patch_size = 64;
    config_.stride = 64;
    config_.qc = false;
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // A generated slide `name`.tif of 800 x 600 pixels.
  SlideEntry slide(const std::string& name, double tissue_fraction = 0.35,
                   bool resolution = true) {
    synth::SlideSpec spec;
    spec.path = (dir_ / (name + ".tif")).string();
    spec.width = 800;
    spec.height = 600;
    spec.seed = 5;
    spec.tissue_fraction = tissue_fraction;
    spec.write_resolution = resolution;
    synth::write_slide(spec);
    SlideEntry e;
    e.index = 2;
    e.slide_id = name;
    e.path = spec.path;
    return e;
  }
  std::string qc_dir() const { return (dir_ / "qc").string(); }

  fs::path dir_;
  Config config_;
};

TEST_F(PlanTest, ASlideWithTissueGetsItsGridAndItsQcFiles) {
  config_.qc = true;
  const SlidePlan plan = plan_slide(slide("ok"), config_, qc_dir());
  ASSERT_TRUE(plan.ok) << plan.reason;
  EXPECT_EQ(plan.index, 2);
  EXPECT_EQ(plan.width, 800);
  EXPECT_EQ(plan.height, 600);
  EXPECT_DOUBLE_EQ(plan.mpp_x, 0.5);
  EXPECT_EQ(plan.mpp_source, "tiff.resolution");
  EXPECT_EQ(plan.level.level, 0);
  EXPECT_EQ(plan.level.read_size, 64);
  EXPECT_GT(plan.tissue_pixels, 0);
  EXPECT_GT(plan.patch_count, 3);
  EXPECT_EQ(plan.patch_count, static_cast<int64_t>(plan.patches.size()));
  for (size_t i = 0; i < plan.patches.size(); ++i) {
    const GridPatch& p = plan.patches[i];
    EXPECT_GE(p.tissue, config_.min_tissue);
    EXPECT_LE(p.x + 64, 800);
    EXPECT_LE(p.y + 64, 600);
    if (i > 0) {
      const GridPatch& q = plan.patches[i - 1];
      EXPECT_TRUE(q.y < p.y || (q.y == p.y && q.x < p.x)) << "not in (y, x) order at " << i;
    }
  }
  EXPECT_TRUE(file_size(qc_dir() + "/ok.png").value_or(0) > 0);
  EXPECT_TRUE(file_size(qc_dir() + "/ok.geojson").value_or(0) > 0);
}

TEST_F(PlanTest, TheManifestsMppOverridesTheSlidesAndTooCoarseIsRefused) {
  SlideEntry e = slide("mpp");
  e.mpp = 0.45;
  const SlidePlan plan = plan_slide(e, config_, qc_dir());
  ASSERT_TRUE(plan.ok) << plan.reason;
  EXPECT_EQ(plan.mpp_source, "manifest");
  EXPECT_DOUBLE_EQ(plan.mpp_x, 0.45);
  e.mpp = 1.5;  // more than kMaxUpsample times coarser than --mpp 0.5
  const SlidePlan coarse = plan_slide(e, config_, qc_dir());
  EXPECT_FALSE(coarse.ok);
  EXPECT_NE(coarse.reason.find("refusing to upsample"), std::string::npos) << coarse.reason;
  EXPECT_TRUE(coarse.patches.empty());
}

TEST_F(PlanTest, ExpectedFailuresAreValuesWithAReason) {
  const SlideEntry bare = slide("bare", 0.35, /*resolution=*/false);
  const SlidePlan no_mpp = plan_slide(bare, config_, qc_dir());
  EXPECT_FALSE(no_mpp.ok);
  EXPECT_NE(no_mpp.reason.find("--default-mpp"), std::string::npos) << no_mpp.reason;
  config_.default_mpp = 0.5;
  const SlidePlan with_default = plan_slide(bare, config_, qc_dir());
  EXPECT_TRUE(with_default.ok) << with_default.reason;
  EXPECT_EQ(with_default.mpp_source, "default");

  const SlidePlan blank = plan_slide(slide("blank", 0.0), config_, qc_dir());
  EXPECT_FALSE(blank.ok);
  EXPECT_EQ(blank.reason, "no tissue detected");

  std::ofstream((dir_ / "text.tif").string()) << "not a slide";
  SlideEntry text;
  text.slide_id = "text";
  text.path = (dir_ / "text.tif").string();
  const SlidePlan unreadable = plan_slide(text, config_, qc_dir());
  EXPECT_FALSE(unreadable.ok);
  EXPECT_NE(unreadable.reason.find("text.tif"), std::string::npos) << unreadable.reason;
}

TEST_F(PlanTest, APlanFileReadsBackAsWrittenAndOnlyForItsFingerprint) {
  const SlideEntry e = slide("rt");
  const SlidePlan plan = plan_slide(e, config_, qc_dir());
  ASSERT_TRUE(plan.ok) << plan.reason;
  const std::string path = plan_path(dir_.string(), "rt");
  EXPECT_EQ(path, (dir_ / "plans" / "rt.h5").string());
  write_plan(path, plan, e, "fp-1");
  EXPECT_FALSE(path_exists(path + ".tmp"));

  const auto back = read_plan(path, "fp-1", true);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->index, plan.index);
  EXPECT_TRUE(back->ok);
  EXPECT_EQ(back->width, plan.width);
  EXPECT_EQ(back->height, plan.height);
  EXPECT_EQ(back->mpp_x, plan.mpp_x);
  EXPECT_EQ(back->mpp_source, plan.mpp_source);
  EXPECT_EQ(back->vendor, plan.vendor);
  EXPECT_EQ(back->level.level, plan.level.level);
  EXPECT_EQ(back->level.read_size, plan.level.read_size);
  EXPECT_EQ(back->level.footprint, plan.level.footprint);
  EXPECT_EQ(back->level.resample, plan.level.resample);
  EXPECT_EQ(back->tissue_pixels, plan.tissue_pixels);
  EXPECT_EQ(back->patch_count, plan.patch_count);
  ASSERT_EQ(back->patches.size(), plan.patches.size());
  for (size_t i = 0; i < plan.patches.size(); ++i) {
    EXPECT_EQ(back->patches[i].x, plan.patches[i].x);
    EXPECT_EQ(back->patches[i].y, plan.patches[i].y);
    EXPECT_EQ(back->patches[i].tissue, plan.patches[i].tissue);
  }
  const auto summary = read_plan(path, "fp-1", false);
  ASSERT_TRUE(summary.has_value());
  EXPECT_TRUE(summary->patches.empty());
  EXPECT_EQ(summary->patch_count, plan.patch_count);

  EXPECT_FALSE(read_plan(path, "fp-2", true).has_value()) << "another configuration's plan";
  EXPECT_FALSE(read_plan(plan_path(dir_.string(), "none"), "fp-1", true).has_value());

  // A failed slide's plan keeps its reason and no patches.
  SlidePlan failed = plan;
  failed.ok = false;
  failed.reason = "no tissue detected";
  failed.patches.clear();
  write_plan(path, failed, e, "fp-1");
  const auto failed_back = read_plan(path, "fp-1", true);
  ASSERT_TRUE(failed_back.has_value());
  EXPECT_FALSE(failed_back->ok);
  EXPECT_EQ(failed_back->reason, "no tissue detected");
  EXPECT_EQ(failed_back->patch_count, 0);

  // Not an HDF5 file: an IoError naming it, not a silent redo.
  std::ofstream(path, std::ios::trunc) << "garbage";
  try {
    read_plan(path, "fp-1", true);
    ADD_FAILURE() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("rt.h5"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera::patchgen
