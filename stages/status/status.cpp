#include "stages/status/status.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>
#include <set>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/options.h"
#include "common/core/progress.h"
#include "common/core/utf8.h"
#include "common/stage/layout.h"
#include "common/stage/lineage.h"
#include "common/stage/marker.h"
#include "common/stage/skeleton.h"

namespace tessera::status {

namespace fs = std::filesystem;

namespace {

constexpr const char* kUsage =
    "tessera-status RUN [--json | --incomplete]\n\n"
    "Shows, for each stage directory of run directory RUN (patchgen and embed parts, ingest\n"
    "generations), whether it is complete, running, incomplete (which ranks), stale or missing,\n"
    "its counts, failed slides, duration and throughput, and the commands to run next.\n"
    "Exit code: 0 all complete, 4 something not complete, 2 no such run directory.";

std::string join_path(const std::string& a, const std::string& b) {
  return (fs::path(a) / b).string();
}

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

bool is_dir(const std::string& path) {
  std::error_code ec;
  return fs::is_directory(path, ec);
}

// A word for a shell command line: quoted only when it holds anything but [A-Za-z0-9_./=:,+-].
std::string shell_word(const std::string& word) {
  const bool plain = !word.empty() && std::all_of(word.begin(), word.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || std::string("_./=:,+-").find(c) !=
                                                              std::string::npos;
  });
  if (plain) return word;
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::optional<nlohmann::json> read_json_noted(const std::string& path, std::string& problem) {
  try {
    return read_json_file(path);
  } catch (const std::exception& e) {
    // The parser's message quotes the bytes it read: shown escaped when they are not UTF-8.
    if (problem.empty()) problem = utf8_escaped(e.what());
    return std::nullopt;
  }
}

template <typename T>
std::optional<T> json_get(const std::optional<nlohmann::json>& j, const char* key) {
  if (!j || !j->is_object() || !j->contains(key)) return std::nullopt;
  try {
    return j->at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

// The last line of progress.jsonl that parses (a line may be half-written while a job runs).
std::optional<nlohmann::json> last_progress(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  const std::streamoff tail = std::min<std::streamoff>(size, 64 * 1024);
  in.seekg(size - tail);
  std::string text(static_cast<size_t>(tail), '\0');
  in.read(text.data(), tail);
  size_t end = text.size();
  while (end > 0) {
    size_t begin = text.rfind('\n', end - 1);
    begin = begin == std::string::npos ? 0 : begin + 1;
    std::string line = text.substr(begin, end - begin);
    end = begin == 0 ? 0 : begin - 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    try {
      auto j = nlohmann::json::parse(line);
      if (j.is_object()) return j;
    } catch (const nlohmann::json::exception&) {
    }
  }
  return std::nullopt;
}

// end - start in seconds, to the millisecond the times are written with.
double seconds_between(double start, double end) {
  return std::max(0.0, std::round((end - start) * 1000.0) / 1000.0);
}

std::vector<int> all_ranks(int world_size) {
  std::vector<int> ranks(static_cast<size_t>(std::max(0, world_size)));
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
  return ranks;
}

// Reads one stage directory into `s` (stage, names, part and dir already set): state, ranks,
// counts, times, progress. `next` is left to the caller.
void read_stage_dir(StageStatus& s) {
  if (!is_dir(s.dir)) {
    s.state = State::kMissing;
    return;
  }
  auto run_json = read_json_noted(join_path(s.dir, "run.json"), s.problem);
  auto success = read_json_noted(join_path(s.dir, "_SUCCESS"), s.problem);
  // Stale: marked so, or made from inputs that changed since (lineage.h).
  const std::string stale_why = run_json ? stale_reason(s.dir) : "";
  const bool stale = !stale_why.empty();
  if (stale && s.problem.empty()) s.problem = stale_why;
  bool running = false;
  try {
    running = FileLock::held_elsewhere(join_path(s.dir, kRanksLockFile));
  } catch (const std::exception& e) {
    if (s.problem.empty()) s.problem = std::string("cannot tell whether a job runs: ") + e.what();
  }
  s.world_size = json_get<int>(run_json, "world_size");
  if (!s.world_size) s.world_size = json_get<int>(success, "world_size");
  if (stage_decl(s.stage).kind == DirKind::kNamedGenerations && s.tag.empty()) {
    s.tag = json_get<std::string>(run_json, "tag").value_or("");
  }
  s.progress = last_progress(join_path(s.dir, "progress.jsonl"));

  // A run.json that exists but cannot be read: nothing here can be resumed or trusted.
  const bool run_damaged = !run_json && exists(join_path(s.dir, "run.json"));
  s.run_json_damaged = run_damaged;
  if (stale) {
    s.state = State::kStale;
  } else if (running) {
    s.state = State::kRunning;
  } else if (run_damaged) {
    s.state = State::kIncomplete;
  } else if (success) {
    s.exit_code = json_get<int>(success, "exit_code").value_or(0);
    s.state = *s.exit_code == 0 ? State::kComplete : State::kCompleteWithFailures;
  } else if (run_json) {
    s.state = State::kIncomplete;
  } else {
    s.state = State::kMissing;
    if (s.problem.empty()) s.problem = "no run.json: the stage never started here";
    return;
  }

  if (success && !stale && !run_damaged) {
    s.success_status = json_get<std::string>(success, "status").value_or("");
    s.rows = json_get<int64_t>(success, "rows");
    if (!s.rows) s.rows = json_get<int64_t>(success, "patches");
    if (s.stage == kPatchgenStage) {
      s.slides_ok = json_get<int64_t>(success, "slides_ok");
      s.slides_failed = json_get<int64_t>(success, "slides_failed");
      if (success->contains("failed") && (*success)["failed"].is_array()) {
        for (const auto& f : (*success)["failed"]) {
          s.failed_slides.push_back({f.value("slide_id", ""), f.value("reason", "")});
        }
      }
    } else if (s.stage == kEmbedStage) {
      s.slides_ok = json_get<int64_t>(success, "slides");
    }
    auto start = parse_utc(json_get<std::string>(success, "start_time").value_or(""));
    auto end = parse_utc(json_get<std::string>(success, "end_time").value_or(""));
    if (start && end) s.duration_s = seconds_between(*start, *end);
  }

  const int world = s.world_size.value_or(0);
  if (s.state == State::kComplete || s.state == State::kCompleteWithFailures) {
    s.ranks_done = all_ranks(world);
  } else if (s.state == State::kStale || !run_json) {
    s.ranks_missing = all_ranks(world);
  } else {
    const std::string fingerprint =
        json_get<std::string>(run_json, "config_fingerprint").value_or("");
    std::optional<double> first, last;
    int64_t rows = 0;
    for (int r = 0; r < world; ++r) {
      MarkerCheck check = check_marker(marker_path(s.dir, r), s.dir, fingerprint, world,
                                       VerifyLevel::kCheap);
      if (!check.valid) {
        s.ranks_missing.push_back(r);
        continue;
      }
      s.ranks_done.push_back(r);
      rows += check.marker.value("rows", int64_t{0});
      auto start = parse_utc(check.marker.value("start_time", ""));
      auto end = parse_utc(check.marker.value("end_time", ""));
      if (start) first = first ? std::min(*first, *start) : *start;
      if (end) last = last ? std::max(*last, *end) : *end;
    }
    if (!s.ranks_done.empty()) s.rows = rows;
    if (first && last) s.duration_s = seconds_between(*first, *last);
  }
  if (s.rows && s.duration_s && *s.duration_s > 0) {
    s.rows_per_s = static_cast<double>(*s.rows) / *s.duration_s;
  }
}

// "mpirun -np W <program> --config DIR/config.ini" + extra, or "" when the directory has no
// config.ini or no known world size.
std::string rerun_command(const std::string& program, const std::string& config_dir,
                          std::optional<int> world_size, const std::vector<std::string>& extra) {
  const std::string config = join_path(config_dir, "config.ini");
  if (!world_size || !exists(config)) return "";
  std::string command = fmt::format("mpirun -np {} {} --config {}", *world_size, program,
                                    shell_word(config));
  for (const auto& word : extra) command += " " + shell_word(word);
  return command;
}

// The next command of a stage part: a rerun from its own config.ini, or for a missing part from
// a sibling's with --part/--parts.
void set_part_next(StageStatus& s, const std::vector<StageStatus>& siblings,
                   const std::string& program) {
  if (s.run_json_damaged) return;
  if (s.state == State::kIncomplete || s.state == State::kStale) {
    s.next = rerun_command(program, s.dir, s.world_size, {});
    if (s.next.empty() && s.problem.empty()) s.problem = "no config.ini or world size to rerun";
  } else if (s.state == State::kMissing) {
    for (const auto& sib : siblings) {
      if (sib.parts != s.parts || sib.part == s.part) continue;
      s.next = rerun_command(
          program, sib.dir, sib.world_size,
          {"--part", std::to_string(s.part), "--parts", std::to_string(s.parts)});
      if (!s.next.empty()) break;
    }
    if (s.next.empty() && s.problem.empty()) {
      s.problem = "no other part's config.ini to start it from";
    }
  }
}

void scan_parts(const std::string& root, const std::string& stage, const std::string& tag,
                std::vector<StageStatus>& out) {
  std::vector<StageStatus> rows;
  for (const PartName& pd : parts_under(root)) {
    StageStatus s;
    s.stage = stage;
    s.tag = tag;
    s.part = pd.part;
    s.parts = pd.parts;
    s.dir = part_dir(root, pd.part, pd.parts);
    read_stage_dir(s);
    rows.push_back(std::move(s));
  }
  for (auto& s : rows) set_part_next(s, rows, stage);
  out.insert(out.end(), rows.begin(), rows.end());
}

// Embed parts of `tag` and whether every one is complete (with rows); nullopt parts when the tag
// has no part at all.
struct EmbedTag {
  std::string tag;
  int parts = 0;
  bool all_complete = false;
  std::optional<int> world_size;
};

void scan_ingest(const std::string& run, const std::string& name,
                 const std::map<std::string, EmbedTag>& tags, std::vector<StageStatus>& out) {
  const std::string root = RunLayout(run).stage_root(kIngestStage, name);
  std::string catalog_problem;
  auto catalog = read_json_noted(join_path(root, "catalog.json"), catalog_problem);
  std::map<int, std::string> gens;
  for (const auto& d : list_subdirectories(root)) {
    if (auto g = parse_generation_name(d)) gens[*g] = join_path(root, d);
  }
  std::string tag = json_get<std::string>(catalog, "tag").value_or("");
  std::vector<StageStatus> rows;
  for (const auto& [g, dir] : gens) {
    StageStatus s;
    s.stage = kIngestStage;
    s.name = name;
    s.tag = tag;
    s.part = g;
    s.dir = dir;
    read_stage_dir(s);
    if (tag.empty()) tag = s.tag;
    rows.push_back(std::move(s));
  }
  if (!catalog_problem.empty() && !rows.empty() && rows.front().problem.empty()) {
    rows.front().problem = catalog_problem;
  }
  // A generation is served only once catalog.json lists it (ingest writes the catalog after the
  // generation's _SUCCESS): a complete generation that it does not list is not complete, and a
  // rerun of that generation rebuilds the catalog.
  std::set<int> listed;
  if (catalog && catalog->contains("generations") && (*catalog)["generations"].is_array()) {
    for (const auto& g : (*catalog)["generations"]) {
      if (g.is_object() && g.contains("generation") && g["generation"].is_number_integer()) {
        listed.insert(g["generation"].get<int>());
      }
    }
  }
  for (auto& s : rows) {
    if (!is_complete(s.state) || listed.count(s.part)) continue;
    s.state = State::kIncomplete;
    const std::string why =
        catalog ? fmt::format("catalog.json does not list generation {}", s.part)
                : catalog_problem.empty() ? std::string("catalog.json is missing")
                                          : catalog_problem;
    s.problem = why + "; query cannot use it: rerun ingest to rebuild the catalog";
  }
  const std::string gen0 = gens.count(0) ? gens.at(0) : "";
  const std::vector<std::string> names = {"--tag", tag, "--name", name};
  for (auto& s : rows) {
    if ((s.state != State::kIncomplete && s.state != State::kStale) || s.run_json_damaged) continue;
    std::vector<std::string> extra = names;
    if (s.part > 0) extra.push_back("--append");  // an interrupted append resumes with --append
    s.next = rerun_command(kIngestStage, s.dir, s.world_size, extra);
    if (s.next.empty() && s.problem.empty()) s.problem = "no config.ini or world size to rerun";
  }
  // Embed parts not in the catalog yet: the next generation is due (ingest --append).
  const bool settled = !rows.empty() && std::all_of(rows.begin(), rows.end(), [](const auto& s) {
    return is_complete(s.state);
  });
  auto embed = tags.find(tag);
  if (catalog && settled && embed != tags.end() && embed->second.parts > 0) {
    std::set<int> in;
    for (int p : json_get<std::vector<int>>(catalog, "parts_in").value_or(std::vector<int>{})) {
      in.insert(p);
    }
    std::vector<int> out_parts;
    for (int p = 0; p < embed->second.parts; ++p) {
      if (!in.count(p)) out_parts.push_back(p);
    }
    if (!out_parts.empty()) {
      StageStatus s;
      s.stage = kIngestStage;
      s.name = name;
      s.tag = tag;
      s.part = rows.empty() ? 0 : rows.back().part + 1;
      s.dir = generation_dir(root, s.part);
      s.state = State::kMissing;
      s.problem = fmt::format("embed part(s) {} of '{}' not in the index yet",
                              fmt::join(out_parts, ","), tag);
      std::vector<std::string> extra = names;
      extra.insert(extra.end(), {"--append", "--embed-parts", "all"});
      s.next = rerun_command(kIngestStage, gen0, rows.back().world_size, extra);
      rows.push_back(std::move(s));
    }
  }
  for (auto& s : rows) s.parts = static_cast<int>(rows.size());
  out.insert(out.end(), rows.begin(), rows.end());
}

std::string opt_int(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : std::string("-");
}

std::string part_text(const StageStatus& s) {
  return stage_decl(s.stage).kind == DirKind::kNamedGenerations ? fmt::format("gen {}", s.part)
                             : fmt::format("{} of {}", s.part, s.parts);
}

std::string row_name(const StageStatus& s) {
  switch (stage_decl(s.stage).kind) {
    case DirKind::kNamedGenerations: return s.name;
    case DirKind::kNamedParts: return s.tag;
    case DirKind::kParts: break;
  }
  return "-";
}

// "patchgen part 1 of 2", "embed vit-s16 part 0 of 1", "ingest vit-s16 gen 1".
std::string row_title(const StageStatus& s) {
  std::string title = s.stage;
  const DirKind kind = stage_decl(s.stage).kind;
  if (kind != DirKind::kParts) title += " " + row_name(s);
  return title + (kind == DirKind::kNamedGenerations ? " " : " part ") + part_text(s);
}

template <typename T>
nlohmann::json or_null(const std::optional<T>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

nlohmann::json str_or_null(const std::string& v) {
  return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v);
}

}  // namespace

const char* to_string(State state) {
  switch (state) {
    case State::kComplete: return "complete";
    case State::kCompleteWithFailures: return "complete_with_failures";
    case State::kRunning: return "running";
    case State::kIncomplete: return "incomplete";
    case State::kStale: return "stale";
    case State::kMissing: return "missing";
  }
  return "?";
}

bool is_complete(State state) {
  return state == State::kComplete || state == State::kCompleteWithFailures;
}

std::optional<double> parse_utc(const std::string& text) {
  int year, month, day, hour, minute, second;
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &month, &day, &hour, &minute,
                  &second, &consumed) != 6) {
    return std::nullopt;
  }
  double fraction = 0;
  std::string rest = text.substr(static_cast<size_t>(consumed));
  if (!rest.empty() && rest[0] == '.') {
    size_t digits = 1;
    while (digits < rest.size() && std::isdigit(static_cast<unsigned char>(rest[digits]))) {
      ++digits;
    }
    if (digits == 1) return std::nullopt;
    fraction = std::stod("0" + rest.substr(0, digits));
    rest = rest.substr(digits);
  }
  if (rest != "Z") return std::nullopt;
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  return static_cast<double>(timegm(&tm)) + fraction;
}

std::string format_ranks(const std::vector<int>& ranks) {
  if (ranks.empty()) return "-";
  std::string text;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!text.empty()) text += ",";
    text += j == i ? std::to_string(ranks[i]) : fmt::format("{}-{}", ranks[i], ranks[j]);
    i = j + 1;
  }
  return text;
}

// The services registered in `dir` (serve's registry.h) that still run.
static std::vector<nlohmann::json> running_services(const std::string& dir) {
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

RunStatus scan_run(const std::string& run) {
  if (!exists(run)) fail<InvalidInput>("run directory '{}' does not exist", run);
  if (!is_dir(run)) fail<InvalidInput>("'{}' is not a directory", run);
  RunStatus status;
  const RunLayout layout(run);
  status.run = layout.run();
  const auto& graph = stage_graph();
  if (std::none_of(graph.begin(), graph.end(),
                   [&](const StageDecl& d) { return is_dir(layout.stage_base(d.name)); })) {
    std::vector<std::string> names;
    for (const auto& d : graph) names.push_back(d.folder + "/");
    fail<InvalidInput>("'{}' is not a tessera run directory (no {})", status.run,
                       fmt::join(names, ", "));
  }
  // Every stage of the graph, in chain order; named stages by name.
  std::map<std::string, EmbedTag> tags;  // embed's tags, which ingest's rows refer to
  std::set<std::string> ingested;
  for (const StageDecl& decl : graph) {
    if (decl.kind == DirKind::kParts) {
      scan_parts(layout.stage_root(decl.name), decl.name, "", status.stages);
      continue;
    }
    for (const auto& name : layout.names(decl.name)) {
      const size_t first = status.stages.size();
      if (decl.kind == DirKind::kNamedGenerations) {
        scan_ingest(status.run, name, tags, status.stages);
        for (size_t i = first; i < status.stages.size(); ++i) {
          ingested.insert(status.stages[i].tag);
        }
        continue;
      }
      scan_parts(layout.stage_root(decl.name, name), decl.name, name, status.stages);
      if (decl.name != kEmbedStage) continue;
      EmbedTag t;
      t.tag = name;
      t.all_complete = status.stages.size() > first;
      bool any_rows = false;
      for (size_t i = first; i < status.stages.size(); ++i) {
        const StageStatus& s = status.stages[i];
        t.parts = std::max(t.parts, s.parts);
        t.all_complete = t.all_complete && is_complete(s.state);
        any_rows = any_rows || s.rows.value_or(0) > 0;
        if (!t.world_size) t.world_size = s.world_size;
      }
      t.all_complete = t.all_complete && any_rows;
      tags[name] = t;
    }
  }

  for (const auto& s : status.stages) {
    if (!s.next.empty()) status.next.push_back(s.next);
  }
  status.services = running_services(join_path(status.run, kServicesDir));
  for (const auto& [tag, t] : tags) {
    if (!t.all_complete || ingested.count(tag)) continue;
    status.next.push_back(fmt::format("mpirun -np {} ingest --run {} --tag {}",
                                      t.world_size.value_or(1), shell_word(status.run),
                                      shell_word(tag)));
  }
  return status;
}

int exit_code(const RunStatus& status) {
  for (const auto& s : status.stages) {
    if (!is_complete(s.state)) return kExitNotComplete;
  }
  return 0;
}

nlohmann::json to_json(const RunStatus& status) {
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& s : status.stages) {
    nlohmann::json failed = nlohmann::json::array();
    for (const auto& f : s.failed_slides) {
      failed.push_back({{"slide_id", f.slide_id}, {"reason", f.reason}});
    }
    stages.push_back({
        {"stage", s.stage},
        {"tag", str_or_null(s.tag)},
        {"name", str_or_null(s.name)},
        {"generation", stage_decl(s.stage).kind == DirKind::kNamedGenerations
                           ? nlohmann::json(s.part)
                           : nlohmann::json(nullptr)},
        {"part", s.part},
        {"parts", s.parts},
        {"dir", s.dir},
        {"state", to_string(s.state)},
        {"world_size", or_null(s.world_size)},
        {"ranks_done", s.ranks_done},
        {"ranks_missing", s.ranks_missing},
        {"exit_code", or_null(s.exit_code)},
        {"status", str_or_null(s.success_status)},
        {"rows", or_null(s.rows)},
        {"slides_ok", or_null(s.slides_ok)},
        {"slides_failed", or_null(s.slides_failed)},
        {"failed_slides", failed},
        {"duration_s", or_null(s.duration_s)},
        {"rows_per_s", or_null(s.rows_per_s)},
        {"progress", s.progress ? *s.progress : nlohmann::json(nullptr)},
        {"next", str_or_null(s.next)},
        {"problem", str_or_null(s.problem)},
    });
  }
  return {{"format_version", 1},
          {"run", status.run},
          {"complete", exit_code(status) == 0},
          {"exit_code", exit_code(status)},
          {"stages", stages},
          {"next", status.next},
          {"services", status.services}};
}

std::string format_table(const RunStatus& status) {
  std::vector<std::vector<std::string>> cells = {
      {"STAGE", "TAG/NAME", "PART", "STATE", "RANKS", "ROWS", "SLIDES", "DURATION", "ROWS/S"}};
  for (const auto& s : status.stages) {
    std::string slides = opt_int(s.slides_ok);
    if (s.slides_failed.value_or(0) > 0) slides += fmt::format(" (+{} failed)", *s.slides_failed);
    cells.push_back({s.stage, row_name(s), part_text(s), to_string(s.state),
                     s.world_size ? fmt::format("{}/{}", s.ranks_done.size(), *s.world_size)
                                  : std::string("-"),
                     opt_int(s.rows), slides, s.duration_s ? format_hms(*s.duration_s) : "-",
                     s.rows_per_s ? fmt::format("{:.1f}", *s.rows_per_s) : "-"});
  }
  std::vector<size_t> width(cells[0].size(), 0);
  for (const auto& row : cells) {
    for (size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string out = fmt::format("run {}\n\n", status.run);
  if (status.stages.empty()) out += "no stage directories\n";
  for (const auto& row : status.stages.empty() ? decltype(cells){} : cells) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const bool right = c >= 5 && c != 6;  // numbers right-aligned
      line += right ? fmt::format("{:>{}}", row[c], width[c])
                    : fmt::format("{:<{}}", row[c], width[c]);
      if (c + 1 < row.size()) line += "  ";
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }

  std::string failed;
  for (const auto& s : status.stages) {
    for (const auto& f : s.failed_slides) {
      failed += fmt::format("  {}: {}: {}\n", row_title(s), f.slide_id, f.reason);
    }
  }
  if (!failed.empty()) out += "\nfailed slides:\n" + failed;

  std::string pending;
  for (const auto& s : status.stages) {
    if (is_complete(s.state) && s.problem.empty()) continue;
    pending += fmt::format("  {}: {}", row_title(s), to_string(s.state));
    if (!is_complete(s.state) && s.world_size && s.state != State::kMissing) {
      pending += fmt::format(", ranks done {}, missing {}", format_ranks(s.ranks_done),
                             format_ranks(s.ranks_missing));
    }
    if (!s.problem.empty()) pending += fmt::format(" ({})", s.problem);
    pending += "\n";
    if (s.progress && !is_complete(s.state)) {
      try {
        ProgressRecord p = ProgressRecord::from_json(*s.progress);
        pending += fmt::format("    last progress: {} at {}\n", p.to_text(), p.time);
      } catch (const nlohmann::json::exception&) {
      }
    }
    pending += fmt::format("    {}\n", s.dir);
  }
  if (!pending.empty()) out += "\nnot complete:\n" + pending;

  if (!status.services.empty()) {
    out += "\nserving:\n";
    for (const auto& j : status.services) {
      out += fmt::format("  {} at {} (host {}, pid {}, {} rank(s))\n", j.value("index", "?"),
                         j.value("url", "?"), j.value("host", "?"), j.value("pid", 0),
                         j.value("ranks", 0));
    }
  }
  if (!status.next.empty()) {
    out += "\nnext:\n";
    for (const auto& command : status.next) out += "  " + command + "\n";
  }
  size_t done = 0;
  for (const auto& s : status.stages) done += is_complete(s.state) ? 1 : 0;
  out += done == status.stages.size()
             ? fmt::format("\nall {} stage directories complete\n", done)
             : fmt::format("\n{} of {} stage directories complete\n", done, status.stages.size());
  return out;
}

std::string format_incomplete(const RunStatus& status) {
  std::string out;
  for (const auto& s : status.stages) {
    if (is_complete(s.state)) continue;
    out += fmt::format("{} {} {} {} {}\n", s.stage, row_name(s), s.part, s.parts,
                       to_string(s.state));
  }
  return out;
}

int status_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  namespace po = boost::program_options;
  po::options_description desc("Options");
  desc.add_options()
      ("run", po::value<std::string>(), "run directory (also the first positional argument)")
      ("json", po::bool_switch(), "print the report as JSON (schema in stages/status/README.md)")
      ("incomplete", po::bool_switch(),
       "print one line per stage directory not complete: <stage> <tag|name|-> <part> <parts> "
       "<state>")
      ("help,h", po::bool_switch(), "show the options and exit")
      ("version", po::bool_switch(), "print the version and git revision and exit");
  po::positional_options_description positional;
  positional.add("run", 1);
  po::variables_map values;
  try {
    po::store(po::command_line_parser(args).options(desc).positional(positional).run(), values);
    po::notify(values);
  } catch (const po::error& e) {
    err << "tessera-status: " << e.what() << " (see --help)\n";
    return kExitBadInput;
  }
  if (values["help"].as<bool>()) {
    out << help_text(kUsage, desc);
    return 0;
  }
  if (values["version"].as<bool>()) {
    out << version_text("tessera-status");
    return 0;
  }
  if (!values.count("run")) {
    err << "tessera-status: the run directory is required (see --help)\n";
    return kExitBadInput;
  }
  if (values["json"].as<bool>() && values["incomplete"].as<bool>()) {
    err << "tessera-status: --json and --incomplete exclude each other\n";
    return kExitBadInput;
  }
  try {
    RunStatus status = scan_run(values["run"].as<std::string>());
    if (values["json"].as<bool>()) {
      // Names of files and folders may hold any bytes: shown as U+FFFD, never a failure.
      out << to_json(status).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else if (values["incomplete"].as<bool>()) {
      out << format_incomplete(status);
    } else {
      out << format_table(status);
    }
    return exit_code(status);
  } catch (const Error& e) {
    err << "tessera-status: " << e.what() << "\n";
    return e.exit_code();
  } catch (const std::exception& e) {
    err << "tessera-status: " << e.what() << "\n";
    return kExitError;
  }
}

}  // namespace tessera::status
