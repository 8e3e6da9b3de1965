#include "common/core/options.h"
#include "stages/patchgen/config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/core/error.h"

namespace tessera::patchgen {
namespace {

Config parse(std::vector<std::string> args) {
  po::options_description desc;
  add_options(desc);
  add_common_options(desc);
  args.insert(args.begin(), {"--manifest", "m.csv", "--out", "run"});
  return config_from(parse_options(desc, args).values);
}

TEST(PatchgenConfig, Defaults) {
  Config c = parse({});
  EXPECT_EQ(c.patch_size, 224);
  EXPECT_EQ(c.stride, 224);
  EXPECT_DOUBLE_EQ(c.mpp, 0.5);
  EXPECT_DOUBLE_EQ(c.min_tissue, 0.25);
  EXPECT_EQ(c.layout.encoding, "raw");
  EXPECT_EQ(c.tissue.threshold, -1);
  EXPECT_EQ(c.partition.to_string(), "contiguous");
}

TEST(PatchgenConfig, BadValuesNameTheOption) {
  for (auto [args, option] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--patch-size", "3"}, "patch-size"},
           {{"--mpp", "-1"}, "mpp"},
           {{"--median-blur", "4"}, "median-blur"},
           {{"--encoding", "png"}, "encoding"},
           {{"--compression", "lz4"}, "compression"},
           {{"--encoding", "jpeg", "--compression", "deflate"}, "compression"},
           {{"--min-tissue", "1.5"}, "min-tissue"},
           {{"--partition", "block-cyclic:0"}, "partition"},
           {{"--progress-interval", "-1"}, "progress-interval"},
           {{"--progress-interval", "nan"}, "progress-interval"}}) {
    try {
      parse(args);
      FAIL() << option;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << e.what();
    }
  }
}

TEST(PatchgenConfig, FingerprintIgnoresRunControlOnly) {
  Config a = parse({});
  Config b = parse({"--fail-fast", "--overwrite", "--progress-interval", "1"});
  Config c = parse({"--min-tissue", "0.5"});
  EXPECT_EQ(a.fingerprint_ini, b.fingerprint_ini);
  EXPECT_NE(a.fingerprint_ini, c.fingerprint_ini);
  EXPECT_EQ(a.fingerprint_ini.find("run"), std::string::npos);
  EXPECT_NE(a.config_ini.find("out = run"), std::string::npos);
}

TEST(PatchgenConfig, EquivalentSpellingsFingerprintAlike) {
  for (auto [x, y] : std::vector<std::pair<std::vector<std::string>, std::vector<std::string>>>{
           {{"--stride", "0"}, {"--stride", "224"}},
           {{"--patch-size", "256", "--stride", "0"}, {"--patch-size", "256", "--stride", "256"}},
           {{"--compression", "deflate"}, {"--compression", "deflate:4"}},
           {{"--partition", "block-cyclic:1"}, {"--partition", "cyclic"}},
           {{"--mpp", "0.50"}, {"--mpp", "5e-1"}},
           {{"--part", "0", "--parts", "1"}, {}},
           {{"--fill-holes", "1"}, {"--fill-holes", "true"}}}) {
    const Config a = parse(x);
    const Config b = parse(y);
    EXPECT_EQ(a.fingerprint_ini, b.fingerprint_ini) << x[0];
    EXPECT_EQ(a.config_ini, b.config_ini) << x[0];
  }
  EXPECT_NE(parse({"--stride", "0"}).fingerprint_ini.find("stride = 224\n"), std::string::npos);
  EXPECT_NE(parse({"--compression", "deflate"}).fingerprint_ini.find("compression = deflate:4\n"),
            std::string::npos);
  EXPECT_NE(parse({"--compression", "deflate"}).fingerprint_ini,
            parse({"--compression", "deflate:5"}).fingerprint_ini);
  EXPECT_NE(parse({"--partition", "block-cyclic:2"}).fingerprint_ini,
            parse({"--partition", "cyclic"}).fingerprint_ini);
}

TEST(PatchgenConfig, RunControlAndDebugOptionsAreNotFingerprinted) {
  const Config a = parse({});
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--progress-interval", "1"},
           {"--fail-fast"},
           {"--overwrite"},
           {"--verify", "full"},
           {"--file-locking", "false"},
           {"--debug-kill-rank", "1", "--debug-kill-after", "10"},
           {"--debug-file-size-limit", "4096"}}) {
    const Config b = parse(args);
    EXPECT_EQ(a.fingerprint_ini, b.fingerprint_ini) << args[0];
  }
  EXPECT_NE(parse({"--progress-interval", "1"}).config_ini, a.config_ini);
  EXPECT_EQ(parse({"--debug-kill-rank", "1"}).config_ini, a.config_ini);
  EXPECT_EQ(a.config_ini.find("debug"), std::string::npos) << a.config_ini;
  // config.ini never carries --overwrite: feeding it back must not wipe the run.
  EXPECT_EQ(parse({"--overwrite"}).config_ini, a.config_ini);
  EXPECT_NE(parse({"--parts", "2"}).fingerprint_ini, a.fingerprint_ini);
}

TEST(PatchgenConfig, IniHoldsEveryOptionByKind) {
  const OptionTable table = option_table();
  const Config c = parse({});
  for (const std::string& name : table.names()) {
    const bool saved = c.config_ini.find("\n" + name + " = ") != std::string::npos ||
                       c.config_ini.rfind(name + " = ", 0) == 0;
    const bool fingerprinted = c.fingerprint_ini.find("\n" + name + " = ") != std::string::npos ||
                               c.fingerprint_ini.rfind(name + " = ", 0) == 0;
    EXPECT_EQ(saved, table.kind(name) != OptionKind::kDebug) << name;
    EXPECT_EQ(fingerprinted, table.kind(name) == OptionKind::kResult) << name;
  }
  EXPECT_EQ(table.kind("manifest"), OptionKind::kRunControl);
  EXPECT_EQ(table.kind("part"), OptionKind::kResult);
}

TEST(PatchgenConfig, ConfigIniRoundTrips) {
  const Config a = parse({"--stride", "0", "--patch-size", "256", "--mpp", "0.123456789",
                          "--compression", "deflate", "--partition", "block-cyclic:8",
                          "--fail-fast", "--fill-holes", "false", "--progress-interval", "0.5",
                          "--verify", "full", "--parts", "3", "--part", "2"});
  const auto path = std::filesystem::temp_directory_path() /
                    ("tessera_patchgen_config_" + std::to_string(::getpid()) + ".ini");
  std::ofstream(path) << a.config_ini;
  po::options_description desc;
  add_options(desc);
  add_common_options(desc);
  const Config b = config_from(parse_options(desc, {"--config", path.string()}).values);
  std::filesystem::remove(path);
  EXPECT_EQ(b.config_ini, a.config_ini);
  EXPECT_EQ(b.fingerprint_ini, a.fingerprint_ini);
  EXPECT_EQ(b.stride, 256);
  EXPECT_DOUBLE_EQ(b.mpp, 0.123456789);
  EXPECT_EQ(b.layout.deflate_level, 4);
  EXPECT_EQ(b.partition.to_string(), "block-cyclic:8");
  EXPECT_TRUE(b.fail_fast);
  EXPECT_FALSE(b.tissue.fill_holes);
  EXPECT_EQ(b.stage.part, 2);
  EXPECT_EQ(b.stage.parts, 3);
  EXPECT_EQ(b.manifest, "m.csv");
}

TEST(PatchgenConfig, MagIsNormalisedIntoMpp) {
  const Config mpp = parse({"--mpp", "0.5"});
  const Config mag = parse({"--mag", "20"});
  EXPECT_DOUBLE_EQ(mag.mpp, 0.5);
  EXPECT_DOUBLE_EQ(mag.layout.mpp, 0.5);
  EXPECT_EQ(mag.config_ini, mpp.config_ini);
  EXPECT_EQ(mag.fingerprint_ini, mpp.fingerprint_ini);
  EXPECT_NE(mag.config_ini.find("mag = 0\n"), std::string::npos) << mag.config_ini;
  const Config forty = parse({"--mag", "40"});
  EXPECT_DOUBLE_EQ(forty.mpp, 0.25);
  EXPECT_NE(forty.fingerprint_ini, mpp.fingerprint_ini);
  EXPECT_EQ(parse({"--mag", "40", "--mpp", "0.25"}).fingerprint_ini, forty.fingerprint_ini);
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"--mag", "20", "--mpp", "0.25"}, {"--mag", "-1"}, {"--mag", "nan"}}) {
    try {
      parse(args);
      FAIL() << args[1];
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("--mag"), std::string::npos) << e.what();
    }
  }
}

TEST(PatchgenConfig, SlidesDirectoryInsteadOfManifest) {
  po::options_description desc;
  add_options(desc);
  add_common_options(desc);
  const auto from = [&](const std::vector<std::string>& args) {
    return config_from(parse_options(desc, args).values);
  };
  const Config c = from({"--slides", "/data/wsi", "--ext", ".SVS, .ndpi", "--out", "run"});
  EXPECT_EQ(c.slides, "/data/wsi");
  EXPECT_EQ(c.manifest, "");
  EXPECT_EQ(slide_extensions(c.ext), (std::vector<std::string>{".svs", ".ndpi"}));
  EXPECT_EQ(from({"--slides", "/data/wsi", "--out", "run"}).ext, ".svs");
  // Run control: the listed files' manifest is fingerprinted, not the directory's name.
  EXPECT_EQ(c.fingerprint_ini, from({"--slides", "/other", "--out", "run"}).fingerprint_ini);
  EXPECT_THROW(from({"--out", "run"}), InvalidInput);
  EXPECT_THROW(from({"--slides", "d", "--manifest", "m.csv", "--out", "run"}), InvalidInput);
  EXPECT_THROW(from({"--slides", "d", "--ext", " , ", "--out", "run"}), InvalidInput);
}

TEST(PatchgenConfig, DebugOptionsOnlyInHelpAll) {
  const OptionTable table = option_table();
  std::ostringstream help, all;
  help << table.help_description(false);
  all << table.help_description(true);
  EXPECT_EQ(help.str().find("debug-"), std::string::npos) << help.str();
  EXPECT_EQ(help.str().find("Fault injection"), std::string::npos) << help.str();
  EXPECT_NE(help.str().find("--stride"), std::string::npos);
  EXPECT_NE(help.str().find("--file-locking"), std::string::npos);
  for (const char* name : {"--debug-kill-rank", "--debug-kill-after", "--debug-file-size-limit"}) {
    EXPECT_NE(all.str().find(name), std::string::npos) << name;
  }
}

}  // namespace
}  // namespace tessera::patchgen
