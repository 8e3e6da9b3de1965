#include "common/core/options.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "common/core/error.h"

namespace tessera {
namespace {

po::options_description test_options() {
  po::options_description desc("test");
  desc.add_options()
      ("size", po::value<int>()->default_value(224), "patch size")
      ("mpp", po::value<double>()->default_value(0.5), "target mpp")
      ("name", po::value<std::string>()->required(), "a name")
      ("fail-fast", po::bool_switch(), "stop early");
  add_common_options(desc);
  return desc;
}

std::string write_temp(const std::string& name, const std::string& text) {
  auto path = std::filesystem::temp_directory_path() / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(Options, DefaultsAndCommandLine) {
  auto parsed = parse_options(test_options(), {"--name", "x", "--size", "256"});
  EXPECT_EQ(parsed.values["size"].as<int>(), 256);
  EXPECT_DOUBLE_EQ(parsed.values["mpp"].as<double>(), 0.5);
  EXPECT_FALSE(parsed.values["fail-fast"].as<bool>());
}

TEST(Options, CommandLineWinsOverConfigFile) {
  auto ini = write_temp("tessera_options_test.ini", "# comment\nsize = 512\nmpp = 0.25\nname = y\n");
  auto parsed = parse_options(test_options(), {"--config", ini, "--size", "128"});
  EXPECT_EQ(parsed.values["size"].as<int>(), 128);
  EXPECT_DOUBLE_EQ(parsed.values["mpp"].as<double>(), 0.25);
  EXPECT_EQ(parsed.values["name"].as<std::string>(), "y");
}

TEST(Options, UnknownKeyInConfigNamesFileAndKey) {
  auto ini = write_temp("tessera_options_bad.ini", "name = y\npatch-sise = 3\n");
  try {
    parse_options(test_options(), {"--config", ini});
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find(ini), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("patch-sise"), std::string::npos) << e.what();
    EXPECT_EQ(e.exit_code(), kExitBadInput);
  }
}

TEST(Options, BadValuesUnknownOptionsAndMissingRequired) {
  EXPECT_THROW(parse_options(test_options(), {"--name", "x", "--size", "big"}), InvalidInput);
  EXPECT_THROW(parse_options(test_options(), {"--name", "x", "--bogus"}), InvalidInput);
  EXPECT_THROW(parse_options(test_options(), {"--size", "3"}), InvalidInput);
  EXPECT_THROW(parse_options(test_options(), {"--config", "/nonexistent/x.ini"}), InvalidInput);
}

TEST(Options, HelpSkipsRequiredAndListsDefaults) {
  auto desc = test_options();
  EXPECT_TRUE(parse_options(desc, {"--help"}).help);
  auto text = help_text("prog [options]", desc);
  EXPECT_NE(text.find("--size"), std::string::npos);
  EXPECT_NE(text.find("224"), std::string::npos);
}

TEST(Options, EffectiveConfigRoundTrips) {
  auto desc = test_options();
  auto first = parse_options(desc, {"--name", "x", "--mpp", "0.123456789", "--fail-fast"});
  std::string ini = effective_config(first.values);
  EXPECT_NE(ini.find("mpp = 0.123456789\n"), std::string::npos) << ini;
  EXPECT_EQ(ini.find("log-level"), std::string::npos) << "common options are not configuration";
  auto path = write_temp("tessera_options_roundtrip.ini", ini);
  auto second = parse_options(desc, {"--config", path});
  EXPECT_EQ(effective_config(second.values), ini);
  EXPECT_EQ(effective_config(first.values, {"mpp"}).find("mpp"), std::string::npos);
}

}  // namespace
}  // namespace tessera
