#include "stages/status/next.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <regex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "common/core/error.h"
#include "common/stage/layout.h"
#include "stages/status/read.h"

namespace tessera::status {

namespace fs = std::filesystem;

namespace {

// The stage whose outputs ingest --level slide|patient indexes.
constexpr const char* kSlideVectorStage = kAggregateStage;

}  // namespace

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

std::string rerun_command(const std::string& program, const std::string& config_dir,
                          std::optional<int> world_size, const std::vector<std::string>& extra) {
  const std::string config = stage_file(config_dir, kConfigFile);
  std::error_code ec;
  if (!world_size || !fs::exists(config, ec)) return "";
  std::string command = fmt::format("mpirun -np {} {} --config {}", *world_size, program,
                                    shell_word(config));
  for (const auto& word : extra) command += " " + shell_word(word);
  return command;
}

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

void spell_out_stale_names(StageStatus& s, const std::string& name_option) {
  if (s.state != State::kStale || s.next.empty() || name_option != "--name" || s.tag.empty()) {
    return;
  }
  s.next += " --tag " + shell_word(s.tag) + " --name " + shell_word(s.name);
}

void set_generation_next(std::vector<StageStatus>& generations, const std::string& tag,
                         const std::string& name) {
  const std::vector<std::string> names = {"--tag", tag, "--name", name};
  for (auto& s : generations) {
    if ((s.state != State::kIncomplete && s.state != State::kStale) || s.run_json_damaged) continue;
    std::vector<std::string> extra = names;
    if (s.part > 0) extra.push_back("--append");  // an interrupted append resumes with --append
    s.next = rerun_command(kIngestStage, s.dir, s.world_size, extra);
    if (s.next.empty() && s.problem.empty()) s.problem = "no config.ini or world size to rerun";
  }
}

void set_vector_index_next(StageStatus& index) {
  if (index.run_json_damaged || index.state == State::kRunning ||
      index.state == State::kMissing) {
    return;
  }
  if (index.state == State::kIncomplete || index.state == State::kStale) {
    std::vector<std::string> extra;
    if (index.state == State::kStale && !index.tag.empty()) {
      extra = {"--slides", index.tag, "--name", index.name};
    } else if (index.exit_code) {  // complete, without its catalog
      extra = {"--overwrite"};
    }
    index.next = rerun_command(kIngestStage, index.dir, index.world_size, extra);
    if (index.next.empty() && index.problem.empty()) {
      index.problem = "no config.ini or world size to rerun";
    }
  }
}

void require_slide_vectors(std::vector<StageStatus>& rows) {
  for (auto& index : rows) {
    if (!is_vector_index(index) || index.next.empty()) continue;
    const auto source = std::find_if(rows.begin(), rows.end(), [&](const StageStatus& s) {
      return s.stage == kSlideVectorStage && !index.tag.empty() && s.name == index.tag;
    });
    if (source != rows.end() && (source->state == State::kComplete || !source->next.empty())) {
      continue;
    }
    index.next.clear();
    if (index.tag.empty()) {
      index.problem = "run.json names no aggregate output (--slides) to index: rerun ingest "
                      "--level with --slides and --overwrite";
    } else if (source == rows.end()) {
      index.problem = fmt::format("its aggregate output '{}' is missing: run aggregate --name {} "
                                  "first",
                                  index.tag, shell_word(index.tag));
    } else {
      index.problem = fmt::format("its aggregate output '{}' is {}{}{}", index.tag,
                                  to_string(source->state), source->problem.empty() ? "" : ": ",
                                  source->problem);
    }
  }
}

void drop_reruns_that_fail_alike(std::vector<StageStatus>& rows) {
  for (auto& s : rows) {
    if (!s.failure || s.failure->exit_code != kExitBadInput || s.state != State::kIncomplete) {
      continue;
    }
    s.next.clear();
    s.problem = fmt::format("its last run was refused as invalid input, and a rerun with the "
                            "same options would be too: fix what the failure says, then rerun "
                            "with --overwrite, or remove {}",
                            shell_word(s.dir));
  }
}

std::string program_path(const std::string& executable, const std::string& self_dir) {
  if (self_dir.empty()) return executable;
  for (const fs::path& candidate : {fs::path(self_dir) / ".." / executable / executable,
                                    fs::path(self_dir) / executable}) {
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) {
      return fs::weakly_canonical(candidate, ec).string();
    }
  }
  return executable;
}

std::string with_program_path(const std::string& command, const std::string& self_dir) {
  static const std::regex kMpirun("^(mpirun -np [0-9]+ )([A-Za-z0-9_-]+)( .*)?$");
  std::smatch m;
  if (!std::regex_match(command, m, kMpirun)) return command;
  return m[1].str() + shell_word(program_path(m[2].str(), self_dir)) + m[3].str();
}

std::optional<StageStatus> due_generation(const std::string& root, const std::string& name,
                                          const std::string& tag,
                                          const std::vector<StageStatus>& generations,
                                          const nlohmann::json& catalog, const EmbedTag& embed) {
  const bool settled =
      !generations.empty() && std::all_of(generations.begin(), generations.end(),
                                          [](const auto& s) { return is_complete(s.state); });
  if (!settled || embed.parts <= 0) return std::nullopt;
  std::set<int> in;
  for (int p : json_get<std::vector<int>>(catalog, "parts_in").value_or(std::vector<int>{})) {
    in.insert(p);
  }
  std::vector<int> out_parts;
  for (int p = 0; p < embed.parts; ++p) {
    if (!in.count(p)) out_parts.push_back(p);
  }
  if (out_parts.empty()) return std::nullopt;
  StageStatus s;
  s.stage = kIngestStage;
  s.name = name;
  s.tag = tag;
  s.part = generations.back().part + 1;
  s.dir = generation_dir(root, s.part);
  s.state = State::kMissing;
  s.problem = fmt::format("embed part(s) {} of '{}' not in the index yet",
                          fmt::join(out_parts, ","), tag);
  const auto gen0 = std::find_if(generations.begin(), generations.end(),
                                 [](const StageStatus& g) { return g.part == 0; });
  s.next = rerun_command(kIngestStage, gen0 == generations.end() ? "" : gen0->dir,
                         generations.back().world_size,
                         {"--tag", tag, "--name", name, "--append", "--embed-parts", "all"});
  return s;
}

std::vector<std::string> ingest_suggestions(const std::string& run,
                                            const std::map<std::string, EmbedTag>& tags,
                                            const std::set<std::string>& ingested) {
  std::vector<std::string> out;
  for (const auto& [tag, t] : tags) {
    if (!t.all_complete || ingested.count(tag)) continue;
    out.push_back(fmt::format("mpirun -np {} ingest --run {} --tag {}", t.world_size.value_or(1),
                              shell_word(run), shell_word(tag)));
  }
  return out;
}

std::vector<std::string> vector_index_suggestions(const std::string& run,
                                                  const std::vector<StageStatus>& rows,
                                                  const std::set<std::string>& indexed) {
  std::vector<std::string> out;
  for (const StageStatus& s : rows) {
    const bool indexable = s.stage == kSlideVectorStage && s.state == State::kComplete;
    if (!indexable || indexed.count(s.name)) continue;
    out.push_back(fmt::format("mpirun -np 1 ingest --run {} --level {} --slides {}",
                              shell_word(run), shell_word(s.level.empty() ? "slide" : s.level),
                              shell_word(s.name)));
  }
  return out;
}

}  // namespace tessera::status
