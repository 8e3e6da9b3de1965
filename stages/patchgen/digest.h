// Content digests of a finished patchgen run, independent of the number of ranks that wrote it:
// used by tests (R = 1, 2, 3 give the same digest) and benchmark reports (output hash).
#pragma once

#include <string>

namespace tessera::patchgen {

struct RunDigest {
  std::string index_sha256;   // patch_id, slide, coords, tissue columns and the slide table
  std::string pixels_sha256;  // every patch's decoded RGB bytes, in patch_id order
  int64_t patches = 0;
};

// Reads RUN/patchgen/index.h5 and the shards it points to. Not collective; reads every patch once.
// Throws IoError when the run is incomplete or unreadable.
RunDigest digest_run(const std::string& stage_dir);

}  // namespace tessera::patchgen
