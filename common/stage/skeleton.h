// The one sequence every stage of the graph runs (stage_graph() in layout.cpp: patchgen, embed,
// aggregate, ingest, and ingest --level slide|patient too): run layout, lock, the
// fresh/resume/complete decision, set-up, rank work, markers, barrier, rank 0's finish, _SUCCESS,
// and one exit code for all ranks. A stage plugs its work in through StageWork; everything
// around it lives here once.
//
//   prepare_stage (rank 0 locks, decides, broadcasts)
//     complete (and no refinish_reason) -> every rank returns _SUCCESS's exit code
//   work.setup(comm)                          collective; expensive set-up happens only here
//   this rank's marker valid (resume)?  skip : work.rank_work() -> seal outputs -> marker
//   barrier (waiting ranks sleep, they do not spin)
//   rank 0 checks every marker
//   work.finish(comm, markers)                collective; rank 0 returns the summary
//   rank 0 writes _SUCCESS; the exit code is broadcast
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/mpi/comm.h"
#include "common/stage/layout.h"
#include "common/stage/marker.h"
#include "common/stage/stage_options.h"

namespace tessera {

// What the skeleton needs to know about a stage invocation.
struct StageRun {
  std::string stage;        // "patchgen", "embed", "aggregate", "ingest"
  std::string dir;          // the stage directory (of this part)
  std::string config_ini;   // saved as config.ini on a fresh start
  std::string fingerprint;  // what the outputs depend on
  StageOptions options;
  nlohmann::json run_fields;  // extra fields for run.json and _SUCCESS (part, parts, inputs)
  // The run it belongs to and the stage directories it reads: recorded in run.json, so that a
  // fresh start of any of them marks this one stale, and a change to them is noticed on use.
  StageLinks links;
  // Rank 0, when the directory is complete for this configuration: why work.finish() must run
  // again (what it wrote outside the directory is gone or stale, as ingest's catalog.json), or ""
  // to leave it complete. The stage then resumes: valid rank outputs are kept, finish() runs and
  // _SUCCESS is rewritten. Not set: never.
  std::function<std::string()> refinish_reason;
};

// What a rank's work needs from the skeleton.
struct RankContext {
  int rank = 0;
  int world_size = 1;
  std::string dir;        // the stage directory
  std::string job_token;  // this job's identity
  // Where the rank writes its output `relative` (to the stage directory): a name of this job's
  // own, moved into place by the skeleton once the work is done and the job still holds the
  // directory, so a rank orphaned by a killed job never replaces another job's outputs.
  std::string staging_path(const std::string& relative) const;
};

// The outputs of one rank: files closed and written at RankContext::staging_path(relative), listed
// by their relative paths, plus stage-specific marker fields (rows, stats, ...).
struct RankResult {
  std::vector<std::string> outputs;
  nlohmann::json fields = nlohmann::json::object();
};

class StageWork {
 public:
  virtual ~StageWork() = default;
  // Collective. Runs once the skeleton has decided there is work (fresh or resumed), before any
  // rank's work: detection plans, loading a model. Returns an exit code to end the stage early on
  // every rank (the same on all ranks), or nullopt to go on.
  virtual std::optional<int> setup(Comm& comm, StageAction action) = 0;
  // Not collective. This rank's work; called only when its marker is missing or invalid. Output
  // files must be closed when it returns; the skeleton checks that the job still holds the
  // directory, moves them into place, makes them durable and writes the marker.
  virtual RankResult rank_work(const RankContext& context) = 0;
  // Collective, after every rank's marker is written. `markers` holds every rank's marker on rank
  // 0 (checked by the skeleton) and is empty elsewhere. Rank 0 returns the stage's summary fields
  // (with "exit_code" when not 0). Every rank may return "outputs": the files it wrote outside
  // rank_work (consolidated files, plans, per-slide files), relative to the stage directory and
  // closed; the skeleton seals them (fsync, hashes) and lists them in _SUCCESS, where readers
  // check them like rank outputs. Other fields of other ranks are ignored.
  virtual nlohmann::json finish(Comm& comm, const std::vector<nlohmann::json>& markers) = 0;
};

// Collective. Runs the stage and returns its exit code, the same on every rank. Errors are thrown
// (the MPI entry point turns them into an exit code and ends the job); one thrown after the
// directory is taken is first recorded there by the rank that threw (failure.h), for
// tessera-status.
int run_stage(Comm& comm, const StageRun& run, StageWork& work);

// Collective. Checks a completed stage directory that this stage reads (patchgen's for embed,
// embed's for ingest and aggregate, aggregate's for ingest --level slide|patient) before any
// work: _SUCCESS and run.json exist, it is not stale and its own inputs did not change since it
// was made (lineage.h), and every rank marker and the outputs it lists, and the outputs _SUCCESS
// lists, pass their checks at `level` (kCheap: sizes and the files' two ends; kFull: every byte,
// shared out over the ranks). Throws InvalidInput naming the
// directory when it is not complete or is stale, IoError naming the damaged file otherwise.
// Returns its run.json.
nlohmann::json check_stage_input(Comm& comm, const std::string& stage_dir, VerifyLevel level);

// Not collective. The damage check of check_stage_input for a reader in one process (query's
// slide-level index): "" when every rank marker of the completed `stage_dir` (by its run.json) and
// the outputs it lists, and the outputs _SUCCESS lists, pass their checks at `level`; else the
// first problem, naming the file. Completeness and staleness are the caller's to check.
std::string stage_outputs_problem(const std::string& stage_dir, VerifyLevel level);

// Not collective. The same for the rank markers of `stage_dir` and the outputs they list only
// (embed's shards, which embeddings.h5 reads through), and, when `finish_file` is not "", the one
// output of _SUCCESS of that name (an error when _SUCCESS does not list it).
std::string rank_outputs_problem(const std::string& stage_dir, VerifyLevel level,
                                 const std::string& finish_file = "");

// Not collective. The check of one output that the _SUCCESS of `stage_dir` lists (`relative`, as
// listed) at `level`: "" when it passes, else the reason naming the file (also when _SUCCESS is
// missing or does not list it).
std::string finish_output_problem(const std::string& stage_dir, const std::string& relative,
                                  VerifyLevel level);

// Collective. Rank 0 holds `stage_dir`'s lock shared while the returned lock lives, so that no
// job replaces an input while this stage reads it (no-op when options.file_locking is false).
// Throws InvalidInput on every rank when a job is writing it.
std::optional<FileLock> hold_input(Comm& comm, const std::string& stage_dir,
                                   const StageOptions& options);

// Not collective. For a stage that needs every part of an earlier one (ingest over embed's
// parts): the part directories under `root` (of `parts`) that are not complete, i.e. have no
// _SUCCESS, are marked stale, or do not exist; empty when all are complete.
std::vector<std::string> incomplete_parts(const std::string& root, int parts);

// Throws InvalidInput listing every incomplete part of `root` (from incomplete_parts), with what
// to run; returns when all `parts` parts are complete.
void require_all_parts(const std::string& root, int parts);

// Not collective. The marker of `rank` in `stage_dir`.
std::string marker_path(const std::string& stage_dir, int rank);

}  // namespace tessera
