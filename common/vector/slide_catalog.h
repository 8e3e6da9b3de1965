// The slide-level index of `ingest --level slide|patient` (layout in docs/formats.md): one FAISS
// index of the slide (or patient) vectors of an aggregate output's cohort file, with the rows it
// holds, in a stage directory of its own. Written by ingest's rank 0, read by query
// (--similar-slide, --similar-patient) and serve; its names live here once.
//
//   RUN/ingest/<name>/   run.json config.ini markers/ _SUCCESS (the stage skeleton)
//     slide_catalog.json   what a reader needs (SlideCatalog); last before _SUCCESS
//     vectors.faiss        the index; ids are row numbers of entries.h5
//     entries.h5           the cohort file's rows as indexed (a cohort file, slide_vectors.h)
#pragma once

#include <cstdint>
#include <string>

#include "common/stage/stage_options.h"

namespace tessera {

inline constexpr const char* kSlideCatalogFile = "slide_catalog.json";
inline constexpr const char* kSlideVectorsFile = "vectors.faiss";
inline constexpr const char* kSlideEntriesFile = "entries.h5";
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
  std::string index_file = kSlideVectorsFile;
  std::string entries_file = kSlideEntriesFile;
  std::string path(const std::string& relative) const;  // dir / relative, normalised
};

// True when `dir` holds a slide_catalog.json.
bool has_slide_catalog(const std::string& dir);

// Writes DIR/slide_catalog.json atomically from `catalog` (its `dir` is not stored). Throws
// IoError naming the file.
void write_slide_catalog(const std::string& dir, const SlideCatalog& catalog);

// Reads DIR/slide_catalog.json. Throws InvalidInput when there is none ("run ingest --level slide
// first"), when the index is not complete (no _SUCCESS) or no longer matches its inputs (marked
// stale by aggregate --overwrite, or its aggregate output changed since: lineage.h); IoError when
// it is malformed or of another format version, or when a file of it fails its check at `level`
// (its markers and _SUCCESS: the index and entries are small, so the default reads every byte).
SlideCatalog load_slide_catalog(const std::string& dir, VerifyLevel level = VerifyLevel::kFull);

}  // namespace tessera
