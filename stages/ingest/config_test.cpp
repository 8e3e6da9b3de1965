#include "stages/ingest/config.h"

#include <gtest/gtest.h>

#include "common/core/error.h"
#include "common/core/options.h"

namespace tessera::ingest {
namespace {

Config parse(std::vector<std::string> args) {
  po::options_description desc = option_table().description();
  add_common_options(desc);
  args.insert(args.begin(), {"--run", "RUN"});
  return config_from(parse_options(desc, args).values);
}

TEST(IngestConfig, Defaults) {
  const Config c = parse({});
  EXPECT_EQ(c.shards, 1);
  EXPECT_EQ(c.index, "Flat");
  EXPECT_EQ(c.metric, "ip");
  EXPECT_EQ(c.assign, Assign::kBySlide);
  EXPECT_TRUE(c.embed_parts.empty());
  EXPECT_FALSE(c.append);
}

TEST(IngestConfig, PartLists) {
  EXPECT_TRUE(parse_part_list("all").empty());
  EXPECT_EQ(parse_part_list("2,0,2"), (std::vector<int>{0, 2}));
  EXPECT_EQ(parse_part_list("1-3,7"), (std::vector<int>{1, 2, 3, 7}));
  for (const char* bad : {"", "x", "1,", "3-1", "-1", "1-", "1.5"}) {
    EXPECT_THROW(parse_part_list(bad), InvalidInput) << bad;
  }
}

TEST(IngestConfig, BadValuesNameTheOption) {
  for (auto [args, option] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--shards", "0"}, "shards"},
           {{"--metric", "cos"}, "metric"},
           {{"--assign", "random"}, "assign"},
           {{"--index", "IVF 16,Flat"}, "index"},
           {{"--train-size", "0"}, "train-size"},
           {{"--chunk-rows", "0"}, "chunk-rows"},
           {{"--verify", "some"}, "verify"},
           {{"--tag", "../x"}, "tag"},
           {{"--append", "--overwrite"}, "append"}}) {
    try {
      parse(args);
      ADD_FAILURE() << option << " accepted";
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(option), std::string::npos) << e.what();
    }
  }
}

TEST(IngestConfig, RunControlOptionsDoNotChangeTheFingerprint) {
  EXPECT_EQ(parse({"--threads", "3", "--chunk-rows", "100"}).fingerprint_ini,
            parse({}).fingerprint_ini);
  EXPECT_EQ(parse({"--append"}).fingerprint_ini, parse({}).fingerprint_ini);
  EXPECT_NE(parse({"--shards", "3"}).fingerprint_ini, parse({}).fingerprint_ini);
  EXPECT_NE(parse({"--normalize"}).fingerprint_ini, parse({}).fingerprint_ini);
}

// Issue 21, case 14: the tag, name and parts are fingerprinted as ingest resolves them, so that
// spelling out the defaults (what tessera-status suggests) is the same configuration.
TEST(IngestConfig, EquivalentSpellingsFingerprintAlike) {
  EXPECT_EQ(parse({"--tag", "vit-tiny", "--name", "vit-tiny", "--embed-parts", "0-1"}).fingerprint_ini,
            parse({}).fingerprint_ini);
  // The configuration saved still says what was asked.
  EXPECT_NE(parse({"--tag", "vit-tiny"}).config_ini.find("tag = vit-tiny\n"), std::string::npos);
}

}  // namespace
}  // namespace tessera::ingest
