// The CLAM and TRIDENT layouts of embed's outputs, end to end: a patch run with a slide read
// without resampling, one resampled, one read at pyramid level 1, one without tissue and one that
// cannot be opened; embed under mpirun; the attributes checked against the slides' geometry and
// the files read by tests/e2e/py/read_peer_layouts.py the way the peers read them (torch.load for
// CLAM's .pt files, where Python's torch is installed).
#include <gtest/gtest.h>

#include <sys/stat.h>

#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "tests/e2e/e2e_util.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {
namespace {

const std::string kPatchgen = TESSERA_PATCHGEN;
const std::string kEmbed = TESSERA_EMBED;
const std::string kPython = "/usr/bin/python3";

struct Expected {
  const char* id;
  double mpp;
  int64_t width, height;
  int64_t level, read_size, patch_size_level0;
};
// S = 96 at 0.5 um/px.
const Expected kSlides[] = {
    {"plain", 0.5, 1800, 1400, 0, 96, 96},      // read as is
    {"resampled", 0.4, 1800, 1600, 0, 120, 120},  // 120 level-0 pixels resized to 96
    {"level1", 0.25, 3600, 2800, 1, 96, 192},     // level 1 is at 0.5 um/px
};

class PeerRun : public ::testing::Environment {
 public:
  static fs::path dir() { return fs::temp_directory_path() / fmt::format("tessera_peers_e2e_{}", ::getpid()); }
  static std::string run() { return (dir() / "run").string(); }
  static std::string manifest() { return (dir() / "m.csv").string(); }
  void SetUp() override {
    fs::remove_all(dir());
    fs::create_directories(dir());
    uint64_t seed = 60;
    for (const auto& e : kSlides) {
      synth::SlideSpec spec;
      spec.path = (dir() / (std::string(e.id) + ".tif")).string();
      spec.width = e.width;
      spec.height = e.height;
      spec.seed = seed++;
      spec.mpp = e.mpp;
      synth::write_slide(spec);
    }
    synth::SlideSpec blank;
    blank.path = (dir() / "blank.tif").string();
    blank.width = 1200;
    blank.height = 1000;
    blank.tissue_fraction = 0;
    synth::write_slide(blank);
    write_text((dir() / "broken.tif").string(), "II*garbage that is not a TIFF directory");
    // case_id and label make the manifest CLAM's csv_path as well.
    write_text(manifest(),
               "case_id,slide_id,label,path\n"
               "p1,plain,tumor,plain.tif\n"
               "p1,resampled,normal,resampled.tif\n"
               "p2,level1,tumor,level1.tif\n"
               "p3,blank,normal,blank.tif\n"
               "p4,broken,tumor,broken.tif\n");
    std::string log;
    const int code = run_command(mpirun(2) + kPatchgen + " --manifest " + manifest() + " --out " +
                                     run() + " --patch-size 96 --mpp 0.5 --stride 80",
                                 &log);
    ASSERT_EQ(code, 3) << log;  // blank and broken fail at planning
  }
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(dir());
  }
};

std::string embed(int ranks, const std::string& extra) {
  return mpirun(ranks) + kEmbed + " --run " + PeerRun::run() +
         " --model vit-tiny --batch-size 8 --torch-threads 1 " + extra;
}

std::string stage(const std::string& tag) { return PeerRun::run() + "/embed/" + tag; }

ino_t inode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

void check_trident_coords(const h5::Dataset& c, const Expected& e) {
  EXPECT_EQ(c.attr_int("patch_size"), 96) << e.id;
  EXPECT_EQ(c.attr_int("patch_size_level0"), e.patch_size_level0) << e.id;
  EXPECT_DOUBLE_EQ(c.attr_double("level0_magnification"), 10.0 / e.mpp) << e.id;
  EXPECT_DOUBLE_EQ(c.attr_double("target_magnification"), 20.0) << e.id;
  EXPECT_EQ(c.attr_int("overlap"), 16) << e.id;
  EXPECT_EQ(c.attr_int("level0_width"), e.width) << e.id;
  EXPECT_EQ(c.attr_int("level0_height"), e.height) << e.id;
  EXPECT_EQ(c.attr_string("name"), e.id);
}

TEST(PeersE2E, AttributesDescribeWhatWasReadForEverySlide) {
  std::string log;
  ASSERT_EQ(run_command(embed(2, "--tag t"), &log), 0) << log;
  const std::string s = stage("t");
  for (const auto& e : kSlides) {
    const std::string own = s + "/features/" + e.id + ".h5";
    {
      h5::File f = h5::File::open(own, h5::Mode::kRead);
      EXPECT_EQ(f.attr_int("patch_size"), 96);
      EXPECT_EQ(f.attr_int("patch_level"), e.level) << e.id;
      EXPECT_EQ(f.attr_int("read_size"), e.read_size) << e.id;
      h5::Dataset features = f.open_dataset("features");
      EXPECT_EQ(features.attr_string("encoder"), "t");
      EXPECT_EQ(features.attr_string("name"), e.id);
      EXPECT_GT(features.dims()[0], 0u) << e.id;
      check_trident_coords(f.open_dataset("coords"), e);
    }
    {
      h5::File f = h5::File::open(s + "/patches/" + e.id + "_patches.h5", h5::Mode::kRead);
      check_trident_coords(f.open_dataset("coords"), e);
    }
    {
      // CLAM reads read_region(coord, patch_level, (patch_size, patch_size)).
      h5::File f = h5::File::open(s + "/clam/patches/" + e.id + ".h5", h5::Mode::kRead);
      h5::Dataset c = f.open_dataset("coords");
      EXPECT_EQ(c.attr_int("patch_size"), e.read_size) << e.id;
      EXPECT_EQ(c.attr_int("patch_level"), e.level) << e.id;
      EXPECT_DOUBLE_EQ(c.attr_double("downsample"),
                       static_cast<double>(e.patch_size_level0) / e.read_size) << e.id;
    }
    // One copy of the features: the peers' h5 files are hard links to it.
    EXPECT_EQ(inode(s + "/features_t/" + e.id + ".h5"), inode(own)) << e.id;
    EXPECT_EQ(inode(s + "/clam/h5_files/" + e.id + ".h5"), inode(own)) << e.id;
    EXPECT_TRUE(fs::exists(s + "/clam/pt_files/" + e.id + ".pt")) << e.id;
  }
  // The slide without tissue: (0, D) files like CLAM's and TRIDENT's; the broken one: none.
  {
    h5::File f = h5::File::open(s + "/features/blank.h5", h5::Mode::kRead);
    EXPECT_EQ(f.open_dataset("features").dims(), (std::vector<hsize_t>{0, 64}));
    EXPECT_EQ(f.open_dataset("coords").dims(), (std::vector<hsize_t>{0, 2}));
    EXPECT_GT(f.open_dataset("coords").attr_int("patch_size_level0"), 0);
  }
  EXPECT_TRUE(fs::exists(s + "/clam/pt_files/blank.pt"));
  EXPECT_TRUE(fs::exists(s + "/patches/blank_patches.h5"));
  EXPECT_FALSE(fs::exists(s + "/features/broken.h5"));
  EXPECT_FALSE(fs::exists(s + "/clam/pt_files/broken.pt"));
  const std::string table = read_file(s + "/slides.csv");
  EXPECT_EQ(table.substr(0, table.find('\n')), "slide_id,status,patches,reason");
  EXPECT_NE(table.find("\nblank,empty,0,no tissue detected\n"), std::string::npos) << table;
  EXPECT_NE(table.find("\nbroken,failed,0,"), std::string::npos) << table;
  auto summary = read_json_file(s + "/_SUCCESS");
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ((*summary)["slides"], 4);
  EXPECT_EQ((*summary)["empty_slides"], 1);
  EXPECT_EQ((*summary)["peer_layouts"], "clam,trident");
  EXPECT_EQ((*summary)["encoder"], "t");
  for (const std::string tmp : {"/features", "/clam/pt_files", "/patches", "/features_t"}) {
    for (const auto& entry : fs::directory_iterator(s + tmp)) {
      EXPECT_EQ(entry.path().string().find(".tmp"), std::string::npos) << entry.path();
    }
  }
}

// The peers' own reading logic over the files, from another working directory, and again after
// the run directory moved (hard links, no paths inside).
TEST(PeersE2E, PeersLoadTheFilesAsTheirOwn) {
  std::string log;
  ASSERT_EQ(run_command(embed(2, "--tag load"), &log), 0) << log;
  const std::string script = std::string(TESSERA_SOURCE_DIR) + "/tests/e2e/py/read_peer_layouts.py";
  ASSERT_TRUE(fs::exists(kPython)) << kPython << " is missing (.ci/bootstrap installs it)";
  ASSERT_EQ(run_command("cd / && " + kPython + " " + script + " " + stage("load") + " " +
                            PeerRun::manifest() + " load",
                        &log),
            0)
      << log;
  EXPECT_NE(log.find("ok 3 1 1"), std::string::npos) << log;
  const std::string moved = (PeerRun::dir() / "moved").string();
  fs::rename(stage("load"), moved);
  ASSERT_EQ(run_command("cd / && " + kPython + " " + script + " " + moved + " " +
                            PeerRun::manifest() + " load",
                        &log),
            0)
      << log;
  EXPECT_NE(log.find("ok 3 1 1"), std::string::npos) << log;
}

// With --deterministic the embeddings do not depend on the rank count, and neither do the peer
// files: byte-identical for 1 and 3 ranks (.pt zip archives included).
TEST(PeersE2E, PeerFilesAreDeterministic) {
  std::string log;
  ASSERT_EQ(run_command(embed(1, "--tag d1 --deterministic"), &log), 0) << log;
  ASSERT_EQ(run_command(embed(3, "--tag d3 --deterministic"), &log), 0) << log;
  for (const char* id : {"plain", "resampled", "level1", "blank"}) {
    for (const std::string rel :
         {"/clam/pt_files/" + std::string(id) + ".pt", "/clam/patches/" + std::string(id) + ".h5",
          "/patches/" + std::string(id) + "_patches.h5"}) {
      EXPECT_EQ(read_file(stage("d1") + rel), read_file(stage("d3") + rel)) << rel;
    }
  }
  EXPECT_EQ(read_file(stage("d1") + "/slides.csv"), read_file(stage("d3") + "/slides.csv"));
}

TEST(PeersE2E, PeerLayoutsCanBeLeftOut) {
  std::string log;
  ASSERT_EQ(run_command(embed(1, "--tag none --peer-layouts none"), &log), 0) << log;
  EXPECT_TRUE(fs::exists(stage("none") + "/features/plain.h5"));
  EXPECT_TRUE(fs::exists(stage("none") + "/features/blank.h5"));
  EXPECT_TRUE(fs::exists(stage("none") + "/slides.csv"));
  EXPECT_FALSE(fs::exists(stage("none") + "/clam"));
  EXPECT_FALSE(fs::exists(stage("none") + "/features_none"));
  EXPECT_FALSE(fs::exists(stage("none") + "/patches"));
  ASSERT_EQ(run_command(embed(1, "--tag tri --peer-layouts trident"), &log), 0) << log;
  EXPECT_FALSE(fs::exists(stage("tri") + "/clam"));
  EXPECT_TRUE(fs::exists(stage("tri") + "/features_tri/plain.h5"));
  EXPECT_EQ(run_command(embed(1, "--tag bad --peer-layouts clam,clam"), &log), 2) << log;
  EXPECT_NE(log.find("--peer-layouts"), std::string::npos) << log;
}

}  // namespace
}  // namespace tessera::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tessera::e2e::PeerRun);
  tessera::h5::init();
  return RUN_ALL_TESTS();
}
