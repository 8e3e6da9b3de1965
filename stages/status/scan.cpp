#include "stages/status/scan.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/utf8.h"
#include "common/stage/marker.h"
#include "common/vector/catalog.h"
#include "common/stage/layout.h"
#include "stages/status/graph.h"
#include "stages/status/next.h"
#include "stages/status/paths.h"
#include "stages/status/read.h"

namespace tessera::status {

namespace fs = std::filesystem;

namespace {

// The rows of one stage root (RUN/<stage> or RUN/<stage>/<name>) and its parts.
void scan_parts(const std::string& root, const StageDecl& decl, const std::string& name,
                std::vector<StageStatus>& out) {
  std::vector<StageStatus> rows;
  for (const PartName& pd : parts_under(root)) {
    StageStatus s;
    s.stage = decl.name;
    (decl.name_option == "--tag" ? s.tag : s.name) = name;
    s.part = pd.part;
    s.parts = pd.parts;
    s.dir = part_dir(root, pd.part, pd.parts);
    read_stage_dir(s);
    rows.push_back(std::move(s));
  }
  for (auto& s : rows) {
    set_part_next(s, rows, decl.name);
    spell_out_stale_names(s, decl.name_option);
  }
  out.insert(out.end(), rows.begin(), rows.end());
}

// True when `dir` is itself a stage directory (the skeleton's files are there).
bool holds_stage_files(const std::string& dir) {
  for (const char* file : {kRunFile, kSuccessFile, kStaleFile, kRanksLockFile}) {
    if (path_exists(stage_file(dir, file))) return true;
  }
  return false;
}

// The generations listed in an ingest catalog.json.
std::set<int> listed_generations(const std::optional<nlohmann::json>& catalog) {
  std::set<int> listed;
  if (catalog && catalog->contains("generations") && (*catalog)["generations"].is_array()) {
    for (const auto& g : (*catalog)["generations"]) {
      if (g.is_object() && g.contains("generation") && g["generation"].is_number_integer()) {
        listed.insert(g["generation"].get<int>());
      }
    }
  }
  return listed;
}

void scan_ingest(const std::string& run, const std::string& name,
                 const std::map<std::string, EmbedTag>& tags, std::vector<StageStatus>& out) {
  const std::string root = RunLayout(run).stage_root(kIngestStage, name);
  std::string catalog_problem;
  auto catalog = read_json_noted(join_path(root, kCatalogFile), catalog_problem);
  std::map<int, std::string> gens;
  for (const auto& d : list_subdirectories(root)) {
    if (auto g = parse_generation_name(d)) gens[*g] = join_path(root, d);
  }
  // catalog.json is written after its last generation's _SUCCESS, which holds its seal.
  const auto listed = json_get<nlohmann::json>(catalog, "generations");
  if (listed && listed->is_array() && !listed->empty() && listed->back().is_object() &&
      !listed->back().value("dir", "").empty()) {
    const std::string last = join_path(root, listed->back().value("dir", ""));
    const std::string path = join_path(root, kCatalogFile);
    std::string why;
    try {
      why = check_text_seal(stage_file(last, kSuccessFile), kCatalogSealField, path,
                            read_file(path));
    } catch (const std::exception& e) {
      why = e.what();
    }
    if (!why.empty()) {
      catalog_problem = utf8_escaped(why);
      catalog.reset();
    }
  }
  if (gens.empty() && holds_stage_files(root)) {
    // A slide- or patient-level index: one stage directory, the root itself.
    StageStatus s;
    s.stage = kIngestStage;
    s.name = name;
    s.dir = root;
    read_stage_dir(s);
    if (s.level.empty() || s.level == "patch") {
      s.level = "slide";  // no generations, no readable level: as ingest --level slide made it
    }
    require_slide_catalog(s);
    set_vector_index_next(s);
    out.push_back(std::move(s));
    return;
  }
  std::string tag = json_get<std::string>(catalog, "tag").value_or("");
  std::vector<StageStatus> rows;
  for (const auto& [g, dir] : gens) {
    StageStatus s;
    s.stage = kIngestStage;
    s.name = name;
    s.tag = tag;
    s.level = "patch";
    s.part = g;
    s.dir = dir;
    read_stage_dir(s);
    if (tag.empty()) tag = s.tag;
    rows.push_back(std::move(s));
  }
  if (!catalog_problem.empty() && !rows.empty() && rows.front().problem.empty()) {
    rows.front().problem = catalog_problem;
  }
  require_listed_generations(rows, listed_generations(catalog), catalog.has_value(),
                             catalog_problem);
  set_generation_next(rows, tag, name);
  // Embed parts not in the catalog yet: the next generation is due (ingest --append).
  auto embed = tags.find(tag);
  if (catalog && embed != tags.end()) {
    if (auto due = due_generation(root, name, tag, rows, *catalog, embed->second)) {
      rows.push_back(std::move(*due));
    }
  }
  for (auto& s : rows) s.parts = static_cast<int>(rows.size());
  out.insert(out.end(), rows.begin(), rows.end());
}

// What ingest suggestions need of embed tag `name`, from its rows.
EmbedTag embed_tag(const std::string& name, const std::vector<StageStatus>& rows, size_t first) {
  EmbedTag t;
  t.tag = name;
  t.all_complete = rows.size() > first;
  bool any_rows = false;
  for (size_t i = first; i < rows.size(); ++i) {
    const StageStatus& s = rows[i];
    t.parts = std::max(t.parts, s.parts);
    t.all_complete = t.all_complete && is_complete(s.state);
    any_rows = any_rows || s.rows.value_or(0) > 0;
    if (!t.world_size) t.world_size = s.world_size;
  }
  t.all_complete = t.all_complete && any_rows;
  return t;
}

}  // namespace

std::vector<nlohmann::json> running_services(const std::string& dir) {
  std::vector<nlohmann::json> out;
  if (!is_dir(dir)) return out;
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    std::string problem;
    const auto j = read_json_noted(f.string(), problem);
    if (!j || !j->is_object()) continue;
    const bool here = j->value("host", "") == host;
    const int pid = j->value("pid", 0);
    if (here && (pid <= 0 || (::kill(pid, 0) != 0 && errno == ESRCH))) continue;  // a stale file
    out.push_back(*j);
  }
  return out;
}

RunStatus scan_run(const std::string& run, const std::string& self_dir) {
  std::error_code ec;
  if (!fs::exists(run, ec)) fail<InvalidInput>("run directory '{}' does not exist", run);
  if (!is_dir(run)) fail<InvalidInput>("'{}' is not a directory", run);
  RunStatus status;
  const RunLayout layout(run);
  status.run = layout.run();
  const auto& graph = stage_graph();
  if (std::none_of(graph.begin(), graph.end(), [&](const StageDecl& d) {
        return is_dir(join_path(status.run, stage_folder(d)));
      })) {
    std::vector<std::string> names;
    for (const auto& d : graph) names.push_back(stage_folder(d) + "/");
    fail<InvalidInput>("'{}' is not a tessera run directory (no {})", status.run,
                       fmt::join(names, ", "));
  }
  // Every stage of the graph, in chain order; named stages by name.
  std::map<std::string, EmbedTag> tags;  // embed's tags, which ingest's rows refer to
  std::set<std::string> ingested;
  std::set<std::string> indexed;  // the aggregate outputs that slide-level indexes take in
  for (const StageDecl& decl : graph) {
    if (decl.kind == DirKind::kParts) {
      scan_parts(layout.stage_root(decl.name), decl, "", status.stages);
      continue;
    }
    for (const auto& name : layout.names(decl.name)) {
      const size_t first = status.stages.size();
      if (decl.kind == DirKind::kNamedGenerations) {
        scan_ingest(status.run, name, tags, status.stages);
        for (size_t i = first; i < status.stages.size(); ++i) {
          const StageStatus& row = status.stages[i];
          (is_vector_index(row) ? indexed : ingested).insert(row.tag);
          // An index folder of that name, whatever its state, is not suggested again.
          if (is_vector_index(row)) indexed.insert(row.name);
        }
        continue;
      }
      scan_parts(layout.stage_root(decl.name, name), decl, name, status.stages);
      if (decl.name == kEmbedStage) tags[name] = embed_tag(name, status.stages, first);
    }
  }

  drop_reruns_that_fail_alike(status.stages);
  require_slide_vectors(status.stages);
  for (auto& s : status.stages) {
    if (s.next.empty()) continue;
    // config.ini keeps --run (patchgen's --out) as it was given, perhaps relative to where the
    // stage ran, or the run's place before it was moved: the command names this run, which the
    // command line makes win over config.ini, so that it acts on this run from any directory.
    s.next += fmt::format(" {} {}", stage_decl(s.stage).run_option,
                          shell_word(status.run));
    status.next.push_back(s.next);
  }
  status.services = running_services(join_path(status.run, kServicesDir));
  for (auto& command : ingest_suggestions(status.run, tags, ingested)) {
    status.next.push_back(std::move(command));
  }
  for (auto& command : vector_index_suggestions(status.run, status.stages, indexed)) {
    status.next.push_back(std::move(command));
  }
  // Every command names its executable by path, so that it runs as printed from anywhere.
  for (auto& s : status.stages) s.next = with_program_path(s.next, self_dir);
  for (auto& command : status.next) command = with_program_path(command, self_dir);
  return status;
}

}  // namespace tessera::status
