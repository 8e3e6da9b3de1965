// aggregate's entry point: slide-level (or patient-level) vectors from a completed embed output.
// Reads RUN/embed/<tag>/ (every part) and the patch runs it was made from, and writes
// RUN/slides/<name>/: per slide (patient) TRIDENT's slide_features_<encoder>/<id>.h5 and a .pt
// tensor, written by rank i mod R for the i-th item; then rank 0 gathers the vectors into one
// cohort file (slides.h5 or patients.h5) and lists the items skipped for want of patches.
#pragma once

#include <string>
#include <vector>

#include "common/mpi/comm.h"
#include "common/stage/layout.h"  // kAggregateStage
#include "stages/aggregate/config.h"

namespace tessera::aggregate {

// Collective. Returns the exit code, the same on every rank: 0 on success (items without patches
// are skipped and listed, not failed), 3 when no item had patches (nothing to pool). Throws
// InvalidInput for a missing, incomplete or stale embed input, an unloadable slide encoder or
// settings that differ from an existing output (without --overwrite); IoError for damaged inputs
// and I/O failures. Reruns skip ranks with a valid marker; a complete output returns at once.
int run(const Config& config, Comm& comm);

// The embed part directories under `embed_root` (RUN/embed/<tag>): the directory itself when it
// is a stage directory (run.json), else its part-PPPPP-of-QQQQQ folders, all Q of which must be
// complete. Throws InvalidInput naming what is missing.
std::vector<std::string> embed_part_dirs(const std::string& embed_root);

// The only tag under RUN/embed when `tag` is empty, else `tag`. Throws InvalidInput when there
// is none or several.
std::string resolve_tag(const std::string& run, const std::string& tag);

}  // namespace tessera::aggregate
