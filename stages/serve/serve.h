// serve's entry point: the index resident over the ranks, rank 0 answering HTTP, searches
// gathered into collective rounds (protocol.h), until SIGINT or SIGTERM.
#pragma once

#include <atomic>
#include <chrono>

#include "common/mpi/comm.h"
#include "stages/serve/config.h"

namespace tessera::serve {

// What makes the service reload or stop; the signal handlers of main() set them, tests may too.
struct Controls {
  std::atomic<bool> stop{false};
  std::atomic<bool> reload{false};
  std::atomic<int> stop_signal{0};  // the signal that set `stop`, 0 for none
};

// Installs handlers that set `controls`: SIGHUP -> reload, SIGINT and SIGTERM -> stop.
void install_signal_handlers(Controls& controls);

// For main() after run() returned `code` on a stop by SIGINT or SIGTERM. When the launcher stops
// the whole job (mpirun forwards the signal to every rank and SIGKILLs them a second later), its
// MPI_Finalize does not return: this starts a thread that flushes the log and ends the process
// with `code` when the process still runs kFinalizeBound later. Does nothing after a stop that no
// signal caused. Not collective.
void bound_finalize(const Controls& controls, int code);
constexpr auto kFinalizeBound = std::chrono::milliseconds(400);

// Collective. Loads each rank's shards, and on rank 0 the catalog view, the page and the HTTP
// server; then runs rounds until `controls.stop` (rank 0 decides; the other ranks follow its
// commands). A new generation of the index (catalog.json replaced by `ingest --append`) is loaded
// on SIGHUP or when the poll sees it, and swapped in between rounds; when its load fails on any
// rank the service keeps the old one; every search is answered by the generation its request
// started with. On a stop, searches already submitted are answered, later ones refused, the
// registration removed, and 0 returned on every rank. Throws InvalidInput
// for a missing catalog or token file, IoError for damaged shards or a port that cannot be bound.
int run(const Config& config, Comm& comm, Controls& controls);

}  // namespace tessera::serve
