// Why the last attempt at a stage directory failed, for tessera-status: failures/rank-NNNNN.json,
// written by a rank whose work threw after the skeleton took the directory (run_stage, after
// prepare_stage), removed by that rank when its next attempt starts and, all of them, by rank 0
// with _SUCCESS. A refusal before the directory is taken (another configuration, a job running
// there, invalid options) writes nothing. Every function here is not collective.
#pragma once

#include <string>
#include <vector>

namespace tessera {

inline constexpr const char* kFailureDir = "failures";

struct StageFailure {
  int rank = 0;
  int exit_code = 1;    // the exit code the error maps to (2: invalid input)
  std::string message;  // the error's message, as logged
  std::string time;     // UTC, ISO 8601
};

// failures/rank-NNNNN.json of `stage_dir`.
std::string failure_path(const std::string& stage_dir, int rank);

// Writes `failure` to failure_path(stage_dir, failure.rank) through a temporary file renamed into
// place. Never throws: a record that cannot be written is logged as a warning (the error it
// describes is what the caller reports).
void record_failure(const std::string& stage_dir, const StageFailure& failure) noexcept;

// Removes the record of `rank`; rank < 0: every record (the failures/ folder). Never throws.
void clear_failures(const std::string& stage_dir, int rank) noexcept;

// Every readable record of `stage_dir` with rank < world_size, by rank; files that do not parse
// are skipped (a record is a hint, never a reason to fail).
std::vector<StageFailure> read_failures(const std::string& stage_dir, int world_size);

}  // namespace tessera
