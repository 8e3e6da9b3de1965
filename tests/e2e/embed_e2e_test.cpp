// embed end to end: the executable under mpirun with 1..3 ranks over a patchgen run made here.
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/stage/marker.h"
#include "tests/synthslide/synthslide.h"
#include "tests/e2e/e2e_util.h"

namespace tessera::e2e {
namespace {

const std::string kPatchgen = TESSERA_PATCHGEN;
const std::string kEmbed = TESSERA_EMBED;

// One patchgen run (raw store, 2 ranks) and one JPEG store, shared by every test.
class PatchRun : public ::testing::Environment {
 public:
  static fs::path dir() { return fs::temp_directory_path() / fmt::format("tessera_embed_e2e_{}", ::getpid()); }
  static std::string raw() { return (dir() / "raw").string(); }
  static std::string jpeg() { return (dir() / "jpeg").string(); }
  void SetUp() override {
    fs::remove_all(dir());
    fs::create_directories(dir());
    for (int i = 0; i < 2; ++i) {
      synth::SlideSpec spec;
      spec.path = (dir() / fmt::format("s{}.tif", i)).string();
      spec.width = 1800;
      spec.height = 1400 + 200 * i;
      spec.seed = 40 + i;
      spec.mpp = i == 0 ? 0.5 : 0.4;  // slide 1 is resampled to 0.5 um/px
      synth::write_slide(spec);
    }
    write_text((dir() / "m.csv").string(), "slide_id,path\nfirst,s0.tif\nsecond,s1.tif\n");
    for (const auto& [out, encoding] : {std::pair{raw(), "raw"}, std::pair{jpeg(), "jpeg"}}) {
      std::string log;
      int code = run_command(mpirun(2) + kPatchgen + " --manifest " + (dir() / "m.csv").string() +
                             " --out " + out + " --patch-size 96 --encoding " + encoding, &log);
      ASSERT_EQ(code, 0) << log;
    }
  }
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(dir());
  }
};

std::string embed(int ranks, const std::string& run, const std::string& extra) {
  return mpirun(ranks) + kEmbed + " --run " + run +
         " --model vit-tiny --batch-size 8 --torch-threads 1 --progress-interval 0.5 " + extra;
}

struct Merged {
  std::vector<int64_t> ids;
  std::vector<float> emb;
  std::vector<int64_t> coords;
  int64_t dim = 0;
};

Merged read_merged(const std::string& stage_dir) {
  h5::File f = h5::File::open(stage_dir + "/embeddings.h5", h5::Mode::kRead);
  Merged m;
  m.ids = f.open_dataset("patch_id").read_all<int64_t>();
  m.emb = f.open_dataset("embeddings").read_all<float>();
  m.coords = f.open_dataset("coords").read_all<int64_t>();
  m.dim = f.attr_int("output_dim");
  return m;
}

float max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

// Default mode: an image's batch companions differ with the rank count, and GEMM kernels round
// edge rows differently, so results agree to float rounding. --deterministic embeds each image on
// its own, making the merged output byte-identical whatever the rank count.
TEST(EmbedE2E, MergedOutputsAgreeForOneTwoThreeRanks) {
  h5::File index = h5::File::open(PatchRun::raw() + "/patchgen/index.h5", h5::Mode::kRead);
  auto ids = index.open_dataset("patch_id").read_all<int64_t>();
  for (const std::string mode : {"", "--deterministic"}) {
    std::vector<Merged> merged;
    for (int ranks = 1; ranks <= 3; ++ranks) {
      std::string log;
      const std::string tag = fmt::format("r{}{}", ranks, mode.empty() ? "" : "d");
      ASSERT_EQ(run_command(embed(ranks, PatchRun::raw(), "--tag " + tag + " " + mode), &log), 0) << log;
      merged.push_back(read_merged(PatchRun::raw() + "/embed/" + tag));
    }
    ASSERT_EQ(merged[0].ids, ids);
    EXPECT_EQ(merged[0].dim, 64);
    ASSERT_EQ(merged[0].emb.size(), ids.size() * 64);
    for (int r = 1; r < 3; ++r) {
      EXPECT_EQ(merged[r].ids, merged[0].ids);
      ASSERT_EQ(merged[r].emb.size(), merged[0].emb.size());
      float diff = max_abs_diff(merged[r].emb, merged[0].emb);
      EXPECT_LE(diff, 1e-5f) << "ranks " << r + 1 << " " << mode;
      if (!mode.empty()) {
        EXPECT_EQ(std::memcmp(merged[r].emb.data(), merged[0].emb.data(), merged[0].emb.size() * 4), 0)
            << "ranks " << r + 1 << " differ from 1 rank by up to " << diff;
      }
    }
  }
}

// A preset that recommends another patch size refuses the run before anything is written, unless
// forced; the patches here are 96 px at 0.5 um/px.
TEST(EmbedE2E, PresetRecommendationsAreEnforced) {
  const std::string preset = (PatchRun::dir() / "tiny448.ini").string();
  write_text(preset,
             "name = tiny448\ninput_size = 224\nmean = 0.5 0.5 0.5\nstd = 0.25 0.25 0.25\n"
             "output_dim = 64\npooling = cls\nprefix_tokens = 2\npatch_size = 448\nmpp = 0.5\n");
  std::string log;
  EXPECT_EQ(run_command(embed(1, PatchRun::raw(), "--tag guarded --preset " + preset), &log), 2)
      << log;
  EXPECT_NE(log.find("448"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(PatchRun::raw() + "/embed/guarded/run.json"));
  EXPECT_EQ(run_command(embed(1, PatchRun::raw(),
                              "--tag guarded --preset " + preset + " --force-preset-mismatch"),
                        &log),
            0)
      << log;
}

TEST(EmbedE2E, PerSlideFilesHaveTheClamLayout) {
  std::string log;
  ASSERT_EQ(run_command(embed(2, PatchRun::raw(), "--tag layout --store-dtype fp16"), &log), 0) << log;
  const std::string stage = PatchRun::raw() + "/embed/layout";
  Merged m = read_merged(stage);
  int64_t rows = 0;
  for (const char* slide : {"first", "second"}) {
    h5::File f = h5::File::open(stage + "/features/" + slide + ".h5", h5::Mode::kRead);
    h5::Dataset features = f.open_dataset("features");
    h5::Dataset coords = f.open_dataset("coords");
    auto dims = features.dims();
    ASSERT_EQ(dims.size(), 2u);
    EXPECT_EQ(dims[1], 64u);
    EXPECT_EQ(coords.dims()[0], dims[0]);
    EXPECT_EQ(coords.dims()[1], 2u);
    EXPECT_EQ(f.attr_int("patch_size"), 96);
    EXPECT_DOUBLE_EQ(f.attr_double("mpp"), 0.5);
    EXPECT_NE(f.attr_string("model_fingerprint").find("vit-tiny"), std::string::npos);
    auto feats = features.read_all<float>();
    auto xy = coords.read_all<int64_t>();
    // The slide's rows are the merged rows of that slide, in the same order.
    for (size_t k = 0; k < dims[0]; ++k) {
      EXPECT_EQ(xy[2 * k], m.coords[2 * (rows + k)]);
      EXPECT_EQ(feats[k * 64], m.emb[(rows + k) * 64]);
    }
    rows += static_cast<int64_t>(dims[0]);
  }
  EXPECT_EQ(rows, static_cast<int64_t>(m.ids.size()));
  auto summary = read_json_file(stage + "/_SUCCESS");
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ((*summary)["store_dtype"], "fp16");
}

TEST(EmbedE2E, StoreAndWsiSourcesGiveIdenticalEmbeddings) {
  std::string log;
  ASSERT_EQ(run_command(embed(2, PatchRun::raw(), "--tag store"), &log), 0) << log;
  ASSERT_EQ(run_command(embed(2, PatchRun::raw(), "--tag wsi --source wsi"), &log), 0) << log;
  Merged a = read_merged(PatchRun::raw() + "/embed/store");
  Merged b = read_merged(PatchRun::raw() + "/embed/wsi");
  ASSERT_EQ(a.emb.size(), b.emb.size());
  EXPECT_EQ(std::memcmp(a.emb.data(), b.emb.data(), a.emb.size() * 4), 0);
}

TEST(EmbedE2E, JpegStoreIsDecoded) {
  std::string log;
  ASSERT_EQ(run_command(embed(2, PatchRun::jpeg(), ""), &log), 0) << log;
  Merged m = read_merged(PatchRun::jpeg() + "/embed/vit-tiny");
  EXPECT_GT(m.ids.size(), 50u);
  for (float v : m.emb) ASSERT_TRUE(std::isfinite(v));
}

TEST(EmbedE2E, KilledRankThenRerunEqualsUninterruptedRun) {
  std::string log;
  ASSERT_EQ(run_command(embed(2, PatchRun::raw(), "--tag clean"), &log), 0) << log;
  EXPECT_NE(run_command(embed(2, PatchRun::raw(), "--tag killed --debug-kill-rank 1 --debug-kill-after 16"), &log), 0) << log;
  EXPECT_FALSE(fs::exists(PatchRun::raw() + "/embed/killed/_SUCCESS"));
  ASSERT_EQ(run_command(embed(2, PatchRun::raw(), "--tag killed"), &log), 0) << log;
  EXPECT_NE(log.find("resuming"), std::string::npos) << log;
  Merged a = read_merged(PatchRun::raw() + "/embed/clean");
  Merged b = read_merged(PatchRun::raw() + "/embed/killed");
  ASSERT_EQ(a.emb.size(), b.emb.size());
  EXPECT_EQ(std::memcmp(a.emb.data(), b.emb.data(), a.emb.size() * 4), 0);
  ASSERT_EQ(run_command(embed(2, PatchRun::raw(), "--tag killed"), &log), 0) << log;
  EXPECT_NE(log.find("already complete"), std::string::npos) << log;
}

TEST(EmbedE2E, RefusesIncompletePatchgenChangedModelAndBadModel) {
  std::string log;
  const std::string empty = (PatchRun::dir() / "empty").string();
  fs::create_directories(empty + "/patchgen");
  EXPECT_EQ(run_command(embed(1, empty, ""), &log), 2) << log;
  EXPECT_NE(log.find("no _SUCCESS"), std::string::npos) << log;
  ASSERT_EQ(run_command(embed(1, PatchRun::raw(), "--tag same"), &log), 0) << log;
  EXPECT_EQ(run_command(embed(1, PatchRun::raw(), "--tag same --seed 5"), &log), 2) << log;
  EXPECT_NE(log.find("another configuration (this run differs in --seed 5 (was 0))"),
            std::string::npos)
      << log;
  EXPECT_EQ(run_command(mpirun(1) + kEmbed + " --run " + PatchRun::raw() + " --model vit-nope", &log), 2) << log;
  EXPECT_NE(log.find("vit-nope"), std::string::npos) << log;
  EXPECT_EQ(run_command(mpirun(1) + kEmbed + " --run " + PatchRun::raw() + " --model /no/such.pt", &log), 2) << log;
  EXPECT_NE(log.find("/no/such.pt"), std::string::npos) << log;
}

// embeddings.h5 maps the rank shards through virtual datasets: h5py reads it (and the feature
// files) as ordinary datasets, from any working directory.
TEST(EmbedE2E, OutputsReadWithH5pyFromAnotherDirectory) {
  std::string log;
  ASSERT_EQ(run_command(embed(3, PatchRun::raw(), "--tag h5py --store-dtype fp16"), &log), 0) << log;
  const std::string script = std::string(TESSERA_SOURCE_DIR) + "/tests/e2e/py/read_embeddings.py";
  ASSERT_EQ(run_command("cd / && /usr/bin/python3 " + script + " " + PatchRun::raw() +
                            "/embed/h5py",
                        &log),
            0)
      << log;
  EXPECT_NE(log.find("ok "), std::string::npos) << log;
  // The run directory moved elsewhere still reads: the shards are named relative to it.
  const std::string moved = (PatchRun::dir() / "moved").string();
  fs::create_directories(moved);
  fs::rename(PatchRun::raw() + "/embed/h5py", moved + "/h5py");
  ASSERT_EQ(run_command("cd / && /usr/bin/python3 " + script + " " + moved + "/h5py", &log), 0)
      << log;
}

// Cohort parts: patchgen and embed over P = 2 parts with R = 2 ranks each give the same rows and
// the same per-slide features as one part (byte-identical with --deterministic); the second part
// takes its number from a Slurm job array's environment.
TEST(EmbedE2E, TwoPartsEqualOnePart) {
  std::string log;
  const std::string run = (PatchRun::dir() / "parts").string();
  const std::string manifest = (PatchRun::dir() / "m.csv").string();
  const std::string array = "SLURM_ARRAY_TASK_ID=1 SLURM_ARRAY_TASK_MIN=0 SLURM_ARRAY_TASK_MAX=1 "
                            "SLURM_ARRAY_TASK_COUNT=2 ";
  const std::string patchgen = kPatchgen + " --manifest " + manifest + " --out " + run +
                               " --patch-size 96 ";
  ASSERT_EQ(run_command(mpirun(2) + patchgen + "--part 0 --parts 2", &log), 0) << log;
  ASSERT_EQ(run_command(array + mpirun(2) + patchgen, &log), 0) << log;
  ASSERT_EQ(run_command(embed(2, run, "--tag det --deterministic --part 0 --parts 2"), &log), 0)
      << log;
  // embed of a part whose patchgen part is missing is refused, naming it.
  EXPECT_EQ(run_command(embed(1, run, "--tag det --deterministic --part 2 --parts 3"), &log), 2)
      << log;
  EXPECT_NE(log.find("part-00002-of-00003"), std::string::npos) << log;
  ASSERT_EQ(run_command(array + embed(2, run, "--tag det --deterministic"), &log), 0) << log;
  ASSERT_EQ(run_command(embed(2, PatchRun::raw(), "--tag det1 --deterministic"), &log), 0) << log;

  h5::File one = h5::File::open(PatchRun::raw() + "/patchgen/index.h5", h5::Mode::kRead);
  const auto ids = one.open_dataset("patch_id").read_all<int64_t>();
  const auto coords = one.open_dataset("coords").read_all<int64_t>();
  std::vector<int64_t> part_ids, part_coords;
  for (int p = 0; p < 2; ++p) {
    const std::string dir = fmt::format("{}/patchgen/part-{:05d}-of-00002", run, p);
    h5::File index = h5::File::open(dir + "/index.h5", h5::Mode::kRead);
    EXPECT_EQ(index.attr_int("part"), p);
    for (int64_t v : index.open_dataset("patch_id").read_all<int64_t>()) part_ids.push_back(v);
    for (int64_t v : index.open_dataset("coords").read_all<int64_t>()) part_coords.push_back(v);
  }
  EXPECT_EQ(part_ids, ids);
  EXPECT_EQ(part_coords, coords);
  for (const auto& [slide, part] : {std::pair{"first", 0}, std::pair{"second", 1}}) {
    const std::string a = PatchRun::raw() + "/embed/det1/features/" + slide + ".h5";
    const std::string b =
        fmt::format("{}/embed/det/part-{:05d}-of-00002/features/{}.h5", run, part, slide);
    h5::File fa = h5::File::open(a, h5::Mode::kRead);
    h5::File fb = h5::File::open(b, h5::Mode::kRead);
    const auto va = fa.open_dataset("features").read_all<float>();
    const auto vb = fb.open_dataset("features").read_all<float>();
    ASSERT_EQ(va.size(), vb.size()) << slide;
    EXPECT_EQ(std::memcmp(va.data(), vb.data(), va.size() * 4), 0) << slide;
    EXPECT_EQ(fa.open_dataset("coords").read_all<int64_t>(),
              fb.open_dataset("coords").read_all<int64_t>());
  }
}

// A damaged chunk in a completed patch shard: embed fails naming the shard instead of turning
// it into "complete" embeddings; patchgen --verify full finds the damage and redoes that rank.
TEST(EmbedE2E, CorruptedPatchShardFailsEmbedAndVerifyFullRepairsIt) {
  std::string log;
  const std::string run = (PatchRun::dir() / "corrupt").string();
  fs::create_directories(run);
  fs::copy(PatchRun::raw() + "/patchgen", run + "/patchgen", fs::copy_options::recursive);
  const std::string shard = run + "/patchgen/shards/rank-00000.h5";
  const auto size = fs::file_size(shard);
  {
    std::fstream io(shard, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(static_cast<std::streamoff>(size / 2));
    const std::string junk(1000, '\x5a');
    io.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  EXPECT_NE(run_command(embed(2, run, "--tag bad"), &log), 0) << log;
  EXPECT_NE(log.find("rank-00000.h5"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(run + "/embed/bad/_SUCCESS"));
  // --verify full reads every byte of the inputs up front.
  EXPECT_NE(run_command(embed(2, run, "--tag bad --verify full"), &log), 0) << log;
  EXPECT_NE(log.find("damaged"), std::string::npos) << log;
  // patchgen --verify full on the complete run redoes rank 0 only; then embed succeeds.
  ASSERT_EQ(run_command(mpirun(2) + kPatchgen + " --manifest " + (PatchRun::dir() / "m.csv").string() +
                            " --out " + run + " --patch-size 96 --verify full",
                        &log),
            0)
      << log;
  EXPECT_NE(log.find("redoing rank output"), std::string::npos) << log;
  ASSERT_EQ(run_command(embed(2, run, "--tag bad"), &log), 0) << log;
}

// patchgen --overwrite cannot replace a patch run while embed reads it; once embed is done it
// can, and the embeddings made from the replaced run are marked stale, then redone on rerun.
TEST(EmbedE2E, PatchRunCannotBeReplacedUnderARunningEmbed) {
  std::string log;
  const std::string run = (PatchRun::dir() / "guarded").string();
  fs::create_directories(run);
  fs::copy(PatchRun::raw() + "/patchgen", run + "/patchgen", fs::copy_options::recursive);
  const std::string job_log = (PatchRun::dir() / "guarded.log").string();
  ASSERT_EQ(std::system(("(" + embed(1, run, "--tag g --debug-pause-before-marker 4") + " > " +
                         job_log + " 2>&1; echo $? >> " + job_log + ") &")
                            .c_str()),
            0);
  bool pausing = false;
  for (int i = 0; i < 600 && !pausing; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(job_log);
    std::stringstream text;
    text << in.rdbuf();
    pausing = text.str().find("pausing") != std::string::npos;
  }
  ASSERT_TRUE(pausing) << "embed did not reach its pause";
  const std::string overwrite = mpirun(1) + kPatchgen + " --manifest " +
                                (PatchRun::dir() / "m.csv").string() + " --out " + run +
                                " --patch-size 64 --overwrite";
  EXPECT_EQ(run_command(overwrite, &log), 2) << log;
  EXPECT_NE(log.find("locked"), std::string::npos) << log;
  std::this_thread::sleep_for(std::chrono::seconds(5));
  ASSERT_TRUE(fs::exists(run + "/embed/g/_SUCCESS"));
  ASSERT_EQ(run_command(overwrite, &log), 0) << log;
  EXPECT_TRUE(fs::exists(run + "/embed/g/_STALE"));
  ASSERT_EQ(run_command(embed(1, run, "--tag g"), &log), 0) << log;
  EXPECT_NE(log.find("stale"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(run + "/embed/g/_STALE"));
  h5::File index = h5::File::open(run + "/patchgen/index.h5", h5::Mode::kRead);
  EXPECT_EQ(read_merged(run + "/embed/g").ids, index.open_dataset("patch_id").read_all<int64_t>());
}

// A patch run whose slides all failed: embed says so and exits 3 like patchgen, not 0 with
// nothing embedded.
TEST(EmbedE2E, RunWithoutPatchesExitsThree) {
  std::string log;
  const fs::path dir = PatchRun::dir() / "nopatches";
  fs::create_directories(dir);
  write_text((dir / "broken.tif").string(), "II*garbage that is not a TIFF directory");
  write_text((dir / "m.csv").string(), "slide_id,path\nbroken,broken.tif\n");
  EXPECT_EQ(run_command(mpirun(1) + kPatchgen + " --manifest " + (dir / "m.csv").string() +
                            " --out " + (dir / "run").string(),
                        &log),
            3)
      << log;
  EXPECT_EQ(run_command(embed(2, (dir / "run").string(), ""), &log), 3) << log;
  EXPECT_NE(log.find("has no patches"), std::string::npos) << log;
  EXPECT_EQ(read_merged((dir / "run/embed/vit-tiny").string()).ids.size(), 0u);
}

}  // namespace
}  // namespace tessera::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tessera::e2e::PatchRun);
  tessera::h5::init();
  return RUN_ALL_TESTS();
}
