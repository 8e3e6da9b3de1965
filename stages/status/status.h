// tessera-status: what a run directory holds, stage by stage and part by part, and what to run
// next. Everything here reads files only (never writes, never takes a lock): it can run while jobs
// write the run directory, on a login node, from any working directory.
//
// A run directory's stage directories are found by name (docs/formats.md):
//   RUN/patchgen[/part-PPPPP-of-QQQQQ]
//   RUN/embed/<tag>[/part-PPPPP-of-QQQQQ]
//   RUN/ingest/<name>/gen-NNNNN (+ catalog.json)
// Each is one StageStatus row; ingest generations play the part of parts (part = generation).
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::status {

// Exit code of tessera-status when some stage directory is not complete (0: all complete; 2: no
// such run directory or bad options; 1: an error reading it).
inline constexpr int kExitNotComplete = 4;

enum class State {
  kComplete,              // _SUCCESS with exit code 0
  kCompleteWithFailures,  // _SUCCESS with another exit code (3: failed slides, no patches)
  kRunning,               // .ranks.lock held by a process (ranks of a job still run there)
  kIncomplete,            // run.json without _SUCCESS: a job was killed or failed; rerun resumes
  kStale,                 // _STALE: its input was replaced; the next run starts afresh
  kMissing                // a part (or ingest generation) that should exist and does not
};

// "complete", "complete_with_failures", "running", "incomplete", "stale", "missing".
const char* to_string(State state);

// Complete or complete with failures: nothing to rerun.
bool is_complete(State state);

struct FailedSlide {
  std::string slide_id;
  std::string reason;
};

// One stage directory (one part of a stage, or one ingest generation). Optional fields are empty
// when the files do not tell (no _SUCCESS, no marker).
struct StageStatus {
  std::string stage;  // "patchgen", "embed", "ingest"
  std::string tag;    // embed: its tag; ingest: the embed tag taken in (when known)
  std::string name;   // ingest: RUN/ingest/<name>
  int part = 0;       // ingest: the generation
  int parts = 1;      // ingest: generations found or due
  std::string dir;    // absolute
  State state = State::kMissing;
  std::optional<int> world_size;  // run.json (or _SUCCESS)
  std::vector<int> ranks_done;     // complete: every rank; otherwise ranks with a valid marker
  std::vector<int> ranks_missing;  // the other ranks of world_size
  std::optional<int> exit_code;    // _SUCCESS
  std::string success_status;      // _SUCCESS "status"
  std::optional<int64_t> rows;     // _SUCCESS patches (ingest: rows), else summed over markers
  std::optional<int64_t> slides_ok;
  std::optional<int64_t> slides_failed;
  std::vector<FailedSlide> failed_slides;  // patchgen _SUCCESS "failed"
  std::optional<double> duration_s;  // _SUCCESS end - start, else first marker start - last end
  std::optional<double> rows_per_s;  // rows / duration_s
  std::optional<nlohmann::json> progress;  // last record of progress.jsonl
  bool run_json_damaged = false;  // run.json exists but cannot be read: no rerun command suggested
  std::string next;     // the command that completes it, "" when none (complete, running)
  std::string problem;  // what could not be read or decided, "" when nothing
};

struct RunStatus {
  std::string run;  // absolute
  // patchgen parts, then embed tags (by name) and their parts, then ingest names (by name) and
  // their generations.
  std::vector<StageStatus> stages;
  // Commands in the order to run them: the stages' `next`, then an ingest for every embed tag
  // that is complete and not ingested anywhere.
  std::vector<std::string> next;
  // Running `serve` processes registered in RUN/serve/<name>.json (index, host, port, url, pid, ...);
  // on this host only those whose process is alive, on other hosts every one.
  std::vector<nlohmann::json> services;
};

// Scans run directory `run`. Not collective; reads only. Throws InvalidInput when `run` does not
// exist, is not a directory, or holds none of patchgen/, embed/, ingest/. Problems with single
// files (unreadable JSON) are reported in the rows' `problem`, not thrown.
RunStatus scan_run(const std::string& run);

// 0 when every row is complete (with or without failures), kExitNotComplete otherwise.
int exit_code(const RunStatus& status);

// The JSON document of `tessera-status --json` (schema in stages/status/README.md).
nlohmann::json to_json(const RunStatus& status);

// The human-readable report: one table row per stage directory, then failed slides, the rows not
// complete with their ranks and last progress, and the commands to run next.
std::string format_table(const RunStatus& status);

// One line per row that is not complete: "<stage> <tag|name|-> <part> <parts> <state>\n".
std::string format_incomplete(const RunStatus& status);

// Rank lists in ranges: {0,1,2,5,7,8} -> "0-2,5,7-8"; {} -> "-". Input sorted ascending.
std::string format_ranks(const std::vector<int>& ranks);

// Seconds since the epoch of a UTC ISO 8601 time as tessera writes it
// ("2026-11-30T02:54:48.378Z", milliseconds optional); nullopt when it does not parse.
std::optional<double> parse_utc(const std::string& text);

// The tessera-status program: parses `args` (argv without the program name), writes the report
// to `out` and errors to `err`, returns the exit code (0, kExitNotComplete, 1 or 2).
int status_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tessera::status
