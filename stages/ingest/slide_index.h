// ingest --level slide|patient: an index of slide (or patient) vectors, from the cohort file of an
// aggregate output (RUN/slides/<name>/slides.h5 or patients.h5), with their ids, patients and
// labels, for query --similar-slide / --similar-patient. One FAISS index (a cohort has thousands
// of slides, not millions of patches), built by rank 0 in a stage directory of its own; its files
// (slide_catalog.json, the index, the entries, unit length with --normalize) are named, written
// and read by common/vector/slide_catalog.h.
#pragma once

#include "common/mpi/comm.h"
#include "stages/ingest/config.h"

namespace tessera::ingest {

// Collective. ingest at slide or patient level (config.level): reads RUN/slides/<config.slides>
// (the only aggregate output of that level when not named), builds RUN/ingest/<name> (default: the
// aggregate output's name). Returns the exit code, the same on every rank. Throws InvalidInput for
// a missing or incomplete aggregate output, an index string FAISS refuses, or a folder that holds
// a patch-level index; IoError for I/O failures.
int run_slide_level(const Config& config, Comm& comm);

}  // namespace tessera::ingest
