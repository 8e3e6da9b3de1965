// serve's entry point: the index resident over the ranks, rank 0 answering HTTP, searches
// gathered into collective rounds (protocol.h), until SIGINT or SIGTERM.
#pragma once

#include <atomic>

#include "common/mpi/comm.h"
#include "stages/serve/config.h"

namespace tessera::serve {

// What makes the service reload or stop; the signal handlers of main() set them, tests may too.
struct Controls {
  std::atomic<bool> stop{false};
  std::atomic<bool> reload{false};
};

// Installs handlers that set `controls`: SIGHUP -> reload, SIGINT and SIGTERM -> stop.
void install_signal_handlers(Controls& controls);

// Collective. Loads each rank's shards, and on rank 0 the catalog view, the page and the HTTP
// server; then runs rounds until `controls.stop` (rank 0 decides; the other ranks follow its
// commands). A new generation of the index (catalog.json replaced by `ingest --append`) is loaded
// on SIGHUP or when the poll sees it, and swapped in between rounds; when its load fails on any
// rank the service keeps the old one. Returns 0 on every rank after a stop. Throws InvalidInput
// for a missing catalog or token file, IoError for damaged shards or a port that cannot be bound.
int run(const Config& config, Comm& comm, Controls& controls);

}  // namespace tessera::serve
