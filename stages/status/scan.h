// Walking a run directory: every stage of the stage graph (common/stage/layout.h) in chain order,
// named stages by name, each stage directory one row (state.h) with its next command (next.h),
// then the services registered under RUN/serve. Reads only: never writes, never takes a lock.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/status/state.h"

namespace tessera::status {

// Scans run directory `run`. Not collective; reads only. Throws InvalidInput when `run` does not
// exist, is not a directory, or holds no folder of any stage of the graph. Problems with single
// files (unreadable JSON) are reported in the rows' `problem`, not thrown. The commands name the
// stages' executables as next.h's program_path finds them from `self_dir` (the folder of the
// running tessera-status; "" for bare names).
RunStatus scan_run(const std::string& run, const std::string& self_dir = "");

// The services registered in `dir` (RUN/serve, serve's registry.h), sorted by file name: on this
// host only those whose process is alive, from other hosts every one.
std::vector<nlohmann::json> running_services(const std::string& dir);

}  // namespace tessera::status
