// ingest_bench: the stage-3 benchmark (ingest and query). For each size D:N of --sizes it
//   generate   writes a synthetic but valid RUN: patchgen/ (plans, a ShardWriter shard of 1-pixel
//              patches, index.h5 by patchgen::consolidate) and embed/synthetic/ (an
//              EmbeddingShardWriter shard, embeddings.h5 by embed::write_embeddings_file), both
//              through the real stage skeleton (run_stage), so markers and _SUCCESS are genuine.
//              Vectors are unit-length draws from a seeded mixture of Gaussians (--clusters
//              centres), a pure function of (seed, patch id), so IVF recall is meaningful.
//   ingest     per index spec and repetition, interleaved: a raw FAISS add of the same N rows
//              from memory (VectorIndex::create, train when needed, add; timed apart), then the
//              real `ingest` executable under `mpirun -np R` for every R of --ranks (K = --shards
//              shards), with wall time, rows/s in all and per rank (rank markers) and peak RSS
//              per rank (_SUCCESS).
//   query      (first size only) Q perturbed rows as query vectors (.npy), exact top-k from an
//              in-memory Flat index, then for K in --query-shards and each --query-index: ingest,
//              and the real `query` executable with --format json, batched (all queries per call)
//              and one by one (--batch-size 1, the first --single-queries queries), for every R:
//              recall@k against exact, latency p50/p99, QPS.
// This driver is a plain process, not an MPI rank: it starts mpirun itself (an MPI singleton
// starting mpirun is not supported by Open MPI), so it does not use mpi_main.
// Its parts: options.h, mixture.h (the vectors), synthetic_stages.h (generate), rows.h,
// measure.h (ingest and query parts, targets), launch.h (mpirun), recall.h, npy.h.
//
//   ingest_bench [--sizes 384:1000000,1536:250000] [--indexes Flat,IVF1024,Flat,IVF1024,PQ48]
//                [--ranks 1,2] [--shards 2] [--query-shards 1,4,8] [--scratch DIR] [--out FILE]
#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>

#include "benchmarks/bench_report.h"
#include "benchmarks/ingest/measure.h"
#include "benchmarks/ingest/mixture.h"
#include "benchmarks/ingest/options.h"
#include "benchmarks/ingest/rows.h"
#include "benchmarks/ingest/synthetic_stages.h"
#include "common/core/fs.h"

namespace tessera::ingest_bench {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The paper's Milvus ingest figures (rows/s), for scale.
constexpr double kMilvusOneNode = 22216;
constexpr double kMilvusEightNodes = 188020;

int bench_main(const po::variables_map& values, const json& command) {
  const Options o = options_from(values);
  make_directories(o.scratch);
  const std::string log = (fs::path(o.scratch) / "children.log").string();
  fs::remove(log);
  Report report;
  report.path = o.out;
  json params = {{"sizes", json::array()},
                 {"slides", o.slides},
                 {"vectors",
                  {{"kind", "unit-length rows of a Gaussian mixture (centre + noise, normalised)"},
                   {"clusters", o.clusters}, {"spread", o.spread}, {"seed", o.seed},
                   {"store_dtype", "fp32"}}},
                 {"metric", "ip"},
                 {"indexes", o.indexes},
                 {"train_size", o.train_size},
                 {"ingest_shards", o.shards},
                 {"ranks", o.ranks},
                 {"flat_reps", o.flat_reps},
                 {"slow_reps", o.slow_reps},
                 {"query_indexes", o.query_indexes},
                 {"query_shards", o.query_shards},
                 {"threads_total", o.threads},
                 {"threads_note", "raw add and one-process runs use threads_total FAISS threads; "
                                  "with R ranks each rank gets threads_total / R"},
                 {"launcher", o.mpirun + " -np R"},
                 {"bin_dir", o.bin_dir},
                 {"scratch", o.scratch}};
  for (const Size& s : o.sizes) params["sizes"].push_back({{"dim", s.dim}, {"rows", s.rows}});
  report.doc = {{"benchmark", "ingest"},
                {"date", utc_timestamp()},
                {"command_line", command},
                {"machine", bench::machine_info()},
                {"versions", bench::versions()},
                {"load_average", {{"start", bench::load_average()}}},
                {"parameters", params},
                {"milvus_reference_rows_per_s",
                 {{"one_node", kMilvusOneNode}, {"eight_nodes", kMilvusEightNodes},
                  {"source", "the paper's Milvus ingest figures"}}},
                {"sizes", json::array()}};
  for (size_t i = 0; i < o.sizes.size(); ++i) {
    const Size& size = o.sizes[i];
    const std::string run = (fs::path(o.scratch) / fmt::format("run-d{}-n{}", size.dim, size.rows)).string();
    const Mixture mixture(o.seed, o.clusters, size.dim, o.spread);
    report.doc["sizes"].push_back({{"dim", size.dim}, {"rows", size.rows}});
    json& section = report.doc["sizes"].back();
    section["generate"] = generate(o, size, mixture, run);
    section["ingest"] = json::array();
    report.save();
    Rows rows = read_rows(run);
    measure_ingest(o, rows, run, o.scratch, log, report, section);
    if (i == 0 && !o.skip_query) measure_query(o, mixture, rows, run, o.scratch, log, report, section);
    // Rows/s next to Milvus: the best median of Flat over the rank counts.
    for (const auto& e : section["ingest"]) {
      json m = json::object();
      for (int ranks : o.ranks) {
        const std::string key = "np" + std::to_string(ranks);
        const double rps = median_of(e["repetitions"], [&](const json& r) {
          return r["ingest"][key]["rows_per_s"].get<double>();
        });
        m[key] = {{"rows_per_s", rps}, {"vs_milvus_one_node", rps / kMilvusOneNode}};
      }
      section["vs_milvus"][e["index"].get<std::string>()] = m;
    }
    if (!o.keep) remove_tree(run);
    report.save();
  }
  report.doc["targets"] = targets(o, report.doc["sizes"]);
  report.doc["load_average"]["end"] = bench::load_average();
  report.doc["resources"] = bench::resource_usage();
  report.save();
  spdlog::info("report '{}'", o.out);
  std::cout << report.doc["targets"].dump(2) << "\n";
  return 0;
}

}  // namespace
}  // namespace tessera::ingest_bench

int main(int argc, char** argv) {
  namespace ib = tessera::ingest_bench;
  namespace po = tessera::po;
  try {
    const auto desc = ib::bench_options();
    po::variables_map values;
    po::store(po::parse_command_line(argc, argv, desc), values);
    if (values.count("help")) {
      std::cout << desc << "\n";
      return 0;
    }
    po::notify(values);
    return ib::bench_main(values, tessera::bench::command_line(argc, argv));
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
