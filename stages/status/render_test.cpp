#include "stages/status/render.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

namespace tessera::status {
namespace {

StageStatus row(const std::string& stage, const std::string& tag, const std::string& name,
                int part, int parts, State state) {
  StageStatus s;
  s.stage = stage;
  s.tag = tag;
  s.name = name;
  s.part = part;
  s.parts = parts;
  s.state = state;
  s.dir = "/r/" + stage;
  return s;
}

TEST(Render, RowNamesAndTitlesFollowTheStageKind) {
  const auto p = row("patchgen", "", "", 1, 2, State::kMissing);
  const auto e = row("embed", "vit-s16", "", 0, 1, State::kComplete);
  const auto i = row("ingest", "vit-s16", "idx", 3, 4, State::kStale);
  EXPECT_EQ(row_name(p), "-");
  EXPECT_EQ(row_name(e), "vit-s16");
  EXPECT_EQ(row_name(i), "idx");
  EXPECT_EQ(part_text(p), "1 of 2");
  EXPECT_EQ(part_text(i), "gen 3");
  EXPECT_EQ(row_title(p), "patchgen part 1 of 2");
  EXPECT_EQ(row_title(e), "embed vit-s16 part 0 of 1");
  EXPECT_EQ(row_title(i), "ingest idx gen 3");
  RunStatus s;
  s.run = "/r";
  s.stages = {p, e, i};
  EXPECT_EQ(format_incomplete(s), "patchgen - 1 2 missing\ningest idx 3 4 stale\n");
}

TEST(Render, EmptyRunAndNullsInJson) {
  RunStatus s;
  s.run = "/r";
  EXPECT_EQ(format_table(s),
            "run /r\n\nno stage directories\n\nall 0 stage directories complete\n");
  s.stages = {row("patchgen", "", "", 0, 1, State::kIncomplete)};
  const nlohmann::json j = to_json(s);
  EXPECT_EQ(j["exit_code"], kExitNotComplete);
  EXPECT_FALSE(j["complete"].get<bool>());
  const auto& r = j["stages"][0];
  for (const char* key : {"tag", "name", "generation", "world_size", "exit_code", "status", "rows",
                          "duration_s", "progress", "next", "problem"}) {
    EXPECT_TRUE(r[key].is_null()) << key;
  }
  EXPECT_EQ(r["state"], "incomplete");
}

// docs/operations.md ("--json") has a table row "| `key` |" for every key tessera-status --json
// writes, at the top level and in each entry of `stages`.
TEST(Render, OperationsDocListsEveryJsonKey) {
  std::ifstream in(TESSERA_OPERATIONS_DOC);
  ASSERT_TRUE(in) << TESSERA_OPERATIONS_DOC;
  std::stringstream text;
  text << in.rdbuf();
  const std::string doc = text.str();
  const auto documented = [&](const std::string& key) {
    return doc.find("| `" + key + "` |") != std::string::npos ||
           doc.find("| `" + key + "`, ") != std::string::npos ||
           doc.find(", `" + key + "` |") != std::string::npos;
  };
  RunStatus s;
  s.run = "/r";
  s.stages = {row("patchgen", "", "", 0, 1, State::kIncomplete)};
  s.services = {nlohmann::json{{"index", "/r/ingest/x"}, {"port", 8470}}};
  const nlohmann::json j = to_json(s);
  for (const auto& [key, value] : j.items()) EXPECT_TRUE(documented(key)) << key;
  for (const auto& [key, value] : j.at("stages").at(0).items()) EXPECT_TRUE(documented(key)) << key;
}

}  // namespace
}  // namespace tessera::status
