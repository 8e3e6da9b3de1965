// aggregate end to end: a labelled cohort (with a slide without tissue) through patchgen and embed,
// then aggregate at R = 1, 2, 3 with every pooling, a TorchScript slide encoder and at patient
// level, read back as TRIDENT and scikit-learn users read the files (h5py, torch.load).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "common/h5/h5.h"
#include "common/stage/layout.h"
#include "common/store/slide_vectors.h"
#include "common/store/slide_features.h"
#include "stages/aggregate/aggregate.h"
#include "tests/e2e/e2e_util.h"
#include "tests/synthslide/cohort.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {
namespace {

const std::string kPatchgen = TESSERA_PATCHGEN;
const std::string kEmbed = TESSERA_EMBED;
const std::string kAggregate = TESSERA_AGGREGATE;
const std::string kPython = TESSERA_PYTHON;
const std::string kTools = std::string(TESSERA_SOURCE_DIR) + "/stages/aggregate/tools";

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// /features of a TRIDENT slide feature file.
std::vector<float> trident_vector(const std::string& path) {
  return h5::File::open(path, h5::Mode::kRead).open_dataset("features").read_all<float>();
}

class AggregateE2E : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new TempDir("aggregate_e2e");
    synth::CohortSpec spec;
    spec.dir = (dir_->path() / "cohort").string();
    spec.slides = 5;
    spec.patients = 3;
    spec.width = 1400;
    spec.height = 1000;
    spec.seed = 3;
    spec.threads = 2;
    synth::write_cohort(spec);
    synth::SlideSpec blank;
    blank.path = spec.dir + "/slides/blank.tif";
    blank.width = 1200;
    blank.height = 900;
    blank.tissue_fraction = 0;
    synth::write_slide(blank);
    std::ofstream(spec.dir + "/manifest.csv", std::ios::app) << "blank,slides/blank.tif,P003,none\n";
    std::string log;
    // The blank slide has no tissue: patchgen lists it as failed (exit 3) or empty.
    const int code = run_command(mpirun(2) + kPatchgen + " --manifest " + spec.dir +
                                     "/manifest.csv --out " + run() + " --patch-size 112",
                                 &log);
    ASSERT_TRUE(code == 0 || code == 3) << log;
    ASSERT_EQ(run_command(mpirun(2) + kEmbed + " --run " + run() +
                              " --model vit-tiny --batch-size 8 --torch-threads 1",
                          &log),
              0)
        << log;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  static std::string run() { return (*dir_) / "run"; }
  // RUN/slides/<name> and RUN/embed/vit-tiny, from the run layout.
  static std::string out(const std::string& name) {
    return RunLayout(run()).stage_root(kAggregateStage, name);
  }
  static std::string embed_dir() { return RunLayout(run()).stage_root(kEmbedStage, "vit-tiny"); }
  static int patch_dim() {
    return read_slide_features(embed_dir() + "/features/S0001.h5").dim;
  }
  static int aggregate(int ranks, const std::string& args, std::string* log) {
    return run_command(mpirun(ranks) + kAggregate + " --run " + run() + " " + args, log);
  }
  static std::string check(const std::string& name, const std::string& mode) {
    std::string log;
    const int code = run_command("cd / && " + kPython + " " + kTools + "/read_slide_outputs.py " +
                                     out(name) + " " + embed_dir() + " " + mode,
                                 &log);
    return code == 0 ? log : "exit " + std::to_string(code) + ": " + log;
  }
  static TempDir* dir_;
};
TempDir* AggregateE2E::dir_ = nullptr;

TEST_F(AggregateE2E, SameVectorsAtOneTwoAndThreeRanksAndReadableAsTrident) {
  std::string log;
  for (int r = 1; r <= 3; ++r) {
    ASSERT_EQ(aggregate(r, "--name r" + std::to_string(r), &log), 0) << log;
  }
  EXPECT_TRUE(std::filesystem::is_directory(run() + "/slides/r1"));  // formats.md's path
  const CohortVectors one = read_cohort_vectors(out("r1") + "/slides.h5");
  ASSERT_EQ(one.size(), 5u);  // blank is skipped
  EXPECT_EQ(one.skipped_ids, std::vector<std::string>{"blank"});
  EXPECT_NE(one.skipped_reasons.at(0).find("no patches"), std::string::npos);
  EXPECT_EQ(one.encoder, "mean-vit-tiny");
  EXPECT_EQ(one.ids.front(), "S0001");
  ASSERT_NE(one.label("diagnosis"), nullptr);
  for (const int r : {2, 3}) {
    const CohortVectors other = read_cohort_vectors(out("r" + std::to_string(r)) + "/slides.h5");
    EXPECT_EQ(other.ids, one.ids);
    EXPECT_EQ(other.features, one.features) << r;  // bitwise
    EXPECT_EQ(*other.label("diagnosis"), *one.label("diagnosis"));
    for (const auto& id : one.ids) {
      const std::string file = "/slide_features_mean-vit-tiny/" + id + ".h5";
      EXPECT_TRUE(trident_vector(out("r1") + file) ==
                  trident_vector(out("r" + std::to_string(r)) + file))
          << id;
    }
  }
  EXPECT_EQ(check("r3", "mean"), "ok 5 1\n");
  const std::string skipped = read_text(out("r2") + "/skipped.csv");
  EXPECT_NE(skipped.find("blank,no patches"), std::string::npos) << skipped;
  EXPECT_NE(read_text(out("r2") + "/_SUCCESS").find("\"blank\""), std::string::npos);
}

TEST_F(AggregateE2E, PoolingsResumeOverwriteAndRefusal) {
  std::string log;
  ASSERT_EQ(aggregate(2, "--pooling max", &log), 0) << log;
  EXPECT_EQ(check("max-vit-tiny", "max"), "ok 5 1\n");
  ASSERT_EQ(aggregate(2, "--pooling mean+max --name mm", &log), 0) << log;
  EXPECT_EQ(check("mm", "mean+max"), "ok 5 1\n");
  EXPECT_EQ(read_cohort_vectors(out("mm") + "/slides.h5").dim, 2 * patch_dim());
  // A complete output returns at once; other settings need --overwrite.
  ASSERT_EQ(aggregate(2, "--pooling mean+max --name mm", &log), 0) << log;
  EXPECT_EQ(aggregate(2, "--pooling max --name mm", &log), 2) << log;
  ASSERT_EQ(aggregate(3, "--pooling max --name mm --overwrite", &log), 0) << log;
  EXPECT_EQ(check("mm", "max"), "ok 5 1\n");
  EXPECT_EQ(aggregate(1, "--pooling median", &log), 2) << log;
  EXPECT_EQ(aggregate(1, "--tag nope", &log), 2) << log;
}

TEST_F(AggregateE2E, TorchScriptSlideEncoderWithTridentsCallingConvention) {
  std::string log;
  const std::string model = (*dir_) / "coords_mean.pt";
  const int made =
      run_command(kPython + " " + kTools + "/make_test_slide_encoder.py " + model, &log);
  ASSERT_EQ(made, 0) << "PyTorch (python3-torch) cannot make the test encoder: " << log;
  for (const int r : {1, 3}) {
    ASSERT_EQ(aggregate(r, "--slide-encoder " + model + " --name enc" + std::to_string(r), &log),
              0)
        << log;
  }
  const CohortVectors a = read_cohort_vectors(out("enc1") + "/slides.h5");
  const CohortVectors b = read_cohort_vectors(out("enc3") + "/slides.h5");
  EXPECT_EQ(a.dim, patch_dim() + 2);
  EXPECT_EQ(a.method, "torchscript");
  EXPECT_EQ(a.encoder, "coords_mean");
  EXPECT_EQ(a.features, b.features);
  EXPECT_EQ(check("enc3", "coords-mean"), "ok 5 1\n");
  const std::string broken = (*dir_) / "broken.pt";
  std::ofstream(broken) << "not a model";
  EXPECT_EQ(aggregate(1, "--slide-encoder " + broken + " --name broken", &log), 2) << log;
}

TEST_F(AggregateE2E, PatientLevelPoolsEveryPatchOfThePatient) {
  std::string log;
  ASSERT_EQ(aggregate(2, "--level patient", &log), 0) << log;
  const CohortVectors p = read_cohort_vectors(out("mean-vit-tiny-patient") + "/patients.h5");
  EXPECT_EQ(p.level, "patient");
  EXPECT_EQ(p.ids, (std::vector<std::string>{"P001", "P002", "P003"}));
  EXPECT_EQ(check("mean-vit-tiny-patient", "patient-mean"), "ok 3 0\n");
  // P003 has the blank slide as well: listed among its slides, with its diagnosis label.
  EXPECT_NE(p.slides.at(2).find("blank"), std::string::npos);
  EXPECT_NE(p.label("diagnosis")->at(2).find("none"), std::string::npos);
}

}  // namespace
}  // namespace tessera::e2e
