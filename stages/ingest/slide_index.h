// ingest --level slide|patient: an index of slide (or patient) vectors, from the cohort file of an
// aggregate output (RUN/slides/<name>/slides.h5 or patients.h5), with their ids, patients and
// labels, for query --similar-slide / --similar-patient. One FAISS index (a cohort has thousands
// of slides, not millions of patches), built by rank 0 in a stage directory of its own:
//
//   RUN/ingest/<name>/   run.json config.ini markers/ _SUCCESS (the stage skeleton)
//     slide_catalog.json   what query needs (below); rank 0, last before _SUCCESS
//     vectors.faiss        the index; ids are row numbers of entries.h5
//     entries.h5           the cohort file's rows as indexed (unit length with --normalize)
#pragma once

#include <cstdint>
#include <string>

#include "common/mpi/comm.h"
#include "common/stage/stage_options.h"
#include "stages/ingest/config.h"

namespace tessera::ingest {

inline constexpr const char* kSlideCatalogFile = "slide_catalog.json";
inline constexpr int64_t kSlideCatalogFormatVersion = 1;

struct SlideCatalog {
  std::string dir;         // the directory of slide_catalog.json (not stored)
  std::string level;       // "slide" or "patient"
  std::string source;      // the aggregate output, relative to dir
  std::string index_spec;  // FAISS index_factory string
  std::string metric;      // "ip" or "l2"
  bool normalize = false;
  int dim = 0;
  int64_t rows = 0;
  std::string encoder;     // the aggregate's encoder name
  std::string index_file = "vectors.faiss";
  std::string entries_file = "entries.h5";
  std::string path(const std::string& relative) const;
};

// True when `dir` holds a slide_catalog.json.
bool has_slide_catalog(const std::string& dir);

// Reads DIR/slide_catalog.json. Throws InvalidInput when there is none ("run ingest --level slide
// first"), when the index is not complete (no _SUCCESS) or no longer matches its inputs (marked
// stale by aggregate --overwrite, or its aggregate output changed since: lineage.h); IoError when
// it is malformed or of another format version, or when a file of it fails its check at `level`
// (its markers and _SUCCESS: the index and entries are small, so the default reads every byte).
SlideCatalog load_slide_catalog(const std::string& dir, VerifyLevel level = VerifyLevel::kFull);

// Collective. ingest at slide or patient level (config.level): reads RUN/slides/<config.slides>
// (the only aggregate output of that level when not named), builds RUN/ingest/<name> (default: the
// aggregate output's name). Returns the exit code, the same on every rank. Throws InvalidInput for
// a missing or incomplete aggregate output, an index string FAISS refuses, or a folder that holds
// a patch-level index; IoError for I/O failures.
int run_slide_level(const Config& config, Comm& comm);

}  // namespace tessera::ingest
