#include "stages/serve/config.h"

#include <gtest/gtest.h>

#include "common/core/error.h"
#include "common/core/options.h"

namespace tessera::serve {
namespace {

Config parse(std::vector<std::string> args) {
  po::options_description desc = option_table().description();
  add_common_options(desc);
  return config_from(parse_options(desc, args).values);
}

TEST(ServeConfig, DefaultsBindLoopbackOnTheDocumentedPort) {
  const Config c = parse({"--index", "RUN/ingest/x"});
  EXPECT_EQ(c.bind, "127.0.0.1");
  EXPECT_EQ(c.port, 8470);
  EXPECT_TRUE(c.token_file.empty());
  EXPECT_EQ(c.limits.max_k, 1000);
  EXPECT_EQ(c.slide_index, "auto");
  EXPECT_EQ(parse({"--index", "x", "--slide-index", "none"}).slide_index, "none");
  EXPECT_THROW(parse({"--index", "x", "--slide-index", ""}), InvalidInput);
}

TEST(ServeConfig, ANonLoopbackBindNeedsATokenFile) {
  EXPECT_THROW(parse({"--index", "x", "--bind", "0.0.0.0"}), InvalidInput);
  EXPECT_THROW(parse({"--index", "x", "--bind", "10.1.2.3"}), InvalidInput);
  EXPECT_NO_THROW(parse({"--index", "x", "--bind", "0.0.0.0", "--token-file", "t"}));
  EXPECT_NO_THROW(parse({"--index", "x", "--bind", "127.0.0.2"}));
}

TEST(ServeConfig, OutOfRangeValuesAreRefused) {
  EXPECT_THROW(parse({"--index", "x", "--port", "70000"}), InvalidInput);
  EXPECT_THROW(parse({"--index", "x", "--max-k", "0"}), InvalidInput);
  EXPECT_THROW(parse({"--index", "x", "--http-threads", "0"}), InvalidInput);
  EXPECT_THROW(parse({"--index", "x", "--tick-ms", "-1"}), InvalidInput);
  EXPECT_THROW(parse({"--index", "x", "--header-timeout", "0"}), InvalidInput);
  EXPECT_THROW(parse({"--index", "x", "--max-connections", "0"}), InvalidInput);
  EXPECT_EQ(parse({"--index", "x", "--header-timeout", "2.5"}).limits.header_timeout_s, 2.5);
}

TEST(ServeConfig, LoopbackAddresses) {
  EXPECT_TRUE(is_loopback("127.0.0.1"));
  EXPECT_TRUE(is_loopback("127.9.9.9"));
  EXPECT_TRUE(is_loopback("::1"));
  EXPECT_TRUE(is_loopback("localhost"));
  EXPECT_FALSE(is_loopback("0.0.0.0"));
  EXPECT_FALSE(is_loopback("128.0.0.1"));
  EXPECT_FALSE(is_loopback("::"));
  EXPECT_FALSE(is_loopback("example.org"));
}

}  // namespace
}  // namespace tessera::serve
