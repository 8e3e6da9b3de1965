#include "stages/embed/model.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "stages/embed/preprocess.h"

namespace tessera::embed {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

// One intra-op thread: with more, OpenMP barriers slow to a crawl when other tests share the cores.
constexpr int kThreads = 1;

// images[b, y, x, c] = (37 b + 11 y + 5 x + 67 c) mod 256, as in tools/make_test_torchscript.py.
std::vector<uint8_t> test_images(int n, int side, int first = 0) {
  std::vector<uint8_t> rgb(static_cast<size_t>(n) * side * side * 3);
  size_t i = 0;
  for (int b = first; b < first + n; ++b) {
    for (int y = 0; y < side; ++y) {
      for (int x = 0; x < side; ++x) {
        for (int c = 0; c < 3; ++c)
          rgb[i++] = static_cast<uint8_t>((37 * b + 11 * y + 5 * x + 67 * c) % 256);
      }
    }
  }
  return rgb;
}

ModelSpec spec_of(const std::string& model, const std::string& precision = "fp32",
                  uint64_t seed = 0) {
  ModelSpec spec;
  spec.model = model;
  spec.precision = precision;
  spec.seed = seed;
  spec.torch_threads = kThreads;
  return spec;
}

std::string load_error(const ModelSpec& spec) {
  try {
    Model::load(spec);
  } catch (const InvalidInput& e) {
    return e.what();
  }
  return "";
}

bool all_finite(const std::vector<float>& v) {
  for (float x : v) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

double cosine(const float* a, const float* b, int d) {
  double ab = 0, aa = 0, bb = 0;
  for (int i = 0; i < d; ++i) {
    ab += double(a[i]) * b[i];
    aa += double(a[i]) * a[i];
    bb += double(b[i]) * b[i];
  }
  return ab / std::sqrt(aa * bb);
}

class ModelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera_model_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  fs::path dir_;
};

TEST(BuiltinModelsTest, NamesAreListed) {
  EXPECT_THAT(builtin_model_names(),
              ::testing::UnorderedElementsAre("vit-tiny", "vit-s16", "vit-b16", "vit-l16",
                                              "vit-h14", "vit-g14", "vit-g16", "resnet50-trunc"));
}

TEST(BuiltinModelsTest, VitTinyEmbedsWithItsPreset) {
  const Model model = Model::load(spec_of("vit-tiny"));
  EXPECT_EQ(model.output_dim(), 64);
  EXPECT_EQ(model.input_size(), 224);
  EXPECT_EQ(model.preset().name, "vit-tiny");
  EXPECT_EQ(model.preset().prefix_tokens, 2);  // class + 1 register
  const auto rgb = test_images(3, 224);
  const std::vector<float> out = model.embed(rgb.data(), 3, 224);
  ASSERT_EQ(out.size(), 3u * 64);
  EXPECT_TRUE(all_finite(out));
  // Different images give different embeddings.
  EXPECT_NE(std::memcmp(out.data(), out.data() + 64, 64 * sizeof(float)), 0);
  const auto& fp = model.fingerprint();
  EXPECT_EQ(fp["kind"], "builtin");
  EXPECT_EQ(fp["model"], "vit-tiny");
  EXPECT_EQ(fp["seed"], 0);
  EXPECT_EQ(fp["output_dim"], 64);
  EXPECT_EQ(fp["precision"], "fp32");
  EXPECT_EQ(fp["device"], "cpu");
  EXPECT_EQ(fp["preset"]["input_size"], 224);
}

TEST(BuiltinModelsTest, SameSeedSameBytesOtherSeedDiffers) {
  const auto rgb = test_images(2, 224);
  const auto a = Model::load(spec_of("vit-tiny", "fp32", 7)).embed(rgb.data(), 2, 224);
  const auto b = Model::load(spec_of("vit-tiny", "fp32", 7)).embed(rgb.data(), 2, 224);
  const auto c = Model::load(spec_of("vit-tiny", "fp32", 8)).embed(rgb.data(), 2, 224);
  ASSERT_EQ(a.size(), b.size());
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0);
  EXPECT_NE(std::memcmp(a.data(), c.data(), a.size() * sizeof(float)), 0);
}

TEST(BuiltinModelsTest, BatchCompositionDoesNotChangeResults) {
  const Model model = Model::load(spec_of("vit-tiny"));
  const auto rgb = test_images(4, 224);
  const auto batch = model.embed(rgb.data(), 4, 224);
  const size_t image_bytes = 224 * 224 * 3;
  for (int i = 0; i < 4; ++i) {
    const auto single = model.embed(rgb.data() + i * image_bytes, 1, 224);
    for (int d = 0; d < 64; ++d) ASSERT_NEAR(single[d], batch[i * 64 + d], 1e-5) << i << " " << d;
  }
}

TEST(BuiltinModelsTest, DeterministicModeIsBatchInvariant) {
  ModelSpec spec = spec_of("vit-tiny");
  spec.deterministic = true;
  const Model model = Model::load(spec);
  EXPECT_EQ(model.fingerprint()["deterministic"], true);
  const auto rgb = test_images(4, 224);
  const auto batch = model.embed(rgb.data(), 4, 224);
  const size_t image_bytes = 224 * 224 * 3;
  for (int i = 0; i < 4; ++i) {
    const auto single = model.embed(rgb.data() + i * image_bytes, 1, 224);
    EXPECT_EQ(std::memcmp(single.data(), batch.data() + i * 64, 64 * sizeof(float)), 0) << i;
  }
}

TEST(BuiltinModelsTest, PrepareMayRunWhileForwardRuns) {
  const Model model = Model::load(spec_of("vit-tiny"));
  const auto first = test_images(4, 224, 0), second = test_images(4, 224, 4);
  const auto expected_second = model.embed(second.data(), 4, 224);
  const PreparedBatch prepared_first = model.prepare(first.data(), 4, 224);
  std::vector<float> out_first(4 * 64), out_second(4 * 64);
  PreparedBatch prepared_second;
  std::thread preparer([&] { prepared_second = model.prepare(second.data(), 4, 224); });
  model.forward(prepared_first, out_first.data());
  preparer.join();
  EXPECT_EQ(prepared_second.size(), 4);
  model.forward(prepared_second, out_second.data());
  EXPECT_EQ(
      std::memcmp(out_second.data(), expected_second.data(), out_second.size() * sizeof(float)), 0);
  EXPECT_EQ(model.embed(first.data(), 4, 224), out_first);
}

TEST(BuiltinModelsTest, EmptyAndMovedFromBatches) {
  const Model model = Model::load(spec_of("vit-tiny"));
  const PreparedBatch empty = model.prepare(nullptr, 0, 224);
  EXPECT_EQ(empty.size(), 0);
  float sentinel = 42.0f;
  model.forward(empty, &sentinel);
  EXPECT_EQ(sentinel, 42.0f);
  EXPECT_THROW(model.prepare(nullptr, -1, 224), InvalidInput);
  const auto rgb = test_images(1, 224);
  PreparedBatch batch = model.prepare(rgb.data(), 1, 224);
  const PreparedBatch taken = std::move(batch);
  std::vector<float> out(64);
  EXPECT_THROW(model.forward(batch, out.data()), InvalidInput);  // NOLINT(bugprone-use-after-move)
  model.forward(taken, out.data());
}

TEST(BuiltinModelsTest, LargerArchitecturesHaveTheirShapes) {
  for (const auto& [name, dim] :
       {std::pair<std::string, int>{"vit-s16", 384}, {"resnet50-trunc", 1024}}) {
    const Model model = Model::load(spec_of(name));
    EXPECT_EQ(model.output_dim(), dim) << name;
    const auto rgb = test_images(1, 224);
    const auto out = model.embed(rgb.data(), 1, 224);
    ASSERT_EQ(out.size(), static_cast<size_t>(dim)) << name;
    EXPECT_TRUE(all_finite(out)) << name;
    double norm = 0;
    for (float v : out) norm += double(v) * v;
    EXPECT_GT(norm, 0.0) << name;
  }
}

TEST(BuiltinModelsTest, Bf16IsCloseToFp32InBothModes) {
  const auto rgb = test_images(3, 224);
  const Model fp32_model = Model::load(spec_of("vit-tiny", "fp32"));
  EXPECT_FALSE(fp32_model.fingerprint().contains("precision_mode"));
  const auto fp32 = fp32_model.embed(rgb.data(), 3, 224);
  std::map<std::string, std::vector<float>> outs;
  for (const std::string mode : {"autocast", "cast"}) {
    ModelSpec spec = spec_of("vit-tiny", "bf16");
    spec.precision_mode = mode;
    const Model bf16_model = Model::load(spec);
    EXPECT_EQ(bf16_model.fingerprint()["precision"], "bf16");
    EXPECT_EQ(bf16_model.fingerprint()["precision_mode"], mode);
    const auto bf16 = bf16_model.embed(rgb.data(), 3, 224);
    ASSERT_EQ(bf16.size(), fp32.size());
    EXPECT_NE(bf16, fp32) << mode;  // really computed in bf16
    for (int i = 0; i < 3; ++i)
      EXPECT_GT(cosine(fp32.data() + i * 64, bf16.data() + i * 64, 64), 0.99) << mode << i;
    outs[mode] = bf16;
  }
  EXPECT_NE(outs["autocast"], outs["cast"]);  // the residual stream stays fp32 under autocast
  ModelSpec bad = spec_of("vit-tiny", "bf16");
  bad.precision_mode = "half";
  EXPECT_THAT(load_error(bad), HasSubstr("half"));
}

TEST(BuiltinModelsTest, Fp16OnCpuIsAClearErrorInBothModes) {
  EXPECT_THAT(load_error(spec_of("vit-tiny", "fp16")), AllOf(HasSubstr("fp16"), HasSubstr("bf16")));
  ModelSpec spec = spec_of("vit-tiny", "fp16");
  EXPECT_THROW(Model::describe(spec), InvalidInput);
  spec.precision_mode = "cast";
  EXPECT_THAT(load_error(spec), AllOf(HasSubstr("fp16"), HasSubstr("bf16")));
}

TEST(BuiltinModelsTest, PresetNamesAndTridentAliasesResolve) {
  ModelSpec spec = spec_of("vit-l16");
  spec.preset_path = "uni_v1";
  EXPECT_EQ(Model::preset_of(spec).name, "uni");
  EXPECT_EQ(Model::describe(spec)["preset"]["name"], "uni");
  EXPECT_EQ(Model::describe(spec)["preset"]["patch_size"], 224);
  spec.model = "vit-g16";
  spec.preset_path = "gigapath";
  EXPECT_EQ(Model::preset_of(spec).output_dim, 1536);
  spec.preset_path = "nonesuch";
  EXPECT_THROW(Model::describe(spec), InvalidInput);
}

TEST(BuiltinModelsTest, BadSpecsAreInvalidInput) {
  EXPECT_THAT(load_error(spec_of("vit-huge")), AllOf(HasSubstr("vit-huge"), HasSubstr("vit-tiny")));
  EXPECT_THAT(load_error(spec_of("vit-tiny", "fp64")), HasSubstr("fp64"));
  ModelSpec spec = spec_of("vit-tiny");
  spec.device = "tpu";
  EXPECT_THAT(load_error(spec), HasSubstr("tpu"));
  if (!cuda_available()) {
    spec.device = "cuda";
    EXPECT_THAT(load_error(spec), HasSubstr("cuda"));
    spec.device = "auto";
    EXPECT_EQ(Model::load(spec).fingerprint()["device"], "cpu");
  }
}

TEST_F(ModelTest, PresetOverridesBuiltinPooling) {
  // vit-tiny's class token || mean of its patch tokens (after class + 1 register).
  const std::string preset =
      write("concat.ini",
            "name = tiny-concat\ninput_size = 224\nmean = 0.485 0.456 0.406\n"
            "std = 0.229 0.224 0.225\noutput_dim = 128\npooling = cls_mean_concat\n"
            "prefix_tokens = 2\n");
  ModelSpec spec = spec_of("vit-tiny");
  spec.preset_path = preset;
  const Model concat = Model::load(spec);
  EXPECT_EQ(concat.output_dim(), 128);
  EXPECT_EQ(concat.fingerprint()["preset"]["name"], "tiny-concat");
  const auto rgb = test_images(2, 224);
  const auto cls = Model::load(spec_of("vit-tiny")).embed(rgb.data(), 2, 224);
  const auto both = concat.embed(rgb.data(), 2, 224);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(std::memcmp(both.data() + i * 128, cls.data() + i * 64, 64 * sizeof(float)), 0) << i;
    EXPECT_NE(std::memcmp(both.data() + i * 128 + 64, cls.data() + i * 64, 64 * sizeof(float)), 0)
        << i;
  }
}

TEST_F(ModelTest, PresetWithWrongDimensionIsRejected) {
  ModelSpec spec = spec_of("vit-tiny");
  spec.preset_path = write("wrong.ini",
                           "name = wrong\ninput_size = 224\nmean = 0 0 0\nstd = 1 1 1\n"
                           "output_dim = 65\npooling = cls\n");
  EXPECT_THAT(load_error(spec),
              AllOf(HasSubstr("wrong.ini"), HasSubstr("output_dim = 65"), HasSubstr("64")));
  spec.preset_path = write("size.ini",
                           "name = size\ninput_size = 256\nmean = 0 0 0\nstd = 1 1 1\n"
                           "output_dim = 64\npooling = cls\n");
  EXPECT_THAT(load_error(spec), AllOf(HasSubstr("size.ini"), HasSubstr("input_size")));
}

TEST_F(ModelTest, MissingAndCorruptFilesNameTheFile) {
  const std::string absent = (dir_ / "absent.pt").string();
  EXPECT_THAT(load_error(spec_of(absent)), AllOf(HasSubstr(absent), HasSubstr("no such file")));
  const std::string corrupt = write("corrupt.pt", std::string(4096, '\x5a'));
  write("corrupt.ini",
        "name = c\ninput_size = 32\nmean = 0 0 0\nstd = 1 1 1\noutput_dim = 8\npooling = cls\n");
  EXPECT_THAT(load_error(spec_of(corrupt)), AllOf(HasSubstr(corrupt), HasSubstr("TorchScript")));
  const std::string lonely = write("lonely.pt", "x");
  EXPECT_THAT(load_error(spec_of(lonely)), AllOf(HasSubstr("lonely.ini"), HasSubstr("preset")));
}

const std::string kModels = TESSERA_EMBED_TEST_MODELS;

nlohmann::json expected_embeddings() {
  std::ifstream in(kModels + "/expected.json");
  return nlohmann::json::parse(in);
}

void expect_matches(const std::vector<float>& actual, const nlohmann::json& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    const float e = expected[i].get<float>();
    ASSERT_NEAR(actual[i], e, 1e-4f * (1.0f + std::fabs(e))) << i;
  }
}

TEST_F(ModelTest, TorchScriptTokensArePooledAsPyTorchDoes) {
  const Model model = Model::load(spec_of(kModels + "/tokens.pt"));
  EXPECT_EQ(model.output_dim(), 32);
  EXPECT_EQ(model.input_size(), 32);
  EXPECT_EQ(model.preset().pooling, Pooling::kClsMeanConcat);
  const auto expected = expected_embeddings()["tokens"];
  for (int side : {32, 48}) {
    const auto rgb = test_images(3, side);
    expect_matches(model.embed(rgb.data(), 3, side), expected[std::to_string(side)]);
  }
  const auto& fp = model.fingerprint();
  EXPECT_EQ(fp["kind"], "torchscript");
  EXPECT_EQ(fp["sha256"], sha256_file(kModels + "/tokens.pt"));
  EXPECT_EQ(fp["preset"]["name"], "test-tokens");
}

TEST_F(ModelTest, TorchScriptTupleOutputWithJsonPreset) {
  const Model model = Model::load(spec_of(kModels + "/pooled.pt"));
  EXPECT_EQ(model.preset().source_path, kModels + "/pooled.json");
  EXPECT_EQ(model.preset().version, "2");
  const auto rgb = test_images(3, 32);
  expect_matches(model.embed(rgb.data(), 3, 32), expected_embeddings()["pooled"]["32"]);
}

TEST_F(ModelTest, TorchScriptBf16RunsAndStaysClose) {
  const auto fp32 =
      Model::load(spec_of(kModels + "/tokens.pt")).embed(test_images(3, 32).data(), 3, 32);
  for (const std::string mode : {"autocast", "cast"}) {
    ModelSpec spec = spec_of(kModels + "/tokens.pt", "bf16");
    spec.precision_mode = mode;
    const Model model = Model::load(spec);
    const auto rgb = test_images(3, 32);
    const auto out = model.embed(rgb.data(), 3, 32);
    EXPECT_NE(out, fp32) << mode;  // autocast reaches the TorchScript interpreter's ops too
    const auto expected = expected_embeddings()["tokens"]["32"].get<std::vector<float>>();
    for (int i = 0; i < 3; ++i)
      EXPECT_GT(cosine(out.data() + i * 32, expected.data() + i * 32, 32), 0.99) << mode;
  }
}

// identity.pt returns its input, so embed() exposes what prepare() produced.
TEST_F(ModelTest, PrepareMatchesTheReference) {
  const Model model = Model::load(spec_of(kModels + "/identity.pt"));
  const Preset& p = model.preset();
  for (int side : {32, 64, 20, 47}) {
    const auto rgb = test_images(2, side);
    const auto out = model.embed(rgb.data(), 2, side);
    std::vector<float> reference(out.size());
    preprocess_reference(rgb.data(), 2, side, 32, p.mean, p.std, reference.data());
    for (size_t i = 0; i < out.size(); ++i)
      ASSERT_NEAR(out[i], reference[i], 1e-5f) << side << " " << i;
  }
}

TEST_F(ModelTest, TorchScriptDimensionMismatchNamesFiles) {
  const std::string model = (dir_ / "tokens.pt").string();
  fs::copy_file(kModels + "/tokens.pt", model);
  write("tokens.ini",
        "name = t\ninput_size = 32\nmean = 0 0 0\nstd = 1 1 1\noutput_dim = 31\n"
        "pooling = cls_mean_concat\n");
  EXPECT_THAT(load_error(spec_of(model)), AllOf(HasSubstr(model), HasSubstr("tokens.ini"),
                                                HasSubstr("output_dim = 31"), HasSubstr("32")));
}

TEST_F(ModelTest, BatchFromAnotherModelIsRejected) {
  const Model tokens = Model::load(spec_of(kModels + "/tokens.pt"));
  const Model tiny = Model::load(spec_of("vit-tiny"));
  const auto rgb = test_images(1, 32);
  std::vector<float> out(64);
  EXPECT_THROW(tiny.forward(tokens.prepare(rgb.data(), 1, 32), out.data()), InvalidInput);
}

}  // namespace
}  // namespace tessera::embed
