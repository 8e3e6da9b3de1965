// Completion markers and stage directories, shared by every stage through the stage skeleton
// (common/stage/skeleton.h).
//
// A stage directory (RUN/patchgen, RUN/embed/<tag>, with parts RUN/patchgen/part-PPPPP-of-QQQQQ):
//   run.json                 stage, config fingerprint, world size, part: what the outputs are of
//   config.ini               the effective configuration (feed it back with --config)
//   .lock                    fcntl lock held by rank 0 while the stage runs
//   markers/rank-NNNNN.json  one per rank, written atomically after its outputs are durable
//   _SUCCESS                 JSON summary, written last by rank 0
// A marker lists every output file of its rank with its size and hashes; the rank's work counts
// as complete only when the marker exists, matches the configuration and world size, and every
// output it lists passes the check of the requested VerifyLevel.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/core/fs.h"
#include "common/mpi/comm.h"
#include "common/stage/layout.h"
#include "common/stage/stage_options.h"

namespace tessera {

inline constexpr int64_t kMarkerFormatVersion = 2;

// One output file a marker vouches for.
struct OutputRecord {
  std::string file;       // relative to the stage directory
  uint64_t bytes = 0;
  std::string xxh3;       // XXH3-128 of every byte
  std::string xxh3_ends;  // xxh3_ends(): the size and the first and last 64 KiB
  double sync_s = 0;      // seal_output's fsync of the file and its directory (informational)
  double hash_s = 0;      // and its hashing
  nlohmann::json to_json() const;
  static OutputRecord from_json(const nlohmann::json& j);  // throws nlohmann::json::exception
};

// Makes a closed output durable and describes it: fsyncs the file and its directory, then hashes
// it (the whole-file hash reads from the page cache, at memory speed). Throws IoError naming the
// file.
OutputRecord seal_output(const std::string& stage_dir, const std::string& relative_path);

// Checks one output against its record: presence and size, then xxh3_ends (kCheap) or xxh3
// (kFull). Returns "" when it passes, else the reason naming the file.
std::string check_output(const std::string& stage_dir, const OutputRecord& record,
                         VerifyLevel level);

// The seal of a file written after the _SUCCESS that vouches for it (ingest's catalog.json, which
// must not list a generation before the generation is complete): the size and XXH3 of its text,
// {"file": relative, "bytes", "xxh3"}, recorded in that _SUCCESS under a field of the stage's.
nlohmann::json seal_text(const std::string& relative, const std::string& text);

// Checks `text`, the bytes of the file at `path`, against the seal under `field` of the _SUCCESS
// at `success_path`. Returns "" when they match, or when there is no seal to compare (no such
// _SUCCESS, unreadable, or written before the file was sealed); else the reason naming `path`.
std::string check_text_seal(const std::string& success_path, const std::string& field,
                            const std::string& path, const std::string& text);

// Fields every marker carries: format_version, stage, rank, world_size, config_fingerprint,
// version, git_revision, host, pid. The skeleton adds outputs, times and the stage's fields.
nlohmann::json marker_base(const std::string& stage, int rank, int world_size,
                           const std::string& config_fingerprint);

struct MarkerCheck {
  bool valid = false;
  std::string reason;      // why not valid ("marker missing", "file size differs", ...)
  nlohmann::json marker;   // the parsed marker when it could be read
};

// Checks the marker at `marker_path` against the expected fingerprint and world size and every
// output it lists (check_output at `level`). Never throws for invalid or missing markers: that is
// an expected outcome.
MarkerCheck check_marker(const std::string& marker_path, const std::string& stage_dir,
                         const std::string& config_fingerprint, int world_size, VerifyLevel level);

enum class StageAction {
  kFresh,    // start from an empty stage directory
  kResume,   // same configuration and world size: keep valid rank outputs, redo the rest
  kComplete  // _SUCCESS exists for this configuration: nothing to do
};

// Decides what to do with an existing stage directory (pure). `existing` is its run.json, if any.
// Throws InvalidInput naming the directory and what differs when the configuration or world size
// differ and `overwrite` is false: `differences` (config_differences) names the options, and the
// message says how to keep both runs (a directory of their own) or replace the old one.
StageAction plan_stage(const std::string& stage_dir, const std::optional<nlohmann::json>& existing,
                       bool success_exists, const std::string& config_fingerprint, int world_size,
                       bool overwrite, const std::string& differences = "");

// The options whose values differ between two config.ini texts (`option = value` lines; others
// ignored), as "--index IVF4096,Flat (was Flat)", joined by ", ", in option order; an option on
// one side only reads "(was unset)" or "(now unset)". --overwrite is left out. "" when none.
std::string config_differences(const std::string& before, const std::string& now);

struct StageState {
  StageAction action = StageAction::kFresh;
  std::string job_token;              // this job's identity, recorded in .lock
  std::optional<FileLock> lock;       // held by rank 0 only (unless file locking is off)
  std::optional<FileLock> ranks_lock; // shared, held by every rank
};

// Fields every _SUCCESS summary starts with: stage, world_size, config_fingerprint, version,
// git_revision, start_time (given) and end_time (now). Stage code adds its counts.
nlohmann::json summary_base(const std::string& stage, int world_size,
                            const std::string& config_fingerprint, const std::string& start_time);

// Where a stage directory sits in its run and what it is made from.
struct StageLinks {
  std::string run;                  // the run directory (RUN/), for stale marking downstream
  std::vector<std::string> inputs;  // the stage directories it reads (recorded in run.json)
};

// Collective. Rank 0 creates `stage_dir`, takes its lock, recording a new job token in it
// (InvalidInput when another job holds it or reads it, or when ranks of an earlier job are still
// running there; skipped with a warning when options.file_locking is false), plans the action (a
// directory that is stale, or whose recorded inputs changed, starts afresh), on kFresh replacing
// an earlier run marks every downstream stage directory made from it stale (lineage.h), empties
// the directory and writes run.json (with the inputs' lineage records) and config.ini. The action
// and token are broadcast; every rank then holds .ranks.lock shared. Keep the returned state
// alive until the stage ends. Errors keep their type on every rank.
StageState prepare_stage(Comm& comm, const std::string& stage, const std::string& stage_dir,
                         const std::string& config_ini, const std::string& config_fingerprint,
                         const StageOptions& options, const nlohmann::json& run_fields = {},
                         const StageLinks& links = {});

// Not collective. Whether the job with `job_token` still holds `stage_dir`: .lock records that
// token and (unless this process is the lock holder) another process holds the lock. False once
// rank 0 is gone or another job has taken the directory over: the rank must then stop without
// writing anything more.
bool job_holds_run(const std::string& stage_dir, const std::string& job_token, bool lock_holder);

}  // namespace tessera
