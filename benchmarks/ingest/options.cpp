#include "benchmarks/ingest/options.h"

#include <unistd.h>

#include <boost/program_options.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <sstream>
#include <type_traits>

#include "common/core/error.h"

namespace tessera::ingest_bench {

namespace {

namespace fs = std::filesystem;

template <typename T>
std::vector<T> split_list(const std::string& text, char sep) {
  std::vector<T> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, sep)) {
    if (item.empty()) continue;
    if constexpr (std::is_same_v<T, std::string>) {
      out.push_back(item);
    } else {
      out.push_back(static_cast<T>(std::stoll(item)));
    }
  }
  return out;
}

}  // namespace

po::options_description bench_options() {
  po::options_description desc("ingest_bench options");
  desc.add_options()
      ("help", "this help")
      ("sizes", po::value<std::string>()->default_value("384:1000000,1536:250000"),
       "D:N pairs: dimension and generated rows; the first one also runs the query part")
      ("slides", po::value<int>()->default_value(400), "synthetic slides (rows spread evenly)")
      ("clusters", po::value<int>()->default_value(1000), "Gaussian mixture components")
      ("spread", po::value<double>()->default_value(0.6),
       "norm of a row's noise relative to its (unit) centre, before normalisation")
      ("seed", po::value<uint64_t>()->default_value(1), "seed of the vectors")
      ("indexes", po::value<std::string>()->default_value("Flat;IVF1024,Flat;IVF1024,PQ48"),
       "index specs measured for ingest, separated by ';'")
      ("train-size", po::value<int64_t>()->default_value(50000), "ingest --train-size")
      ("shards", po::value<int>()->default_value(2), "ingest --shards K of the ingest part")
      ("ranks", po::value<std::string>()->default_value("1,2"), "mpirun -np values")
      ("flat-reps", po::value<int>()->default_value(3), "repetitions of Flat")
      ("slow-reps", po::value<int>()->default_value(1), "repetitions of indexes that train")
      ("skip-query", po::bool_switch(), "leave out the query part")
      ("query-indexes", po::value<std::string>()->default_value("Flat;IVF1024,Flat"),
       "index specs of the query part, separated by ';'")
      ("query-shards", po::value<std::string>()->default_value("1,4,8"), "K of the query part")
      ("query-reranks", po::value<std::string>()->default_value("4"),
       "query --rerank values measured (compressed indexes re-rank R x k candidates exactly; 0: "
       "off), separated by ','")
      ("queries", po::value<int>()->default_value(1000), "query vectors (batched runs)")
      ("single-queries", po::value<int>()->default_value(100),
       "queries of the one-by-one runs (--batch-size 1; the first ones of the batched set)")
      ("query-noise", po::value<double>()->default_value(0.1),
       "norm of the perturbation of a query row, relative to the row")
      ("k", po::value<int>()->default_value(10), "neighbours per query (recall@k)")
      ("threads", po::value<int>()->default_value(0),
       "cores of the machine to use (0: all online): FAISS threads of the raw add and of a "
       "one-process ingest or query; with R ranks each gets threads / R")
      ("bin-dir", po::value<std::string>()->default_value(""),
       "folder of the ingest and query executables (default: ../stages/{ingest,query} next to "
       "this executable)")
      ("mpirun", po::value<std::string>()->default_value("mpirun --bind-to none --mca btl self,vader"),
       "launcher prefix; -np R is appended (and --allow-run-as-root as root)")
      ("scratch", po::value<std::string>()->default_value("bench-out/ingest"),
       "scratch folder for the runs (removed at the end unless --keep)")
      ("out", po::value<std::string>()->default_value(""),
       "JSON report (default SCRATCH/ingest_bench_<N>.json)")
      ("keep", po::bool_switch(),
       "keep the generated runs and the last ingest output of each name (RUN/ingest/bench-npR, "
       "RUN/ingest/query-kK)");
  return desc;
}

Options options_from(const po::variables_map& v) {
  Options o;
  for (const auto& pair : split_list<std::string>(v["sizes"].as<std::string>(), ',')) {
    const size_t colon = pair.find(':');
    if (colon == std::string::npos) fail<InvalidInput>("invalid --sizes item '{}': expected D:N", pair);
    o.sizes.push_back({std::stoi(pair.substr(0, colon)), std::stoll(pair.substr(colon + 1))});
  }
  o.slides = v["slides"].as<int>();
  o.clusters = v["clusters"].as<int>();
  o.spread = v["spread"].as<double>();
  o.seed = v["seed"].as<uint64_t>();
  o.indexes = split_list<std::string>(v["indexes"].as<std::string>(), ';');
  o.train_size = v["train-size"].as<int64_t>();
  o.shards = v["shards"].as<int>();
  o.ranks = split_list<int>(v["ranks"].as<std::string>(), ',');
  o.flat_reps = v["flat-reps"].as<int>();
  o.slow_reps = v["slow-reps"].as<int>();
  o.skip_query = v["skip-query"].as<bool>();
  o.keep = v["keep"].as<bool>();
  o.query_indexes = split_list<std::string>(v["query-indexes"].as<std::string>(), ';');
  o.query_shards = split_list<int>(v["query-shards"].as<std::string>(), ',');
  o.query_reranks = split_list<int>(v["query-reranks"].as<std::string>(), ',');
  o.queries = v["queries"].as<int>();
  o.single_queries = std::min(v["single-queries"].as<int>(), o.queries);
  o.query_noise = v["query-noise"].as<double>();
  o.k = v["k"].as<int>();
  o.threads = v["threads"].as<int>();
  if (o.threads <= 0) o.threads = static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN));
  o.bin_dir = v["bin-dir"].as<std::string>();
  if (o.bin_dir.empty()) {
    o.bin_dir = fs::canonical("/proc/self/exe").parent_path().parent_path().string();
  }
  o.mpirun = v["mpirun"].as<std::string>();
  if (geteuid() == 0) o.mpirun += " --allow-run-as-root";
  o.scratch = fs::absolute(v["scratch"].as<std::string>()).lexically_normal().string();
  o.out = v["out"].as<std::string>();
  if (o.out.empty() && !o.sizes.empty()) {
    o.out = (fs::path(o.scratch) / fmt::format("ingest_bench_{}.json", o.sizes.front().rows)).string();
  }
  if (o.sizes.empty()) fail<InvalidInput>("--sizes is empty");
  for (const Size& s : o.sizes) {
    if (s.dim < 1 || s.rows < o.slides) {
      fail<InvalidInput>("invalid --sizes {}:{}: D >= 1 and N >= --slides", s.dim, s.rows);
    }
  }
  if (o.slides < 1 || o.clusters < 1 || o.flat_reps < 1 || o.slow_reps < 1 || o.queries < 1 ||
      o.k < 1 || o.shards < 1 || o.ranks.empty()) {
    fail<InvalidInput>("--slides, --clusters, --*-reps, --queries, --k, --shards must be >= 1 "
                       "and --ranks non-empty");
  }
  return o;
}

}  // namespace tessera::ingest_bench
