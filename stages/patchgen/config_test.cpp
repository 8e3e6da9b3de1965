#include "stages/patchgen/config.h"

#include <gtest/gtest.h>

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
  EXPECT_EQ(c.partition.to_string(), "cyclic");
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
           {{"--partition", "block-cyclic:0"}, "partition"}}) {
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

}  // namespace
}  // namespace tessera::patchgen
