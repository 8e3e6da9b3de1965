#include "common/core/options.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/core/error.h"
#include "common/core/version.h"

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
  EXPECT_TRUE(parse_options(desc, {"--help-all"}).help_all);
  EXPECT_TRUE(parse_options(desc, {"--version", "--config", "/nonexistent/x.ini"}).version);
  auto text = help_text("prog [options]", desc);
  EXPECT_NE(text.find("--size"), std::string::npos);
  EXPECT_NE(text.find("224"), std::string::npos);
}

TEST(Options, VersionTextNamesProgramVersionAndRevision) {
  EXPECT_EQ(version_text("patchgen"),
            fmt::format("patchgen {} (git {})\n", version(), git_revision()));
}

OptionTable test_table() {
  OptionTable table;
  table.group("io")
      ("out", OptionKind::kRunControl, po::value<std::string>()->required(), "output")
      ("size", OptionKind::kResult, po::value<int>()->default_value(224), "patch size");
  table.group("Fault injection")
      ("debug-kill", OptionKind::kDebug, po::value<int>()->default_value(-1), "kill a rank");
  table.group("io")("mpp", OptionKind::kResult, po::value<double>()->default_value(0.5), "mpp");
  po::options_description common("General");
  add_common_options(common);
  table.add(common, OptionKind::kRunControl);
  return table;
}

std::string to_text(const po::options_description& desc) {
  std::ostringstream out;
  out << desc;
  return out.str();
}

TEST(OptionTable, KindsAndHelpVisibility) {
  const OptionTable table = test_table();
  EXPECT_EQ(table.kind("size"), OptionKind::kResult);
  EXPECT_EQ(table.kind("out"), OptionKind::kRunControl);
  EXPECT_EQ(table.kind("debug-kill"), OptionKind::kDebug);
  EXPECT_EQ(table.kind("log-level"), OptionKind::kRunControl);
  EXPECT_THROW(table.kind("nope"), Error);
  EXPECT_EQ(table.names().size(), 9u);

  const std::string help = to_text(table.help_description(false));
  const std::string all = to_text(table.help_description(true));
  EXPECT_EQ(help.find("debug-kill"), std::string::npos) << help;
  EXPECT_EQ(help.find("Fault injection"), std::string::npos) << "a group of debug options only is hidden";
  EXPECT_NE(help.find("--mpp"), std::string::npos) << help;
  EXPECT_NE(help.find("--help-all"), std::string::npos) << help;
  EXPECT_NE(all.find("--debug-kill"), std::string::npos) << all;
  EXPECT_NE(all.find("Fault injection"), std::string::npos) << all;

  // Debug options are hidden from --help but still parse.
  auto parsed = parse_options(table.description(), {"--out", "o", "--debug-kill", "2"});
  EXPECT_EQ(parsed.values["debug-kill"].as<int>(), 2);
}

TEST(OptionTable, RefusesDuplicatesAndOptionsWithoutKind) {
  OptionTable table = test_table();
  EXPECT_THROW(table.group("x")("size", OptionKind::kResult, po::value<int>(), "again"), Error);
  po::options_description other;
  other.add_options()("a", po::value<int>(), "a")("b", po::value<int>(), "b");
  EXPECT_THROW(table.add(other, {{"a", OptionKind::kResult}}), Error);
  EXPECT_THROW(table.add(other, {{"a", OptionKind::kResult}, {"b", OptionKind::kDebug}}), Error);
  table.add(other, {{"a", OptionKind::kResult}, {"b", OptionKind::kRunControl}});
  EXPECT_EQ(table.kind("b"), OptionKind::kRunControl);
}

TEST(OptionTable, IniTextFollowsKinds) {
  const OptionTable table = test_table();
  const std::map<std::string, std::string> values = {
      {"size", "256"}, {"out", "run dir"}, {"mpp", "0.25"}, {"debug-kill", "3"}};
  EXPECT_EQ(table.config_ini(values), "mpp = 0.25\nout = run dir\nsize = 256\n");
  EXPECT_EQ(table.fingerprint_ini(values), "mpp = 0.25\nsize = 256\n");
  EXPECT_THROW(table.config_ini({{"unknown", "1"}}), Error);
  for (const std::string bad : {"a#b", "two\nlines", " lead", "trail "}) {
    try {
      table.config_ini({{"out", bad}});
      FAIL() << bad;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find("--out"), std::string::npos) << e.what();
    }
  }
}

TEST(OptionTable, ConfigIniRoundTripsThroughConfigFile) {
  const OptionTable table = test_table();
  const std::map<std::string, std::string> values = {
      {"size", ini_value(512)}, {"out", ""}, {"mpp", ini_value(0.1 + 0.2)}};
  const std::string ini = table.config_ini(values);
  EXPECT_NE(ini.find("mpp = 0.30000000000000004\n"), std::string::npos) << ini;
  auto parsed = parse_options(table.description(),
                              {"--config", write_temp("tessera_options_table.ini", ini)});
  EXPECT_EQ(parsed.values["size"].as<int>(), 512);
  EXPECT_EQ(parsed.values["mpp"].as<double>(), 0.1 + 0.2);
  EXPECT_EQ(parsed.values["out"].as<std::string>(), "");
}

TEST(Options, IniValueRendersTypes) {
  EXPECT_EQ(ini_value(true), "true");
  EXPECT_EQ(ini_value(false), "false");
  EXPECT_EQ(ini_value(int64_t{-7}), "-7");
  EXPECT_EQ(ini_value(uint64_t{18446744073709551615ull}), "18446744073709551615");
  EXPECT_EQ(ini_value(5.0), "5");
  EXPECT_EQ(ini_value(std::string("x y")), "x y");
}

}  // namespace
}  // namespace tessera
