#include "stages/embed/preset.h"

#include <filesystem>
#include <fstream>
#include <map>

#include <stdlib.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/core/error.h"

namespace tessera::embed {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;

class PresetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("tessera_preset_test_" +
            std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  // The message of the InvalidInput that loading `text` as `name` throws, or "" if none.
  std::string error_of(const std::string& text, const std::string& name = "p.ini") {
    try {
      load_preset(write(name, text));
    } catch (const InvalidInput& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
};

const char* const kValid =
    "# a comment\n"
    "name = demo   # trailing comment\n"
    "version = 3\n"
    "hf_hub_id = org/demo\n"
    "input_size = 448\n"
    "mean = 0.1, 0.2 0.3\n"
    "std=0.5,0.25,0.125\n"
    "output_dim = 2560\n"
    "pooling = cls_mean_concat\n"
    "prefix_tokens = 5\n";

TEST_F(PresetTest, ParsesEveryField) {
  const std::string path = write("demo.ini", kValid);
  const Preset p = load_preset(path);
  EXPECT_EQ(p.name, "demo");
  EXPECT_EQ(p.version, "3");
  EXPECT_EQ(p.hf_hub_id, "org/demo");
  EXPECT_EQ(p.input_size, 448);
  EXPECT_FLOAT_EQ(p.mean[0], 0.1f);
  EXPECT_FLOAT_EQ(p.mean[1], 0.2f);
  EXPECT_FLOAT_EQ(p.mean[2], 0.3f);
  EXPECT_FLOAT_EQ(p.std[2], 0.125f);
  EXPECT_EQ(p.output_dim, 2560);
  EXPECT_EQ(p.pooling, Pooling::kClsMeanConcat);
  EXPECT_EQ(p.prefix_tokens, 5);
  EXPECT_EQ(p.source_path, path);
  EXPECT_EQ(preset_to_json(p)["pooling"], "cls_mean_concat");
  EXPECT_EQ(preset_to_json(p)["mean"].size(), 3u);
}

TEST_F(PresetTest, OptionalKeysDefault) {
  const Preset p = load_preset(write("min.ini",
                                     "name = m\ninput_size = 224\nmean = 0 0 0\nstd = 1 1 1\n"
                                     "output_dim = 8\npooling = mean_patch\n"));
  EXPECT_EQ(p.version, "1");
  EXPECT_EQ(p.hf_hub_id, "");
  EXPECT_EQ(p.prefix_tokens, 1);
  EXPECT_EQ(p.pooling, Pooling::kMeanPatch);
}

TEST_F(PresetTest, MissingKeyIsNamed) {
  std::string text = kValid;
  text.erase(text.find("output_dim"), std::string("output_dim = 2560\n").size());
  EXPECT_THAT(error_of(text),
              AllOf(HasSubstr("p.ini"), HasSubstr("missing"), HasSubstr("output_dim")));
}

TEST_F(PresetTest, BadNumbersAreNamed) {
  EXPECT_THAT(error_of("name = x\ninput_size = 22x4\nmean = 0 0 0\nstd = 1 1 1\noutput_dim = "
                       "8\npooling = cls\n"),
              AllOf(HasSubstr("p.ini"), HasSubstr("input_size"), HasSubstr("22x4")));
  EXPECT_THAT(error_of("name = x\ninput_size = 224\nmean = 0 0 0\nstd = 1 1 1\noutput_dim = "
                       "-3\npooling = cls\n"),
              HasSubstr("output_dim"));
  EXPECT_THAT(error_of("name = x\ninput_size = 224\nmean = 0 0.4.1 0\nstd = 1 1 1\noutput_dim = "
                       "8\npooling = cls\n"),
              AllOf(HasSubstr("mean"), HasSubstr("0.4.1")));
  EXPECT_THAT(
      error_of(
          "name = x\ninput_size = 224\nmean = 0 0\nstd = 1 1 1\noutput_dim = 8\npooling = cls\n"),
      AllOf(HasSubstr("mean"), HasSubstr("3 numbers")));
  EXPECT_THAT(
      error_of(
          "name = x\ninput_size = 224\nmean = 0 0 0\nstd = 1 0 1\noutput_dim = 8\npooling = cls\n"),
      HasSubstr("std"));
  EXPECT_THAT(
      error_of(
          "name = x\ninput_size = 224\nmean = 0 0 0\nstd = 1 1 1\noutput_dim = 8\npooling = cls\n"
          "prefix_tokens = 0\n"),
      HasSubstr("prefix_tokens"));
}

TEST_F(PresetTest, UnknownPoolingIsNamed) {
  std::string text = kValid;
  text.replace(text.find("cls_mean_concat"), 15, "max");
  EXPECT_THAT(error_of(text), AllOf(HasSubstr("p.ini"), HasSubstr("pooling"), HasSubstr("max")));
}

TEST_F(PresetTest, UnknownAndRepeatedKeysAreRejected) {
  EXPECT_THAT(error_of(std::string(kValid) + "input_sise = 3\n"),
              AllOf(HasSubstr("p.ini"), HasSubstr("input_sise")));
  EXPECT_THAT(error_of(std::string(kValid) + "name = again\n"),
              AllOf(HasSubstr("p.ini"), HasSubstr("name")));
}

TEST_F(PresetTest, UnreadableOrWrongFile) {
  const std::string missing = (dir_ / "absent.ini").string();
  try {
    load_preset(missing);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing));
  }
  // A binary file (say, a model passed where a preset was expected) is not a preset.
  EXPECT_NE(error_of(std::string("PK\x03\x04\x00\x01garbage\n", 14), "model.pt"), "");
}

TEST_F(PresetTest, ParsesJson) {
  const Preset p = load_preset(write("p.json",
                                     R"({"name": "j", "version": 2, "input_size": 32,
                                         "mean": [0.5, 0.4, 0.3], "std": [0.2, 0.25, 0.3],
                                         "output_dim": 32, "pooling": "cls_mean_concat",
                                         "prefix_tokens": 1})"));
  EXPECT_EQ(p.name, "j");
  EXPECT_EQ(p.version, "2");
  EXPECT_EQ(p.input_size, 32);
  EXPECT_FLOAT_EQ(p.std[1], 0.25f);
  EXPECT_EQ(p.pooling, Pooling::kClsMeanConcat);
  EXPECT_THAT(error_of(R"({"name": "j", "colour": 1})", "p.json"), HasSubstr("colour"));
  EXPECT_THAT(error_of("{not json", "p.json"), AllOf(HasSubstr("p.json"), HasSubstr("JSON")));
  EXPECT_THAT(error_of(R"({"name": "j", "input_size": 32, "mean": [1, 2], "std": [1, 1, 1],
                          "output_dim": 3, "pooling": "cls"})",
                       "p.json"),
              HasSubstr("mean"));
}

TEST(PoolingTest, NamesRoundTrip) {
  for (Pooling p : {Pooling::kCls, Pooling::kMeanPatch, Pooling::kClsMeanConcat}) {
    EXPECT_EQ(parse_pooling(pooling_name(p)), p);
  }
  EXPECT_THROW(parse_pooling("CLS"), InvalidInput);
}

// The shipped presets parse and carry the documented dimensions and input sizes.
TEST(ShippedPresetsTest, AllParseWithDocumentedShapes) {
  struct Expected {
    int input_size, output_dim;
    Pooling pooling;
  };
  const std::map<std::string, Expected> expected = {
      {"uni", {224, 1024, Pooling::kCls}},
      {"uni2-h", {224, 1536, Pooling::kCls}},
      {"h-optimus-0", {224, 1536, Pooling::kCls}},
      {"h-optimus-1", {224, 1536, Pooling::kCls}},
      {"virchow2", {224, 2560, Pooling::kClsMeanConcat}},
      {"phikon-v2", {224, 1024, Pooling::kCls}},
      {"prov-gigapath", {224, 1536, Pooling::kCls}},
      {"conch", {448, 512, Pooling::kCls}},
  };
  size_t found = 0;
  for (const auto& entry :
       fs::directory_iterator(fs::path(TESSERA_SOURCE_DIR) / "configs" / "models")) {
    if (entry.path().extension() != ".ini") continue;
    const Preset p = load_preset(entry.path().string());
    const auto it = expected.find(p.name);
    ASSERT_NE(it, expected.end()) << "unexpected preset " << p.name;
    EXPECT_EQ(entry.path().stem().string(), p.name);
    EXPECT_EQ(p.input_size, it->second.input_size) << p.name;
    EXPECT_EQ(p.output_dim, it->second.output_dim) << p.name;
    EXPECT_EQ(p.pooling, it->second.pooling) << p.name;
    EXPECT_FALSE(p.hf_hub_id.empty()) << p.name;
    ++found;
  }
  EXPECT_EQ(found, expected.size());
  const Preset h0 =
      load_preset(std::string(TESSERA_SOURCE_DIR) + "/configs/models/h-optimus-0.ini");
  EXPECT_FLOAT_EQ(h0.mean[0], 0.707223f);
  EXPECT_FLOAT_EQ(h0.std[2], 0.177517f);
  const Preset virchow =
      load_preset(std::string(TESSERA_SOURCE_DIR) + "/configs/models/virchow2.ini");
  EXPECT_EQ(virchow.prefix_tokens, 5);
}

TEST_F(PresetTest, RecommendationsAreOptionalAndChecked) {
  const Preset plain = load_preset(write("plain.ini", kValid));
  EXPECT_EQ(plain.patch_size, 0);
  EXPECT_EQ(plain.mpp, 0);
  EXPECT_EQ(plain.precision, "");
  const nlohmann::json plain_json = preset_to_json(plain);
  EXPECT_FALSE(plain_json.contains("patch_size"));
  EXPECT_FALSE(plain_json.contains("mpp"));
  EXPECT_FALSE(plain_json.contains("precision"));

  const Preset p = load_preset(
      write("rec.ini", std::string(kValid) + "patch_size = 448\nmpp = 0.5\nprecision = bf16\n"));
  EXPECT_EQ(p.patch_size, 448);
  EXPECT_DOUBLE_EQ(p.mpp, 0.5);
  EXPECT_EQ(p.precision, "bf16");
  const nlohmann::json json = preset_to_json(p);
  EXPECT_EQ(json["patch_size"], 448);
  EXPECT_EQ(json["mpp"], 0.5);
  EXPECT_EQ(json["precision"], "bf16");

  EXPECT_THAT(error_of(std::string(kValid) + "patch_size = 0\n"), HasSubstr("patch_size"));
  EXPECT_THAT(error_of(std::string(kValid) + "mpp = -0.5\n"), HasSubstr("mpp"));
  EXPECT_THAT(error_of(std::string(kValid) + "mpp = x\n"), HasSubstr("mpp"));
  EXPECT_THAT(error_of(std::string(kValid) + "precision = fp8\n"),
              AllOf(HasSubstr("precision"), HasSubstr("fp8")));
}

TEST_F(PresetTest, NamesAndTridentAliasesResolveToConfigsModels) {
  const std::string models = std::string(TESSERA_SOURCE_DIR) + "/configs/models/";
  for (const auto& [alias, stem] : preset_aliases()) {
    EXPECT_EQ(fs::path(resolve_preset_path(alias)), fs::path(models + stem + ".ini")) << alias;
    EXPECT_EQ(fs::path(resolve_preset_path(stem)), fs::path(models + stem + ".ini")) << stem;
    EXPECT_EQ(load_preset(resolve_preset_path(alias)).name, stem) << alias;
  }
  EXPECT_EQ(preset_aliases().size(), 8u);
  EXPECT_EQ(resolve_preset_path(""), "");
  const std::string file = write("own.ini", kValid);
  EXPECT_EQ(resolve_preset_path(file), file);
  for (const std::string bad : {"uni_v3", "no/such.ini", "missing.json"}) {
    try {
      resolve_preset_path(bad);
      FAIL() << bad;
    } catch (const InvalidInput& e) {
      EXPECT_THAT(e.what(), HasSubstr(bad));
    }
  }
  // $TESSERA_PRESET_DIR is searched first.
  write("uni.ini", kValid);
  ::setenv("TESSERA_PRESET_DIR", dir_.c_str(), 1);
  EXPECT_EQ(fs::path(resolve_preset_path("uni_v1")), dir_ / "uni.ini");
  ::unsetenv("TESSERA_PRESET_DIR");
}

TEST(PresetCheck, DeparturesWarnAndLargeOnesAreRefused) {
  Preset conch;
  conch.name = "conch";
  conch.input_size = 448;
  conch.patch_size = 448;
  conch.mpp = 0.5;
  conch.precision = "fp32";
  const PresetCheck same = check_against_preset(conch, 448, 0.5, "fp32");
  EXPECT_TRUE(same.warnings.empty());
  EXPECT_TRUE(same.refusal.empty());

  // A 224 px run would be upscaled 2x: refused, naming both sizes and the override.
  const PresetCheck small = check_against_preset(conch, 224, 0.5, "fp32");
  EXPECT_EQ(small.warnings.size(), 1u);
  EXPECT_THAT(small.refusal, AllOf(HasSubstr("224 px"), HasSubstr("448 px"),
                                   HasSubstr("--force-preset-mismatch")));
  // Another magnification: refused.
  EXPECT_THAT(check_against_preset(conch, 448, 0.25, "fp32").refusal, HasSubstr("0.25 um/px"));
  // Within the tolerances: warned only.
  Preset uni = conch;
  uni.input_size = uni.patch_size = 224;
  const PresetCheck tiles256 = check_against_preset(uni, 256, 0.52, "fp32");
  EXPECT_EQ(tiles256.warnings.size(), 2u);
  EXPECT_TRUE(tiles256.refusal.empty());
  // Precision only warns.
  const PresetCheck bf16 = check_against_preset(uni, 224, 0.5, "bf16");
  ASSERT_EQ(bf16.warnings.size(), 1u);
  EXPECT_THAT(bf16.warnings[0], AllOf(HasSubstr("fp32"), HasSubstr("bf16")));
  EXPECT_TRUE(bf16.refusal.empty());
  // Unknown mpp of the patches: warned, not refused.
  EXPECT_TRUE(check_against_preset(uni, 224, 0, "fp32").refusal.empty());
  EXPECT_EQ(check_against_preset(uni, 224, 0, "fp32").warnings.size(), 1u);
  // No recommendations: nothing to say.
  Preset none;
  none.name = "builtin";
  const PresetCheck free = check_against_preset(none, 17, 3.0, "bf16");
  EXPECT_TRUE(free.warnings.empty());
  EXPECT_TRUE(free.refusal.empty());

  EXPECT_THROW(enforce_preset(conch, 224, 0.5, "fp32", /*force=*/false), InvalidInput);
  EXPECT_NO_THROW(enforce_preset(conch, 224, 0.5, "fp32", /*force=*/true));
  EXPECT_NO_THROW(enforce_preset(conch, 448, 0.5, "bf16", /*force=*/false));
}

TEST(PresetFiles, ConfigsModelsCarryRecommendations) {
  for (const auto& entry :
       fs::directory_iterator(std::string(TESSERA_SOURCE_DIR) + "/configs/models")) {
    const Preset p = load_preset(entry.path().string());
    EXPECT_GT(p.patch_size, 0) << p.name;
    EXPECT_DOUBLE_EQ(p.mpp, 0.5) << p.name;
    EXPECT_FALSE(p.precision.empty()) << p.name;
  }
  const Preset conch = load_preset(resolve_preset_path("conch_v1"));
  EXPECT_EQ(conch.patch_size, 448);
  EXPECT_EQ(conch.patch_size, conch.input_size);
}

}  // namespace
}  // namespace tessera::embed
