// The options every stage shares for running on a cohort: which part of the cohort (Slurm job
// arrays), how completed outputs are checked on reruns, file locking, and --overwrite. Added to
// each stage's option table by add_stage_options and read back by stage_options_from.
#pragma once

#include <map>
#include <string>

#include "common/core/options_fwd.h"
#include "common/stage/faults.h"

namespace tessera {

// How much a rerun reads to accept an output that a marker calls complete.
enum class VerifyLevel {
  kCheap,  // marker fields, file sizes and an XXH3 of each file's first and last 64 KiB
  kFull    // the above plus an XXH3 of every byte of every output
};

struct StageOptions {
  int part = 0;    // this invocation's part of the cohort: slide j belongs to part j mod parts
  int parts = 1;
  VerifyLevel verify = VerifyLevel::kCheap;
  bool file_locking = true;  // false only on file systems mounted without lock support
  bool overwrite = false;
  Faults faults;  // fault injection for tests (the hidden --debug-* options)
};

// Adds --part, --parts, --verify, --file-locking and --overwrite.
void add_stage_options(po::options_description& desc);

// Reads the stage options. --part/--parts default from a Slurm job array when `env` holds
// SLURM_ARRAY_TASK_ID (part = id - SLURM_ARRAY_TASK_MIN, parts = MAX - MIN + 1; arrays with a
// step or fewer tasks than that span are refused, since parts must be 0..P-1). Throws
// InvalidInput naming the option for out-of-range values or an inconsistent array.
StageOptions stage_options_from(const po::variables_map& values,
                                const std::map<std::string, std::string>& env);

// The process environment's SLURM_ARRAY_* variables, for stage_options_from.
std::map<std::string, std::string> slurm_array_environment();

// "cheap" / "full".
const char* to_string(VerifyLevel level);

// Throws InvalidInput naming --`option` unless `value` is a safe folder name (is_safe_slide_id) of
// at most kMaxNameLength characters: tags and output names become folders of the run.
void require_folder_name(const char* option, const std::string& value);

}  // namespace tessera
