#include "stages/status/state.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "common/core/fs.h"
#include "common/core/utc.h"
#include "common/stage/layout.h"
#include "common/stage/lineage.h"
#include "common/vector/slide_catalog.h"
#include "common/stage/marker.h"
#include "common/stage/skeleton.h"
#include "stages/status/paths.h"
#include "stages/status/read.h"

namespace tessera::status {

namespace fs = std::filesystem;

namespace {

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

// end - start in seconds, to the millisecond the times are written with.
double seconds_between(double start, double end) {
  return std::max(0.0, std::round((end - start) * 1000.0) / 1000.0);
}

// The names of the entries of `dir`; empty when it cannot be listed (a missing markers/ folder).
std::set<std::string> entry_names(const std::string& dir) {
  std::set<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.insert(it->path().filename().string());
  }
  return names;
}

std::vector<int> all_ranks(int world_size) {
  std::vector<int> ranks(static_cast<size_t>(std::max(0, world_size)));
  for (size_t r = 0; r < ranks.size(); ++r) ranks[r] = static_cast<int>(r);
  return ranks;
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

bool is_vector_index(const StageStatus& s) {
  return stage_decl(s.stage).kind == DirKind::kNamedGenerations &&
         (s.level == "slide" || s.level == "patient");
}

int exit_code(const RunStatus& status) {
  for (const auto& s : status.stages) {
    if (!is_complete(s.state)) return kExitNotComplete;
  }
  return 0;
}

void read_stage_dir(StageStatus& s) {
  if (!is_dir(s.dir)) {
    s.state = State::kMissing;
    return;
  }
  auto run_json = read_json_noted(stage_file(s.dir, kRunFile), s.problem);
  auto success = read_json_noted(stage_file(s.dir, kSuccessFile), s.problem);
  // Stale: marked so, or made from inputs that changed since (lineage.h).
  const std::string stale_why = run_json ? stale_reason(s.dir) : "";
  const bool stale = !stale_why.empty();
  if (stale && s.problem.empty()) s.problem = stale_why;
  bool running = false;
  try {
    running = FileLock::held_elsewhere(stage_file(s.dir, kRanksLockFile));
  } catch (const std::exception& e) {
    if (s.problem.empty()) s.problem = std::string("cannot tell whether a job runs: ") + e.what();
  }
  s.world_size = json_get<int>(run_json, "world_size");
  if (!s.world_size) s.world_size = json_get<int>(success, "world_size");
  if (s.world_size && (*s.world_size < 1 || *s.world_size > kMaxWorldSize)) {
    // Not a rank count any job had: the file is damaged, and nothing is derived from the number.
    if (s.problem.empty()) {
      s.problem = fmt::format("world_size {} in {} is not a rank count (1..{})", *s.world_size,
                              run_json ? kRunFile : kSuccessFile, kMaxWorldSize);
    }
    s.world_size.reset();
    run_json.reset();
    success.reset();
  }
  if (stage_decl(s.stage).kind != DirKind::kParts && s.tag.empty()) {
    s.tag = json_get<std::string>(run_json, "tag").value_or("");
    if (s.tag.empty()) s.tag = json_get<std::string>(run_json, "slides").value_or("");
  }
  if (s.level.empty()) s.level = json_get<std::string>(run_json, "level").value_or("");
  s.progress = last_progress(stage_file(s.dir, kProgressFile));

  // A run.json that exists but cannot be read (or holds no rank count): nothing here can be
  // resumed or trusted.
  const bool run_damaged = !run_json && exists(stage_file(s.dir, kRunFile));
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
    if (!s.rows) s.rows = json_get<int64_t>(success, "vectors");
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
    auto start = parse_utc_timestamp(json_get<std::string>(success, "start_time").value_or(""));
    auto end = parse_utc_timestamp(json_get<std::string>(success, "end_time").value_or(""));
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
    // Only the markers on disk are read: one directory listing, not a probe per rank.
    const std::set<std::string> on_disk = entry_names(stage_file(s.dir, kMarkerDir));
    for (int r = 0; r < world; ++r) {
      const std::string path = marker_path(s.dir, r);
      if (!on_disk.count(fs::path(path).filename().string())) {
        s.ranks_missing.push_back(r);
        continue;
      }
      MarkerCheck check = check_marker(path, s.dir, fingerprint, world, VerifyLevel::kCheap);
      if (!check.valid) {
        s.ranks_missing.push_back(r);
        continue;
      }
      s.ranks_done.push_back(r);
      rows += check.marker.value("rows", int64_t{0});
      auto start = parse_utc_timestamp(check.marker.value("start_time", ""));
      auto end = parse_utc_timestamp(check.marker.value("end_time", ""));
      if (start) first = first ? std::min(*first, *start) : *start;
      if (end) last = last ? std::max(*last, *end) : *end;
    }
    if (!s.ranks_done.empty()) s.rows = rows;
    if (first && last) s.duration_s = seconds_between(*first, *last);
    if (s.state == State::kIncomplete && !run_damaged) {
      const std::vector<StageFailure> failures = read_failures(s.dir, world);
      if (!failures.empty()) s.failure = failures.front();
    }
  }
  if (s.rows && s.duration_s && *s.duration_s > 0) {
    s.rows_per_s = static_cast<double>(*s.rows) / *s.duration_s;
  }
}

void require_listed_generations(std::vector<StageStatus>& generations, const std::set<int>& listed,
                                bool catalog_read, const std::string& catalog_problem) {
  for (auto& s : generations) {
    if (!is_complete(s.state) || listed.count(s.part)) continue;
    s.state = State::kIncomplete;
    const std::string why =
        catalog_read ? fmt::format("catalog.json does not list generation {}", s.part)
                     : catalog_problem.empty() ? std::string("catalog.json is missing")
                                               : catalog_problem;
    s.problem = why + "; query cannot use it: rerun ingest to rebuild the catalog";
  }
}

void require_slide_catalog(StageStatus& index) {
  if (!is_complete(index.state) || exists(join_path(index.dir, kSlideCatalogFile))) return;
  index.state = State::kIncomplete;
  index.problem = "slide_catalog.json is missing; query cannot use it: rerun ingest with "
                  "--overwrite to rebuild the index";
}

}  // namespace tessera::status
