// serve's configuration: the option table and the typed Config that run() takes.
#pragma once

#include <cstdint>
#include <string>

#include "common/core/options_fwd.h"
#include "common/stage/stage_options.h"

namespace tessera::serve {

// The limits every request is held to (docs/operations.md, "serve").
struct Limits {
  int max_k = 1000;                        // k per search
  size_t max_body_bytes = 8u << 20;        // request body (an uploaded image fits)
  size_t max_filter_chars = 4096;          // a filter expression
  int max_batch = 256;                     // searches gathered into one collective round
  double request_timeout_s = 30;           // a search waits at most this long for its round
  int64_t max_heatmap_patches = 2000000;   // patches of one slide scored by a heatmap
  double header_timeout_s = 10;            // a request's head, from its first byte
  int max_connections = 1000;              // open at once; beyond, the longest waiting is dropped
};

struct Config {
  std::string index;                 // RUN/ingest/<name>: the directory of catalog.json
  std::string bind = "127.0.0.1";
  int port = 8470;                   // 0: any free port (printed and registered)
  std::string token_file;            // bearer token; required for a non-loopback bind
  int http_threads = 64;             // requests answered at once (connections wait without one)
  double tick_ms = 0;                // how long rank 0 waits for more searches before a round
  double poll_s = 10;                // catalog.json checked for a new generation (0: SIGHUP only)
  size_t tile_cache_bytes = size_t{256} << 20;  // encoded DeepZoom tiles kept
  int threads = 0;                   // search threads per rank (0: the CPU affinity's cores)
  bool mmap = true;
  int rerank = 4;                    // compressed indexes: candidates re-ranked per hit (0: off)
  VerifyLevel verify = VerifyLevel::kCheap;
  std::string slide_index = "auto";  // slide/patient indexes: auto | none | DIR[,DIR...]
                                     // (slide_indexes.h)
  std::string web_dir;               // the page's files ("" : the built-in location)
  std::string registry_dir;          // where the service registers itself ("": RUN/serve)
  Limits limits;
};

OptionTable option_table();

// Throws InvalidInput naming the option for out-of-range values, and for a non-loopback --bind
// without --token-file.
Config config_from(const po::variables_map& values);

// True for 127.0.0.0/8, ::1 and "localhost".
bool is_loopback(const std::string& address);

inline constexpr const char* kUsage =
    "[mpirun -np R] serve --index RUN/ingest/NAME [--port 8470] [--bind 127.0.0.1] "
    "[--token-file F] [--slide-index auto|none|DIR[,DIR...]]";

}  // namespace tessera::serve
