// ingest's configuration: the option table and the typed Config that run() takes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/core/options_fwd.h"
#include "common/stage/stage_options.h"
#include "stages/ingest/assign.h"

namespace tessera::ingest {

struct Config {
  std::string run;                 // run directory holding embed/<tag>/ and patchgen/
  std::string tag;                 // embed output taken in (RUN/embed/<tag>)
  std::string name;                // output folder RUN/ingest/<name>; default: the tag
  int shards = 1;                  // K
  std::string index = "Flat";      // FAISS index_factory string
  std::string metric = "ip";       // ip | l2
  bool normalize = false;          // unit-length vectors (cosine similarity with ip)
  Assign assign = Assign::kBySlide;
  int64_t train_size = 100000;     // vectors sampled to train an index that needs training
  uint64_t seed = 0;               // of that sample
  int64_t chunk_rows = 16384;      // rows read and added at a time
  int threads = 0;                 // FAISS threads per rank; 0 = the cores of its CPU affinity
  std::vector<int> embed_parts;    // parts taken in; empty = every part (--embed-parts all)
  bool append = false;             // add the parts completed since the last ingest
  std::string level = "patch";     // patch | slide | patient (slide_index.h)
  std::string slides;              // slide/patient level: RUN/slides/<slides>; "" = the only one
  StageOptions stage;              // verify, file locking, overwrite (part/parts unused)
  std::string config_ini;          // kResult and kRunControl options
  std::string fingerprint_ini;     // kResult options: what the outputs depend on
};

OptionTable option_table();

// Throws InvalidInput naming the option for out-of-range values.
Config config_from(const po::variables_map& values);

// "all" -> {}; "0,2,3" or "0-3" -> the listed parts, ascending and unique. Throws InvalidInput.
std::vector<int> parse_part_list(const std::string& text);

inline constexpr const char* kUsage =
    "mpirun -np R ingest --run RUN --tag T --shards K --index SPEC [options]";

}  // namespace tessera::ingest
