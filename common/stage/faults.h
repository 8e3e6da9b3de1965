// Fault injection: the one seam through which tests make a stage fail the way a cluster does (a
// rank killed mid-work, an I/O error, a full disk, slow storage, a pause before the marker).
// patchgen, embed and ingest add the same hidden --debug-* options (add_fault_options, shown by
// --help-all only, never saved in config.ini nor fingerprinted), read them into
// StageOptions::faults, and call Faults at their work points (--debug-file-size-limit takes effect
// in patchgen only); aggregate, query and serve have none. In production every field keeps its
// default and the seam does nothing.
#pragma once

#include <cstdint>

#include "common/core/options.h"

namespace tessera {

struct Faults {
  int kill_rank = -1;         // the rank that fails ...
  int64_t kill_after = -1;    // ... after this many units of work (patches, embeddings, vectors)
  bool fail_io = false;       // ... by an injected IoError instead of SIGKILL
  int64_t file_size_limit = 0;     // > 0: RLIMIT_FSIZE of the rank's work (a full disk)
  double slow_io_s = 0;            // seconds slept at every work point (slow storage)
  double pause_before_marker = 0;  // seconds a rank sleeps between its outputs and its marker

  // How many of the next `n` units rank `rank` may do, having done `done`: n, or fewer when its
  // failure point falls inside them, so a stage can stop exactly there.
  int64_t allowed(int rank, int64_t done, int64_t n) const;

  // Called by rank `rank` after `done` units of `unit` ("patches", ...): sleeps slow_io_s, and
  // when the failure point is reached raises SIGKILL (the process ends here) or throws IoError.
  void point(int rank, int64_t done, const char* unit) const;

  // Applies file_size_limit to this process, if set; writes beyond it then fail with EFBIG
  // (SIGXFSZ is ignored). Throws IoError when the limit cannot be set.
  void apply_file_size_limit() const;
};

// Adds the fault-injection options (kDebug) under one group, `unit` naming what kill-after counts.
void add_fault_options(OptionTable& table, const char* unit);

// Reads them back from parsed options.
Faults faults_from(const po::variables_map& values);

}  // namespace tessera
