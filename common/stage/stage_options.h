// The options stages share, declared once: the rerun options of every stage that writes a stage
// directory (how completed outputs are checked, file locking, --overwrite), the part options of
// the stages that run per part of the cohort (Slurm job arrays), and --verify alone for the
// programs that only read outputs (query, serve). Each is added to a stage's OptionTable by an
// add_* function, read back by the matching *_from function, and written to config.ini by
// stage_option_values.
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

// --verify (run control) with the default `level`, in the group `group`; `help` replaces the
// general help text when not null (a program that reads outputs only says what it checks).
void add_verify_option(OptionTable& table, const char* group, VerifyLevel level,
                       const char* help = nullptr);
// --verify's value; throws InvalidInput naming --verify unless cheap or full.
VerifyLevel verify_from(const po::variables_map& values);

// --verify (default cheap), --file-locking and --overwrite, in the group "Rerun control" (run
// control: in config.ini, not in the fingerprint). `overwrite_help` says what --overwrite replaces.
void add_rerun_options(OptionTable& table, const char* overwrite_help);
// --part and --parts, in the group "Cohort parts" (results: in config.ini and the fingerprint).
void add_part_options(OptionTable& table);

// The rerun options of `values` (part 0 of 1).
StageOptions rerun_options_from(const po::variables_map& values);

// The rerun and part options. --part/--parts default from a Slurm job array when `env` holds
// SLURM_ARRAY_TASK_ID (part = id - SLURM_ARRAY_TASK_MIN, parts = MAX - MIN + 1; arrays with a
// step or fewer tasks than that span are refused, since parts must be 0..P-1). Throws
// InvalidInput naming the option for out-of-range values or an inconsistent array.
StageOptions stage_options_from(const po::variables_map& values,
                                const std::map<std::string, std::string>& env);

// The canonical config.ini values of the rerun options, and of the part options when `parts`, into
// `values`. --overwrite is never saved as true: feeding config.ini back must not wipe the run it
// describes.
void stage_option_values(const StageOptions& options, bool parts,
                         std::map<std::string, std::string>& values);

// The process environment's SLURM_ARRAY_* variables, for stage_options_from.
std::map<std::string, std::string> slurm_array_environment();

// "cheap" / "full".
const char* to_string(VerifyLevel level);

// Throws InvalidInput naming --`option` unless `value` is a safe folder name (is_safe_slide_id) of
// at most kMaxNameLength characters: tags and output names become folders of the run.
void require_folder_name(const char* option, const std::string& value);

}  // namespace tessera
