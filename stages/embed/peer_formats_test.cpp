#include "stages/embed/peer_formats.h"

#include <gtest/gtest.h>

#include <sys/stat.h>

#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"

namespace tessera::embed {
namespace {

namespace fs = std::filesystem;

TEST(PeerLayouts, ParsesEveryFormAndRendersCanonically) {
  EXPECT_EQ(PeerLayouts::parse("clam,trident").to_string(), "clam,trident");
  EXPECT_EQ(PeerLayouts::parse("trident,clam").to_string(), "clam,trident");
  EXPECT_EQ(PeerLayouts::parse("clam").to_string(), "clam");
  EXPECT_EQ(PeerLayouts::parse("trident").to_string(), "trident");
  const PeerLayouts none = PeerLayouts::parse("none");
  EXPECT_FALSE(none.clam);
  EXPECT_FALSE(none.trident);
  for (const char* bad : {"", "clam,clam", "CLAM", "clam,", "all", "none,clam"}) {
    EXPECT_THROW(PeerLayouts::parse(bad), InvalidInput) << bad;
  }
}

TEST(PeerNames, TridentAliasesOnlyForExportedPresetWeights) {
  EXPECT_EQ(trident_encoder_alias("uni"), "uni_v1");
  EXPECT_EQ(trident_encoder_alias("uni2-h"), "uni_v2");
  EXPECT_EQ(trident_encoder_alias("conch"), "conch_v1");
  EXPECT_EQ(trident_encoder_alias("prov-gigapath"), "gigapath");
  EXPECT_EQ(trident_encoder_alias("h-optimus-0"), "hoptimus0");
  EXPECT_EQ(trident_encoder_alias("vit-tiny"), "");
  const nlohmann::json ts = {{"kind", "torchscript"}, {"preset", {{"name", "uni"}}}};
  EXPECT_EQ(trident_encoder_name(ts, "mytag"), "uni_v1");
  const nlohmann::json other = {{"kind", "torchscript"}, {"preset", {{"name", "mine"}}}};
  EXPECT_EQ(trident_encoder_name(other, "mytag"), "mytag");
  // A built-in under a preset has seeded random weights, not the named model's.
  const nlohmann::json builtin = {{"kind", "builtin"}, {"preset", {{"name", "uni"}}}};
  EXPECT_EQ(trident_encoder_name(builtin, "mytag"), "mytag");
}

IndexInfo three_slides() {
  IndexInfo info;
  info.patch_size = 224;
  info.mpp = 0.5;
  SlideTable& t = info.slides;
  // a: read at level 0 without resampling; b: 0.25 um/px read at level 0 at 448 px (resampled);
  // c: no tissue; d: unreadable; e: of another part.
  t.slide_id = {"a", "b", "c", "d", "e"};
  t.status = {"ok", "ok", "failed", "failed", "other_part"};
  t.reason = {"", "", "no tissue detected", "cannot open", ""};
  t.width = {1000, 8000, 3000, 0, 0};
  t.height = {900, 6000, 2000, 0, 0};
  t.patch_count = {4, 9, 0, 0, 0};
  t.level = {0, 0, -1, -1, -1};
  t.read_size = {224, 448, 0, 0, 0};
  t.mpp_x = {0.5, 0.25, 0.4, 0, 0};
  t.downsample = {1.0, 2.0, 0, 0, 0};
  return info;
}

TEST(PeerGeometry, AttributesDeriveFromTheIndexForResampledAndPlainSlides) {
  const IndexInfo info = three_slides();
  const SlideGeometry a = slide_geometry(info, 0, 0);
  EXPECT_EQ(a.patch_size, 224);
  EXPECT_EQ(a.read_size, 224);
  EXPECT_EQ(a.patch_level, 0);
  EXPECT_EQ(a.patch_size_level0, 224);
  EXPECT_DOUBLE_EQ(a.level0_magnification, 20.0);
  EXPECT_DOUBLE_EQ(a.target_magnification, 20.0);
  EXPECT_EQ(a.level0_width, 1000);
  const SlideGeometry b = slide_geometry(info, 1, 32);
  EXPECT_EQ(b.patch_size, 224);
  EXPECT_EQ(b.read_size, 448);
  EXPECT_EQ(b.patch_size_level0, 448);
  EXPECT_DOUBLE_EQ(b.level0_magnification, 40.0);
  EXPECT_DOUBLE_EQ(b.target_magnification, 20.0);
  EXPECT_EQ(b.overlap, 32);
  EXPECT_EQ(b.name, "b");
  // TRIDENT's own relation: patch_size_level0 = patch_size * level0_mag / target_mag.
  EXPECT_DOUBLE_EQ(b.patch_size * b.level0_magnification / b.target_magnification,
                   static_cast<double>(b.patch_size_level0));
  // An empty slide has no level: described as read at level 0 with its footprint.
  const SlideGeometry c = slide_geometry(info, 2, 0);
  EXPECT_EQ(c.patch_level, 0);
  EXPECT_EQ(c.read_size, 280);
  EXPECT_EQ(c.patch_size_level0, 280);
  EXPECT_DOUBLE_EQ(c.level0_magnification, 25.0);
}

TEST(PeerGeometry, OutcomesAndStatusTable) {
  const IndexInfo info = three_slides();
  EXPECT_EQ(slide_outcome(info.slides, 0), SlideOutcome::kPatches);
  EXPECT_EQ(slide_outcome(info.slides, 2), SlideOutcome::kEmpty);
  EXPECT_EQ(slide_outcome(info.slides, 3), SlideOutcome::kFailed);
  EXPECT_EQ(slide_outcome(info.slides, 4), SlideOutcome::kOtherPart);
  SlideTable t = info.slides;
  t.reason[2] = "tissue found, but no patch reaches --min-tissue 0.5";
  EXPECT_EQ(slide_outcome(t, 2), SlideOutcome::kEmpty);
  t.reason[3] = "bad, \"quoted\" reason";
  EXPECT_EQ(status_table_csv(t),
            "slide_id,status,patches,reason\n"
            "a,ok,4,\nb,ok,9,\n"
            "c,empty,0,\"tissue found, but no patch reaches --min-tissue 0.5\"\n"
            "d,failed,0,\"bad, \"\"quoted\"\" reason\"\n");
}

class PeerFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    h5::init();
    dir_ = fs::temp_directory_path() / ("tessera_peer_files_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(PeerFiles, PatchFilesCarryEachPeersAttributes) {
  const IndexInfo info = three_slides();
  const SlideGeometry b = slide_geometry(info, 1, 0);
  const std::vector<int64_t> xy = {0, 0, 448, 0, 0, 448};
  write_trident_patch_file(path("b_patches.h5"), xy, b);
  write_clam_patch_file(path("b.h5"), xy, b);
  {
    h5::File f = h5::File::open(path("b_patches.h5"), h5::Mode::kRead);
    h5::Dataset c = f.open_dataset("coords");
    EXPECT_EQ(c.read_all<int64_t>(), xy);
    EXPECT_EQ(c.attr_int("patch_size"), 224);
    EXPECT_EQ(c.attr_int("patch_size_level0"), 448);
    EXPECT_DOUBLE_EQ(c.attr_double("level0_magnification"), 40.0);
    EXPECT_DOUBLE_EQ(c.attr_double("target_magnification"), 20.0);
    EXPECT_EQ(c.attr_int("overlap"), 0);
    EXPECT_EQ(c.attr_int("level0_width"), 8000);
    EXPECT_EQ(c.attr_int("level0_height"), 6000);
    EXPECT_EQ(c.attr_string("name"), "b");
  }
  {
    h5::File f = h5::File::open(path("b.h5"), h5::Mode::kRead);
    h5::Dataset c = f.open_dataset("coords");
    EXPECT_EQ(c.read_all<int64_t>(), xy);
    EXPECT_EQ(c.attr_int("patch_size"), 448);  // what read_region reads at patch_level
    EXPECT_EQ(c.attr_int("patch_level"), 0);
    EXPECT_DOUBLE_EQ(c.attr_double("downsample"), 1.0);
  }
  EXPECT_FALSE(fs::exists(path("b.h5.tmp")));
  // An empty slide's patch file holds [0, 2] coordinates.
  write_trident_patch_file(path("c_patches.h5"), {}, slide_geometry(info, 2, 0));
  h5::File f = h5::File::open(path("c_patches.h5"), h5::Mode::kRead);
  EXPECT_EQ(f.open_dataset("coords").dims(), (std::vector<hsize_t>{0, 2}));
}

TEST_F(PeerFiles, LinksNameTheSameFileAndReplaceOldOnes) {
  atomic_write_file(path("target"), "one");
  atomic_write_file(path("link"), "old");
  link_or_copy(path("target"), path("link"));
  EXPECT_EQ(read_file(path("link")), "one");
  struct stat a {}, b {};
  ASSERT_EQ(::stat(path("target").c_str(), &a), 0);
  ASSERT_EQ(::stat(path("link").c_str(), &b), 0);
  EXPECT_EQ(a.st_ino, b.st_ino);
  EXPECT_FALSE(fs::exists(path("link.tmp")));
  EXPECT_THROW(link_or_copy(path("missing"), path("link2")), IoError);
}

}  // namespace
}  // namespace tessera::embed
