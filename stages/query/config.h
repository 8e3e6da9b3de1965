// query's configuration: the option table and the typed Config that run() takes.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/core/options_fwd.h"
#include "common/stage/stage_options.h"

namespace tessera::query {

struct Config {
  std::string index;          // RUN/ingest/<tag>: the directory of catalog.json
  // Exactly one source of query vectors:
  std::optional<int64_t> patch;         // --patch ID: the stored embedding of a patch
  std::string slide;                    // --slide S --x X --y Y: the stored patch nearest
  int64_t x = -1, y = -1;               //   that level-0 point
  std::string vectors;                  // --vectors FILE[.npy|.h5[:/dataset]]
  std::string image;                    // --image FILE.png|jpg
  // Whole-slide search (slide_search.h):
  std::string similar_slide;            // --similar-slide S over a slide-level index
  std::string similar_patient;          // --similar-patient P over a patient-level index
  bool mosaic_vote = false;             // --slide S --mosaic-vote over the patch index
  double mosaic_percent = 5.0;          //   mosaic: this share of the slide's patches,
  int mosaic_min = 8;                   //   at least this many
  int k = 10;
  int nprobe = 0;                       // 0: the catalog's default
  int ef_search = 0;                    // 0: FAISS's default
  std::string filter;                   // metadata expression, applied inside the search
  bool exclude_same_slide = false;
  bool exclude_same_patient = false;
  std::string format = "table";         // table | csv | json
  std::string output;                   // results file ("" = standard output)
  std::string mosaic;                   // PNG of the query and its hits
  int batch_size = 0;                   // queries per round (0: query_batch_size decides)
  int threads = 0;                      // search threads (0: the cores of the CPU affinity)
  bool mmap = true;                     // map IVF lists / flat codes instead of reading them
  int rerank = 4;                       // compressed indexes: candidates re-ranked per hit (0: off)
  VerifyLevel verify = VerifyLevel::kFull;  // the files loaded, hashed once per load
  std::string device = "cpu";           // --image: where the model runs
};

OptionTable option_table();

// Throws InvalidInput naming the option for a missing or ambiguous query source and out-of-range
// values.
Config config_from(const po::variables_map& values);

inline constexpr const char* kUsage =
    "[mpirun -np R] query --index RUN/ingest/T (--patch ID | --slide S --x X --y Y | --slide S "
    "--mosaic-vote | --similar-slide S | --similar-patient P | --vectors F | --image F) -k N "
    "[--filter EXPR] [--format table|csv|json] [--mosaic OUT.png]";

}  // namespace tessera::query
