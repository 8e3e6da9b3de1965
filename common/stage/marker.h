// Completion markers and stage run directories, shared by every stage.
//
// A stage directory (RUN/patchgen, RUN/embed/<tag>, ...) holds:
//   run.json              stage, config fingerprint, world size, version: what the outputs are of
//   config.ini            the effective configuration (feed it back with --config)
//   .lock                 fcntl lock held by rank 0 while the stage runs
//   markers/rank-NNNNN.json  one per rank, written atomically after its shard is closed
//   _SUCCESS              JSON summary, written last by rank 0
// A rank's output counts as complete only when its marker exists, matches the configuration and
// world size, and the file it names has the recorded size and SHA-256.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/mpi/comm.h"
#include "common/core/fs.h"

namespace tessera {

// Fields every marker carries: stage, rank, world_size, config_fingerprint, version,
// git_revision, host, pid. Stage code adds counts, file, file_bytes, file_sha256, times.
nlohmann::json marker_base(const std::string& stage, int rank, int world_size,
                           const std::string& config_fingerprint);

struct MarkerCheck {
  bool valid = false;
  std::string reason;      // why not valid ("missing", "file size differs", ...)
  nlohmann::json marker;   // the parsed marker when it could be read
};

// Checks the marker at `marker_path` against the expected fingerprint and world size, and the file
// it names (`file`, relative to `stage_dir`) against `file_bytes` and, with verify_hash,
// `file_sha256` (which reads the whole file). Never throws for invalid or missing markers: that
// is an expected outcome.
MarkerCheck check_marker(const std::string& marker_path, const std::string& stage_dir,
                         const std::string& config_fingerprint, int world_size,
                         bool verify_hash = true);

enum class StageAction {
  kFresh,    // start from an empty stage directory
  kResume,   // same configuration and world size: keep valid rank outputs, redo the rest
  kComplete  // _SUCCESS exists for this configuration: nothing to do
};

// Decides what to do with an existing stage directory (pure). `existing` is its run.json, if any.
// Throws InvalidInput naming the directory and what differs when the configuration or world size
// differ and `overwrite` is false.
StageAction plan_stage(const std::string& stage_dir, const std::optional<nlohmann::json>& existing,
                       bool success_exists, const std::string& config_fingerprint, int world_size,
                       bool overwrite);

struct StageState {
  StageAction action = StageAction::kFresh;
  std::optional<FileLock> lock;  // held by rank 0 only
};

// Fields every _SUCCESS summary starts with: stage, world_size, config_fingerprint, version,
// git_revision, start_time (given) and end_time (now). Stage code adds its counts.
nlohmann::json summary_base(const std::string& stage, int world_size,
                            const std::string& config_fingerprint, const std::string& start_time);

// On a resumed stage, whether this rank's output is already complete (its marker is valid);
// logs the decision. Always false for a fresh stage.
bool rank_output_complete(StageAction action, const std::string& marker_path,
                          const std::string& stage_dir, const std::string& config_fingerprint,
                          int world_size);

// Collective. Rank 0 creates `stage_dir`, takes its lock (InvalidInput when another run holds it),
// plans the action, on kFresh empties the directory and writes run.json and config.ini; the
// action is broadcast to all ranks. Rank 0 must keep the returned lock alive until it is done.
StageState prepare_stage(Comm& comm, const std::string& stage, const std::string& stage_dir,
                         const std::string& config_ini, const std::string& config_fingerprint,
                         bool overwrite);

}  // namespace tessera
