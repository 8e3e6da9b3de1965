// ingest_bench's synthetic run: RUN/patchgen (plans, a shard of tiny patches, index.h5 by
// patchgen::consolidate) and RUN/embed/<kTag> (an embedding shard of mixture rows, embeddings.h5
// by embed::write_embeddings_file), both through the real stage skeleton (run_stage), so markers
// and _SUCCESS are genuine and the real ingest and query executables accept the run.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "benchmarks/ingest/mixture.h"
#include "benchmarks/ingest/options.h"

namespace tessera::ingest_bench {

// Writes the run for `size` into `run` (emptied first), in this process (one rank); returns the
// seconds of each stage, the rows, the bytes of the embedding shard and both fingerprints.
// Throws Error when a stage fails.
nlohmann::json generate(const Options& o, const Size& size, const Mixture& mixture,
                        const std::string& run);

}  // namespace tessera::ingest_bench
