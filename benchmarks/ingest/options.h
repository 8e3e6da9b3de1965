// ingest_bench's options: what it measures, how often and where (bench_options lists them with
// their defaults; benchmarks/ingest/main.cpp describes the driver).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/core/options_fwd.h"

namespace tessera::ingest_bench {

inline constexpr const char* kTag = "synthetic";  // the embed tag of the synthetic runs
inline constexpr int64_t kBlockRows = 16384;      // rows generated, read and added at a time

// One --sizes item D:N.
struct Size {
  int dim = 0;
  int64_t rows = 0;
};

struct Options {
  std::vector<Size> sizes;
  int slides = 0;
  int clusters = 0;
  double spread = 0;
  uint64_t seed = 0;
  std::vector<std::string> indexes;
  int64_t train_size = 0;
  int shards = 0;
  std::vector<int> ranks;
  int flat_reps = 0;
  int slow_reps = 0;
  bool skip_query = false;
  std::vector<std::string> query_indexes;
  std::vector<int> query_shards;
  std::vector<int> query_reranks;  // query --rerank values, each run of the query part
  int queries = 0;
  int single_queries = 0;
  double query_noise = 0;
  int k = 0;
  int threads = 0;
  std::string bin_dir;
  std::string mpirun;
  std::string scratch;
  std::string out;
  bool keep = false;
};

// The command-line options, with defaults. Index specs hold commas, so --indexes and
// --query-indexes separate them with ';' ("Flat;IVF1024,Flat;IVF1024,PQ48").
po::options_description bench_options();

// The options of a parsed command line. --threads 0 becomes the online cores, an empty
// --bin-dir the build folder above this executable, as root --allow-run-as-root joins --mpirun,
// and an empty --out SCRATCH/ingest_bench_<N of the first size>.json. Throws InvalidInput when
// --sizes is empty or malformed or has N < --slides, or a count is below 1.
Options options_from(const po::variables_map& values);

}  // namespace tessera::ingest_bench
