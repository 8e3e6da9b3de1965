// What a finished ingest generation adds to the index's catalog, and the names of the files a
// generation holds (relative to its folder, RUN/ingest/<name>/gen-NNNNN).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/vector/catalog.h"
#include "stages/ingest/config.h"
#include "stages/ingest/generation.h"
#include "stages/ingest/sources.h"

namespace tessera::ingest {

// What rank 0 knows of the generation it finishes.
struct GenerationBuilt {
  std::string out;          // the index folder, RUN/ingest/<name>
  std::string dir;          // the generation folder in it
  std::string fingerprint;  // of the generation's configuration
  int dim = 0;
  int default_nprobe = 0;
  std::string now;          // UTC timestamp of the update
};

// The catalog with generation `decision.generation` added: the one it extends
// (`decision.previous`), or a new one with `config`'s settings for generation 0; a segment per
// shard from the ranks' markers (each lists the shards it wrote and their sealed files), and the
// embed parts taken in. Throws Error when no marker reports some shard.
Catalog with_generation(const Config& config, const Decision& decision,
                        const std::vector<Source>& sources,
                        const std::vector<nlohmann::json>& markers, const GenerationBuilt& g);

}  // namespace tessera::ingest
