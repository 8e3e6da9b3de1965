#include "stages/embed/config.h"

#include <gtest/gtest.h>

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

TEST(EmbedConfig, BadValuesNameTheOption) {
  for (auto [args, option] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--precision", "fp8"}, "precision"},
           {{"--device", "tpu"}, "device"},
           {{"--batch-size", "0"}, "batch-size"},
           {{"--source", "s3"}, "source"},
           {{"--store-dtype", "int8"}, "store-dtype"},
           {{"--tag", "../x"}, "tag"}}) {
    args.insert(args.begin(), {"--model", "vit-tiny"});
    try {
      parse(args);
      FAIL() << option;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << e.what();
    }
  }
}

TEST(EmbedConfig, FingerprintIgnoresRunControl) {
  auto a = parse({"--model", "vit-tiny"});
  auto b = parse({"--model", "vit-tiny", "--prefetch", "4", "--overwrite"});
  auto c = parse({"--model", "vit-tiny", "--batch-size", "8"});
  EXPECT_EQ(a.fingerprint_ini, b.fingerprint_ini);
  EXPECT_NE(a.fingerprint_ini, c.fingerprint_ini);
}

}  // namespace
}  // namespace tessera::embed
