// tessera-status: what a run directory holds, stage by stage and part by part, and what to run
// next. Everything here reads files only (never writes, never takes a lock): it can run while jobs
// write the run directory, on a login node, from any working directory.
//
// A run directory's stage directories are found through the run layout and stage graph
// (common/stage/layout.h, docs/formats.md):
//   RUN/patchgen[/part-PPPPP-of-QQQQQ]
//   RUN/embed/<tag>[/part-PPPPP-of-QQQQQ]
//   RUN/slides/<name>
//   RUN/ingest/<name>/gen-NNNNN (+ catalog.json), or RUN/ingest/<name> itself for a slide- or
//   patient-level index (+ slide_catalog.json)
// Each is one StageStatus row; ingest generations play the part of parts (part = generation).
//
// The program in pieces: state.h (rows and the rules that give a directory its state), next.h
// (the commands to run next), scan.h (walking the run), render.h (table, --incomplete, --json).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "stages/status/render.h"
#include "stages/status/scan.h"
#include "stages/status/state.h"

namespace tessera::status {

// The tessera-status program: parses `args` (argv without the program name), writes the report
// to `out` and errors to `err`, returns the exit code (0, kExitNotComplete, 1 or 2).
int status_main(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace tessera::status
