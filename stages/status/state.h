// The rows of tessera-status and the rules that give each stage directory its state from the
// files in it (skeleton.h's run.json, _SUCCESS, _STALE, markers and locks, lineage.h's records).
// Every function reads files only; none is collective.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/stage/failure.h"

namespace tessera::status {

// Exit code of tessera-status when some stage directory is not complete (0: all complete; 2: no
// such run directory or bad options; 1: an error reading it).
inline constexpr int kExitNotComplete = 4;

// The largest world size a run.json or _SUCCESS may name; a larger one (or one below 1) marks the
// file damaged, so that a corrupt number costs nothing to scan or print.
inline constexpr int kMaxWorldSize = 1 << 20;

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

// One stage directory (one part of a stage, one ingest generation, one slide- or patient-level
// index). Optional fields are empty when the files do not tell (no _SUCCESS, no marker).
struct StageStatus {
  std::string stage;  // a stage of the graph: "patchgen", "embed", "aggregate", "ingest"
  // Stages named by --tag (embed): the folder's name. Others: the input taken in, when known
  // (aggregate, ingest: the embed tag; a slide-level index: the aggregate output).
  std::string tag;
  std::string name;   // stages named by --name (aggregate, ingest): the folder's name
  // aggregate: "slide" or "patient" (run.json); ingest: "patch" for generations, else the
  // slide- or patient-level index's (run.json); "" for other stages.
  std::string level;
  int part = 0;       // ingest: the generation (0 for a slide-level index)
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
  // Incomplete: why its last attempt failed (common/stage/failure.h), the lowest rank's record;
  // nullopt when none was recorded (a killed job, or a refusal before it took the directory).
  std::optional<StageFailure> failure;
  std::string next;     // the command that completes it, "" when none (complete, running)
  std::string problem;  // what could not be read or decided, "" when nothing
};

struct RunStatus {
  std::string run;  // absolute
  // Every stage of the graph in chain order (patchgen parts, embed tags by name and their parts,
  // aggregate outputs by name, ingest names by name and their generations or their slide-level
  // index).
  std::vector<StageStatus> stages;
  // Commands in the order to run them: the stages' `next`, then an ingest for every embed tag
  // that is complete and not ingested anywhere, then a slide-level ingest for every complete
  // aggregate output that no index takes in.
  std::vector<std::string> next;
  // Running `serve` processes registered in RUN/serve/<name>.json (index, host, port, url, pid, ...);
  // on this host only those whose process is alive, on other hosts every one.
  std::vector<nlohmann::json> services;
};

// 0 when every row is complete (with or without failures), kExitNotComplete otherwise.
int exit_code(const RunStatus& status);

// True for a slide- or patient-level index (ingest --level slide|patient): one stage directory at
// RUN/ingest/<name> itself, no generations.
bool is_vector_index(const StageStatus& s);

// Reads the stage directory `s.dir` into `s` (stage, names, part and dir already set): state,
// ranks, counts, times, progress and problem; `next` is left to next.h. The state, by
// precedence: stale (_STALE, or an input changed since: lineage.h), running (.ranks.lock held
// elsewhere), incomplete (run.json damaged), complete or complete with failures (_SUCCESS and its
// exit code), incomplete (run.json), missing (no run.json; no directory). Ranks and rows come
// from _SUCCESS when complete, else from the markers that pass the cheap check a rerun makes.
// Rows: _SUCCESS rows, patches (patchgen, embed) or vectors (aggregate). An empty `s.tag` of a
// named stage is taken from run.json's "tag" (ingest --level slide|patient: "slides"), an empty
// `s.level` from run.json's "level".
void read_stage_dir(StageStatus& s);

// A slide- or patient-level index is served only with its slide_catalog.json (written by rank 0
// before _SUCCESS): complete without it is incomplete, with why in `problem`; a rerun finds the
// directory complete, so its next command starts it afresh (next.h).
void require_slide_catalog(StageStatus& index);

// An ingest generation is served only once catalog.json lists it (ingest writes the catalog
// after the generation's _SUCCESS): rows of `generations` that are complete but whose generation
// is not in `listed` become incomplete, with why in `problem` (`catalog_read` false: the catalog
// is missing or damaged, `catalog_problem` says which).
void require_listed_generations(std::vector<StageStatus>& generations, const std::set<int>& listed,
                                bool catalog_read, const std::string& catalog_problem);

}  // namespace tessera::status
