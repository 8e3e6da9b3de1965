#include "common/stage/stage_options.h"

#include <gtest/gtest.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/options.h"

namespace tessera {
namespace {

OptionTable stage_table(bool parts) {
  OptionTable t;
  if (parts) add_part_options(t);
  add_rerun_options(t, "replace outputs");
  return t;
}

StageOptions parse(const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& env = {}) {
  po::options_description desc = stage_table(true).description();
  add_common_options(desc);
  return stage_options_from(parse_options(desc, args).values, env);
}

TEST(StageOptions, DefaultsAreOnePartCheapVerifyAndLocking) {
  StageOptions o = parse({});
  EXPECT_EQ(o.part, 0);
  EXPECT_EQ(o.parts, 1);
  EXPECT_EQ(o.verify, VerifyLevel::kCheap);
  EXPECT_TRUE(o.file_locking);
  EXPECT_FALSE(o.overwrite);
}

TEST(StageOptions, PartsComeFromASlurmArrayUnlessGiven) {
  const std::map<std::string, std::string> env = {{"SLURM_ARRAY_TASK_ID", "5"},
                                                  {"SLURM_ARRAY_TASK_MIN", "3"},
                                                  {"SLURM_ARRAY_TASK_MAX", "6"},
                                                  {"SLURM_ARRAY_TASK_COUNT", "4"}};
  StageOptions o = parse({}, env);
  EXPECT_EQ(o.part, 2);
  EXPECT_EQ(o.parts, 4);
  o = parse({"--part", "1", "--parts", "2"}, env);
  EXPECT_EQ(o.part, 1);
  EXPECT_EQ(o.parts, 2);
}

TEST(StageOptions, BadPartsAndArraysAreRefused) {
  EXPECT_THROW(parse({"--part", "2", "--parts", "2"}), InvalidInput);
  EXPECT_THROW(parse({"--parts", "0"}), InvalidInput);
  EXPECT_THROW(parse({"--part", "-1"}), InvalidInput);
  EXPECT_THROW(parse({"--verify", "some"}), InvalidInput);
  // --array=0-6:2 has 4 tasks over a span of 7.
  EXPECT_THROW(parse({}, {{"SLURM_ARRAY_TASK_ID", "2"},
                          {"SLURM_ARRAY_TASK_MIN", "0"},
                          {"SLURM_ARRAY_TASK_MAX", "6"},
                          {"SLURM_ARRAY_TASK_COUNT", "4"}}),
               InvalidInput);
  EXPECT_THROW(parse({}, {{"SLURM_ARRAY_TASK_ID", "x"}}), InvalidInput);
  // --array=2, resubmitting one part: refused unless the part is given.
  const std::map<std::string, std::string> one = {{"SLURM_ARRAY_TASK_ID", "2"},
                                                  {"SLURM_ARRAY_TASK_MIN", "2"},
                                                  {"SLURM_ARRAY_TASK_MAX", "2"},
                                                  {"SLURM_ARRAY_TASK_COUNT", "1"}};
  EXPECT_THROW(parse({}, one), InvalidInput);
  EXPECT_EQ(parse({"--part", "2", "--parts", "4"}, one).part, 2);
}

// A stage without parts (aggregate, ingest) takes the rerun options only, ignores a Slurm array,
// and writes them to config.ini as one helper does for every stage.
TEST(StageOptions, RerunOptionsAloneAndTheirConfigValues) {
  po::options_description desc = stage_table(false).description();
  add_common_options(desc);
  const auto values = parse_options(desc, {"--verify", "full", "--overwrite"}).values;
  const StageOptions o = rerun_options_from(values);
  EXPECT_EQ(o.verify, VerifyLevel::kFull);
  EXPECT_TRUE(o.overwrite);
  EXPECT_TRUE(o.file_locking);
  EXPECT_EQ(o.parts, 1);
  EXPECT_THROW(parse_options(desc, {"--part", "1"}), std::exception);
  std::map<std::string, std::string> ini;
  stage_option_values(o, false, ini);
  // --overwrite is never saved as true: feeding config.ini back must not wipe the run.
  EXPECT_EQ(ini, (std::map<std::string, std::string>{
                     {"verify", "full"}, {"file-locking", "true"}, {"overwrite", "false"}}));
  stage_option_values(parse({"--part", "1", "--parts", "3"}), true, ini);
  EXPECT_EQ(ini.at("part"), "1");
  EXPECT_EQ(ini.at("parts"), "3");
  EXPECT_EQ(ini.at("verify"), "cheap");
  // What each kind of option is: parts change results, rerun options only how a run goes.
  const OptionTable t = stage_table(true);
  EXPECT_EQ(t.kind("parts"), OptionKind::kResult);
  EXPECT_EQ(t.kind("overwrite"), OptionKind::kRunControl);
  EXPECT_EQ(t.kind("verify"), OptionKind::kRunControl);
}

TEST(StageOptions, VerifyAloneForProgramsThatOnlyRead) {
  OptionTable t;
  add_verify_option(t, "Index", VerifyLevel::kFull, "what query checks");
  po::options_description desc = t.description();
  EXPECT_EQ(verify_from(parse_options(desc, {}).values), VerifyLevel::kFull);
  EXPECT_EQ(verify_from(parse_options(desc, {"--verify", "cheap"}).values), VerifyLevel::kCheap);
  try {
    verify_from(parse_options(desc, {"--verify", "some"}).values);
    FAIL() << "--verify some was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("invalid --verify: 'some', expected cheap or full"),
              std::string::npos) << e.what();
  }
}

TEST(StageOptions, FolderNamesAreSafeAndShortEnoughForTheFilesMadeOfThem) {
  EXPECT_NO_THROW(require_folder_name("name", "vit-tiny_2.x"));
  EXPECT_NO_THROW(require_folder_name("name", std::string(kMaxNameLength, 'a')));
  for (const std::string bad : {"", ".hidden", "a/b", "../up", "a b", "caf\xc3\xa9"}) {
    EXPECT_THROW(require_folder_name("name", bad), InvalidInput) << bad;
  }
  try {
    require_folder_name("tag", std::string(300, 'a'));
    FAIL() << "a 300-character tag was accepted";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("--tag"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("300 characters long; at most 160"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessera
