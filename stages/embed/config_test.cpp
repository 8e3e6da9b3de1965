#include "common/core/options.h"
#include "stages/embed/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/core/error.h"

namespace tessera::embed {
namespace {

Config parse(std::vector<std::string> args) {
  po::options_description desc;
  add_options(desc);
  add_common_options(desc);
  args.insert(args.begin(), {"--run", "RUN"});
  return config_from(parse_options(desc, args).values);
}

TEST(EmbedConfig, DefaultTagIsModelName) {
  EXPECT_EQ(parse({"--model", "vit-s16"}).tag, "vit-s16");
  EXPECT_EQ(parse({"--model", "/models/uni.pt"}).tag, "uni");
  EXPECT_EQ(parse({"--model", "vit-s16", "--tag", "x1"}).tag, "x1");
}

TEST(EmbedConfig, ThePartitionDefaultsToContiguous) {
  EXPECT_EQ(parse({"--model", "vit-s16"}).partition.to_string(), "contiguous");
}

TEST(EmbedConfig, BadValuesNameTheOption) {
  for (auto [args, option] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--precision", "fp8"}, "precision"},
           {{"--precision-mode", "half"}, "precision-mode"},
           {{"--device", "tpu"}, "device"},
           {{"--batch-size", "0"}, "batch-size"},
           {{"--source", "s3"}, "source"},
           {{"--store-dtype", "int8"}, "store-dtype"},
           {{"--tag", "../x"}, "tag"},
           {{"--progress-interval", "-1"}, "progress-interval"}}) {
    args.insert(args.begin(), {"--model", "vit-tiny"});
    try {
      parse(args);
      FAIL() << option;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << e.what();
    }
  }
}

TEST(EmbedConfig, PrecisionModeIsResultAndForceIsRunControl) {
  const auto a = parse({"--model", "vit-tiny", "--precision", "bf16"});
  EXPECT_EQ(a.precision_mode, "autocast");
  EXPECT_FALSE(a.force_preset_mismatch);
  const auto cast =
      parse({"--model", "vit-tiny", "--precision", "bf16", "--precision-mode", "cast"});
  EXPECT_EQ(cast.precision_mode, "cast");
  EXPECT_EQ(model_spec(cast, 0).precision_mode, "cast");
  EXPECT_NE(a.fingerprint_ini, cast.fingerprint_ini);
  const auto forced =
      parse({"--model", "vit-tiny", "--precision", "bf16", "--force-preset-mismatch"});
  EXPECT_TRUE(forced.force_preset_mismatch);
  EXPECT_EQ(a.fingerprint_ini, forced.fingerprint_ini);
  EXPECT_NE(forced.config_ini.find("force-preset-mismatch = true"), std::string::npos)
      << forced.config_ini;
}

// Our preset names and TRIDENT's encoder names map onto each other.
TEST(EmbedConfig, PresetAliasesInvertTridentNames) {
  for (const auto& [alias, stem] : preset_aliases()) {
    EXPECT_EQ(trident_encoder_alias(stem), alias) << stem;
  }
}

TEST(EmbedConfig, FingerprintIgnoresRunControl) {
  auto a = parse({"--model", "vit-tiny"});
  auto b = parse({"--model", "vit-tiny", "--prefetch", "4", "--overwrite"});
  auto c = parse({"--model", "vit-tiny", "--batch-size", "8"});
  EXPECT_EQ(a.fingerprint_ini, b.fingerprint_ini);
  EXPECT_NE(a.fingerprint_ini, c.fingerprint_ini);
}

TEST(EmbedConfig, EquivalentSpellingsFingerprintAlike) {
  for (auto [x, y] : std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"--partition", "block-cyclic:1"}, {"--partition", "cyclic"}},
           {{"--tag", "vit-tiny"}, {}},
           {{"--part", "0", "--parts", "1"}, {}},
           {{"--peer-layouts", "trident,clam"}, {}}}) {
    x.insert(x.begin(), {"--model", "vit-tiny"});
    y.insert(y.begin(), {"--model", "vit-tiny"});
    EXPECT_EQ(parse(x).fingerprint_ini, parse(y).fingerprint_ini) << x[2];
    EXPECT_EQ(parse(x).config_ini, parse(y).config_ini) << x[2];
  }
}

TEST(EmbedConfig, RunControlAndDebugOptionsAreNotFingerprinted) {
  const auto a = parse({"--model", "vit-tiny"});
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--progress-interval", "1"},
           {"--prefetch", "8"},
           {"--overwrite"},
           {"--verify", "full"},
           {"--file-locking", "false"},
           {"--debug-kill-rank", "0", "--debug-kill-after", "3"}}) {
    auto with_model = args;
    with_model.insert(with_model.begin(), {"--model", "vit-tiny"});
    EXPECT_EQ(parse(with_model).fingerprint_ini, a.fingerprint_ini) << args[0];
  }
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--torch-threads", "2"}, {"--device", "auto"}, {"--batch-size", "8"},
           {"--deterministic"}, {"--seed", "1"}, {"--parts", "2"}}) {
    auto with_model = args;
    with_model.insert(with_model.begin(), {"--model", "vit-tiny"});
    EXPECT_NE(parse(with_model).fingerprint_ini, a.fingerprint_ini) << args[0];
  }
  EXPECT_EQ(a.config_ini.find("debug"), std::string::npos) << a.config_ini;
  EXPECT_NE(a.config_ini.find("run = RUN\n"), std::string::npos) << a.config_ini;
  EXPECT_EQ(a.fingerprint_ini.find("run = "), std::string::npos) << a.fingerprint_ini;
}

TEST(EmbedConfig, ConfigIniRoundTrips) {
  const auto a = parse({"--model", "/models/uni.pt", "--precision", "bf16", "--batch-size", "7",
                        "--seed", "18446744073709551615", "--deterministic", "--prefetch", "3",
                        "--partition", "contiguous", "--store-dtype", "fp16"});
  EXPECT_NE(a.config_ini.find("preset = \n"), std::string::npos) << a.config_ini;
  const auto path = std::filesystem::temp_directory_path() /
                    ("tessera_embed_config_" + std::to_string(::getpid()) + ".ini");
  std::ofstream(path) << a.config_ini;
  po::options_description desc;
  add_options(desc);
  add_common_options(desc);
  const Config b = config_from(parse_options(desc, {"--config", path.string()}).values);
  std::filesystem::remove(path);
  EXPECT_EQ(b.config_ini, a.config_ini);
  EXPECT_EQ(b.fingerprint_ini, a.fingerprint_ini);
  EXPECT_EQ(b.tag, "uni");
  EXPECT_EQ(b.preset, "");
  EXPECT_EQ(b.seed, 18446744073709551615ull);
  EXPECT_TRUE(b.deterministic);
  EXPECT_EQ(b.run, "RUN");
}

TEST(EmbedConfig, DebugOptionsOnlyInHelpAll) {
  const OptionTable table = option_table();
  std::ostringstream help, all;
  help << table.help_description(false);
  all << table.help_description(true);
  EXPECT_EQ(help.str().find("debug-"), std::string::npos) << help.str();
  EXPECT_NE(help.str().find("--batch-size"), std::string::npos);
  EXPECT_NE(all.str().find("--debug-kill-rank"), std::string::npos);
  EXPECT_NE(all.str().find("--debug-kill-after"), std::string::npos);
  EXPECT_EQ(table.kind("prefetch"), OptionKind::kRunControl);
  EXPECT_EQ(table.kind("torch-threads"), OptionKind::kResult);
}

}  // namespace
}  // namespace tessera::embed
