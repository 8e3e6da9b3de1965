// ingest_bench's launches of the real executables: `ingest` and `query` under mpirun (this
// driver is a plain process, not an MPI rank: an MPI singleton starting mpirun is not supported
// by Open MPI), their outputs appended to a log, their figures read back from what they wrote.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks/ingest/options.h"

namespace tessera::ingest_bench {

// Runs the shell `command` with its output appended to `log`; returns its wall seconds. Throws
// Error naming the command and the log when it fails.
double run_command(const std::string& command, const std::string& log);

// `ingest --run RUN --name NAME --index SPEC --shards K --overwrite` on `ranks` ranks (threads
// o.threads / ranks each): wall time, rows/s in all and per rank, each rank's marker figures and
// peak RSS, and the catalog's default nprobe and shard index hashes.
nlohmann::json run_ingest(const Options& o, const std::string& run, const std::string& name,
                          const std::string& spec, int shards, int ranks, const std::string& log);

// `query --index RUN/ingest/NAME --vectors FILE --format json --rerank R` on `ranks` ranks,
// batched or one query per call (`single`): wall time, recall@k against `exact` (q x k), QPS and
// latency. `scratch` holds its result file meanwhile.
nlohmann::json run_query(const Options& o, const std::string& run, const std::string& name,
                         const std::string& vectors, int queries, int ranks, bool single,
                         int rerank,
                         const std::vector<int64_t>& exact, const std::string& scratch,
                         const std::string& log);

}  // namespace tessera::ingest_bench
