#include "stages/status/graph.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "common/stage/layout.h"
#include "stages/status/status.h"

namespace tessera::status {
namespace {

TEST(Graph, EveryStageOfTheLayoutInChainOrder) {
  const nlohmann::json g = graph_json();
  EXPECT_EQ(g["format_version"], 1);
  const auto& stages = g["stages"];
  ASSERT_EQ(stages.size(), stage_graph().size());
  std::set<std::string> seen;
  for (size_t i = 0; i < stages.size(); ++i) {
    const StageDecl& decl = stage_graph()[i];
    const auto& s = stages[i];
    EXPECT_EQ(s["name"], decl.name);
    EXPECT_EQ(s["executable"], decl.name);
    EXPECT_EQ(s["reads"], nlohmann::json(decl.reads));
    // The folder is where the layout puts the stage's directories.
    const RunLayout layout("/r");
    const std::string root = layout.stage_root(decl.name, decl.kind == DirKind::kParts ? "" : "n");
    EXPECT_EQ(root, decl.kind == DirKind::kParts ? "/r/" + s["folder"].get<std::string>()
                                                 : "/r/" + s["folder"].get<std::string>() + "/n");
    EXPECT_EQ(s["name_option"].is_null(), decl.kind == DirKind::kParts) << decl.name;
    for (const auto& r : s["reads"]) EXPECT_TRUE(seen.count(r.get<std::string>())) << decl.name;
    seen.insert(decl.name);
  }
  EXPECT_EQ(stages[0]["kind"], "parts");
  EXPECT_EQ(stages[1]["name"], "embed");
  EXPECT_EQ(stages[1]["kind"], "named_parts");
  EXPECT_EQ(stages[1]["name_option"], "--tag");
  EXPECT_EQ(stages.back()["kind"], "named_generations");
}

TEST(Graph, TheCommandPrintsItAndRefusesARun) {
  std::ostringstream out, err;
  EXPECT_EQ(status_main({"--graph"}, out, err), 0);
  // Written out, not derived: launchers and scripts parse this, so a change to the graph or to how
  // it is printed must change this test too.
  EXPECT_EQ(nlohmann::json::parse(out.str()), nlohmann::json::parse(R"({"format_version": 1,
    "stages": [
      {"name": "patchgen", "folder": "patchgen", "executable": "patchgen", "kind": "parts",
       "name_option": null, "reads": [], "run_option": "--out", "launch": "per_part",
       "chain_options": ["--manifest"], "threads_option": null},
      {"name": "embed", "folder": "embed", "executable": "embed", "kind": "named_parts",
       "name_option": "--tag", "reads": ["patchgen"], "run_option": "--run",
       "launch": "per_part", "chain_options": ["--model"], "threads_option": "--torch-threads"},
      {"name": "aggregate", "folder": "slides", "executable": "aggregate", "kind": "named_parts",
       "name_option": "--name", "reads": ["embed", "patchgen"], "run_option": "--run",
       "launch": "when_named", "chain_options": [], "threads_option": null},
      {"name": "ingest", "folder": "ingest", "executable": "ingest",
       "kind": "named_generations", "name_option": "--name",
       "reads": ["embed", "patchgen", "aggregate"], "run_option": "--run", "launch": "once",
       "chain_options": [], "threads_option": "--threads"}]})"));
  std::ostringstream out2, err2;
  EXPECT_EQ(status_main({"--graph", "/tmp"}, out2, err2), 2);
  EXPECT_NE(err2.str().find("--graph takes no run directory"), std::string::npos);
  EXPECT_EQ(out2.str(), "");
}

}  // namespace
}  // namespace tessera::status
