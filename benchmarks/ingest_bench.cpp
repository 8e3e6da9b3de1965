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
//
//   ingest_bench [--sizes 384:1000000,1536:250000] [--indexes Flat,IVF1024,Flat,IVF1024,PQ48]
//                [--ranks 1,2] [--shards 2] [--query-shards 1,4,8] [--scratch DIR] [--out FILE]
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <numeric>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "benchmarks/bench_report.h"
#include "benchmarks/synthetic_run.h"
#include "common/store/files.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/h5/h5.h"
#include "common/mpi/comm.h"
#include "common/stage/partition.h"
#include "common/stage/skeleton.h"
#include "common/store/embeddings.h"
#include "common/store/index.h"
#include "common/store/store.h"
#include "common/vector/vector_index.h"
#include "stages/embed/config.h"
#include "stages/embed/merge.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/consolidate.h"
#include "stages/patchgen/extract.h"
#include "stages/patchgen/manifest.h"
#include "stages/patchgen/plan.h"

namespace tessera::ingest_bench {
namespace {

namespace fs = std::filesystem;
using bench::Stopwatch;
using bench::splitmix64;
using bench::synthetic_manifest;
using bench::synthetic_plan;
using nlohmann::json;

constexpr const char* kTag = "synthetic";
constexpr double kPi = 3.14159265358979323846;
constexpr int64_t kBlockRows = 16384;  // rows generated, read and added at a time
// The paper's Milvus ingest figures (rows/s), for scale.
constexpr double kMilvusOneNode = 22216;
constexpr double kMilvusEightNodes = 188020;

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

// "Flat;IVF1024,Flat;IVF1024,PQ48": index specs hold commas, so the list uses semicolons.
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

Options options_from(const po::variables_map& v, const char* argv0) {
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
  (void)argv0;
  o.mpirun = v["mpirun"].as<std::string>();
  if (geteuid() == 0) o.mpirun += " --allow-run-as-root";
  o.scratch = fs::absolute(v["scratch"].as<std::string>()).lexically_normal().string();
  o.out = v["out"].as<std::string>();
  o.keep = v["keep"].as<bool>();
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

// ---- synthetic vectors: a pure function of (seed, patch id) ----

// Standard normal draws from a splitmix64 stream (Box-Muller, both values used).
class Normals {
 public:
  explicit Normals(uint64_t state) : state_(state) {}
  float next() {
    if (have_) {
      have_ = false;
      return spare_;
    }
    const double u1 = (static_cast<double>(splitmix64(state_++) >> 11) + 0.5) * 0x1.0p-53;
    const double u2 = (static_cast<double>(splitmix64(state_++) >> 11) + 0.5) * 0x1.0p-53;
    const double r = std::sqrt(-2 * std::log(u1));
    spare_ = static_cast<float>(r * std::sin(2 * kPi * u2));
    have_ = true;
    return static_cast<float>(r * std::cos(2 * kPi * u2));
  }

 private:
  uint64_t state_;
  float spare_ = 0;
  bool have_ = false;
};

class Mixture {
 public:
  Mixture(uint64_t seed, int clusters, int dim, double spread)
      : seed_(seed), clusters_(clusters), dim_(dim), spread_(static_cast<float>(spread)),
        centres_(static_cast<size_t>(clusters) * dim) {
    for (int c = 0; c < clusters; ++c) {
      Normals n(splitmix64(seed ^ 0xc0ffee) + static_cast<uint64_t>(c) * 0x100000000ULL);
      for (int j = 0; j < dim; ++j) centres_[static_cast<size_t>(c) * dim + j] = n.next();
    }
    l2_normalize(centres_.data(), clusters, dim);
  }
  int cluster_of(int64_t patch_id) const {
    return static_cast<int>(splitmix64(seed_ ^ splitmix64(static_cast<uint64_t>(patch_id))) % clusters_);
  }
  // Writes the unit-length row of `patch_id`, perturbed by `extra` more noise (queries) drawn
  // from stream `stream`.
  void row(int64_t patch_id, float* out, double extra = 0, uint64_t stream = 0) const {
    const float* c = centres_.data() + static_cast<size_t>(cluster_of(patch_id)) * dim_;
    Normals n(splitmix64(seed_ + 7 * static_cast<uint64_t>(patch_id)));
    const float scale = spread_ / std::sqrt(static_cast<float>(dim_));
    for (int j = 0; j < dim_; ++j) out[j] = c[j] + scale * n.next();
    l2_normalize(out, 1, dim_);
    if (extra > 0) {
      Normals q(splitmix64(seed_ ^ 0xfeed ^ splitmix64(stream)));
      const float s = static_cast<float>(extra) / std::sqrt(static_cast<float>(dim_));
      for (int j = 0; j < dim_; ++j) out[j] += s * q.next();
      l2_normalize(out, 1, dim_);
    }
  }
  int dim() const { return dim_; }

 private:
  uint64_t seed_;
  int clusters_;
  int dim_;
  float spread_;
  std::vector<float> centres_;
};

// ---- generate: patchgen and embed through the stage skeleton ----

class SyntheticPatchgen final : public StageWork {
 public:
  SyntheticPatchgen(const patchgen::Manifest& manifest, const patchgen::PartPlan& part,
                    const patchgen::Config& config, std::string dir, std::string fingerprint)
      : manifest_(manifest), part_(part), config_(config), dir_(std::move(dir)),
        fingerprint_(std::move(fingerprint)) {}

  std::optional<int> setup(Comm& comm, StageAction) override {
    make_directories((fs::path(dir_) / "plans").string());
    make_directories((fs::path(dir_) / "shards").string());
    for (size_t k = static_cast<size_t>(comm.rank()); k < manifest_.slides.size();
         k += static_cast<size_t>(comm.size())) {
      write_plan(patchgen::plan_path(dir_, manifest_.slides[k].slide_id),
                 synthetic_plan(0, static_cast<int>(k), part_.counts[k]), manifest_.slides[k],
                 fingerprint_);
    }
    comm.barrier();
    return std::nullopt;
  }

  RankResult rank_work(const RankContext& context) override {
    Stopwatch total;
    const patchgen::PatchOrder order = part_.order();
    const Partition partition(config_.partition, order.total(), context.world_size);
    patchgen::ExtractStats stats;
    stats.planned = partition.count(context.rank);
    const std::string file = patchgen::shard_file(context.rank);
    ShardWriter writer(context.staging_path(file), config_.layout, context.rank,
                       context.world_size);
    const std::vector<uint8_t> pixel(3 * config_.layout.patch_size * config_.layout.patch_size);
    std::optional<patchgen::SlidePlan> plan;
    int open = -1;
    for (int64_t j = 0; j < partition.count(context.rank); ++j) {
      const auto [position, ordinal] = order.locate(partition.global_index(context.rank, j));
      const int slide = part_.slides[position];
      if (open != position) {
        plan = synthetic_plan(0, slide, part_.counts[position]);
        open = position;
      }
      const patchgen::GridPatch& g = plan->patches[ordinal];
      writer.add(patchgen::make_patch_id(slide, ordinal), slide, g.x, g.y, g.tissue, pixel.data());
      ++stats.patches;
    }
    writer.close();
    stats.write_s = writer.write_seconds();
    stats.total_s = total.seconds();
    return {{file}, {{"rows", stats.patches}, {"stats", stats.to_json()}}};
  }

  json finish(Comm& comm, const std::vector<json>& markers) override {
    if (comm.rank() != 0) return {};
    return patchgen::consolidate(manifest_, part_, config_, dir_, fingerprint_, markers);
  }

 private:
  const patchgen::Manifest& manifest_;
  const patchgen::PartPlan& part_;
  const patchgen::Config& config_;
  std::string dir_;
  std::string fingerprint_;
};

class SyntheticEmbed final : public StageWork {
 public:
  SyntheticEmbed(const IndexInfo& info, const Mixture& mixture, const embed::Config& config,
                 json model, std::string dir, std::string fingerprint)
      : info_(info), mixture_(mixture), config_(config), model_(std::move(model)),
        dir_(std::move(dir)), fingerprint_(std::move(fingerprint)) {}

  std::optional<int> setup(Comm&, StageAction) override { return std::nullopt; }

  RankResult rank_work(const RankContext& context) override {
    Stopwatch total;
    make_directories((fs::path(dir_) / "shards").string());
    const Partition partition(config_.partition, info_.rows, context.world_size);
    const std::string file = "shards/" + rank_file_name(context.rank, ".h5");
    EmbeddingShardWriter writer(context.staging_path(file), mixture_.dim(),
                                config_.store_dtype == "fp16", context.rank, model_.dump());
    IndexReader index(info_.path);
    const int64_t first = partition.count(context.rank) ? partition.global_index(context.rank, 0) : 0;
    const int64_t count = partition.count(context.rank);
    std::vector<float> values;
    double values_s = 0, write_s = 0;
    for (int64_t at = first; at < first + count; at += kBlockRows) {
      const int64_t n = std::min(kBlockRows, first + count - at);
      const IndexRows rows = index.read_range(at, n);
      Stopwatch fill;
      values.resize(static_cast<size_t>(n) * mixture_.dim());
      for (int64_t i = 0; i < n; ++i) {
        mixture_.row(rows.patch_id[i], values.data() + static_cast<size_t>(i) * mixture_.dim());
      }
      values_s += fill.seconds();
      Stopwatch write;
      writer.append(rows.patch_id.data(), rows.slide.data(), rows.coords.data(), values.data(),
                    static_cast<size_t>(n));
      write_s += write.seconds();
    }
    writer.close();
    return {{file},
            {{"rows", writer.rows()},
             {"model", model_},
             {"stats", {{"values_s", values_s}, {"write_s", write_s}, {"total_s", total.seconds()}}}}};
  }

  json finish(Comm& comm, const std::vector<json>&) override {
    if (comm.rank() != 0) return {};
    const Partition partition(config_.partition, info_.rows, comm.size());
    embed::write_embeddings_file(info_, partition, mixture_.dim(), config_, model_, dir_,
                                 fingerprint_);
    return {{"tag", kTag},
            {"status", "completed"},
            {"exit_code", 0},
            {"patches", info_.rows},
            {"output_dim", mixture_.dim()},
            {"store_dtype", config_.store_dtype},
            {"source", "synthetic"},
            {"partition", config_.partition.to_string()},
            {"model", model_},
            {"patchgen_fingerprint", info_.config_fingerprint}};
  }

 private:
  const IndexInfo& info_;
  const Mixture& mixture_;
  const embed::Config& config_;
  json model_;
  std::string dir_;
  std::string fingerprint_;
};

// Writes RUN/patchgen and RUN/embed/synthetic for `size`; returns their timings and summaries.
json generate(const Options& o, const Size& size, const Mixture& mixture, const std::string& run) {
  SerialComm comm;
  remove_tree(run);
  make_directories(run);
  const std::string patchgen_dir = (fs::path(run) / "patchgen").string();
  const std::string embed_dir = (fs::path(run) / "embed" / kTag).string();
  const patchgen::Manifest manifest = synthetic_manifest(o.slides, run);
  patchgen::PartPlan part;
  for (int k = 0; k < o.slides; ++k) {
    part.slides.push_back(k);
    part.counts.push_back(size.rows / o.slides + (k < size.rows % o.slides ? 1 : 0));
    part.failed.push_back(0);
  }
  patchgen::Config pconfig;
  pconfig.patch_size = 8;
  pconfig.layout.patch_size = 8;
  pconfig.layout.encoding = "raw";
  pconfig.layout.chunk_patches = 1024;
  pconfig.partition = Partition::Spec::parse("contiguous", "--partition");
  const std::string pfingerprint = sha256_hex(
      fmt::format("ingest_bench patchgen slides={} rows={}", o.slides, size.rows));
  StageOptions stage;
  Stopwatch pwatch;
  SyntheticPatchgen pwork(manifest, part, pconfig, patchgen_dir, pfingerprint);
  if (run_stage(comm, {"patchgen", patchgen_dir, "# synthetic (ingest_bench)\n", pfingerprint,
                       stage, {{"part", 0}, {"parts", 1}}, {}},
                pwork) != 0) {
    fail<Error>("the synthetic patchgen stage failed");
  }
  const double patchgen_s = pwatch.seconds();
  const IndexInfo info = load_index_info(patchgen_dir);

  embed::Config econfig;
  econfig.tag = kTag;
  econfig.store_dtype = "fp32";
  econfig.partition = Partition::Spec::parse("contiguous", "--partition");
  const json model = {{"name", "synthetic-gaussian-mixture"}, {"output_dim", size.dim},
                      {"clusters", o.clusters}, {"spread", o.spread}, {"seed", o.seed}};
  const std::string efingerprint =
      sha256_hex("ingest_bench embed model = " + model.dump() + "\npatchgen = " +
                 info.config_fingerprint + "\n");
  Stopwatch ewatch;
  SyntheticEmbed ework(info, mixture, econfig, model, embed_dir, efingerprint);
  if (run_stage(comm, {"embed", embed_dir, "# synthetic (ingest_bench)\n", efingerprint, stage,
                       {{"part", 0}, {"parts", 1}}, {}},
                ework) != 0) {
    fail<Error>("the synthetic embed stage failed");
  }
  const double embed_s = ewatch.seconds();
  spdlog::info("generated {} rows of D = {} in {:.1f} s (patchgen {:.1f} s, embed {:.1f} s)",
               size.rows, size.dim, patchgen_s + embed_s, patchgen_s, embed_s);
  return {{"patchgen_s", patchgen_s},
          {"embed_s", embed_s},
          {"rows", info.rows},
          {"embeddings_bytes", file_size((fs::path(embed_dir) / "shards" / rank_file_name(0, ".h5")).string()).value_or(0)},
          {"patchgen_fingerprint", info.config_fingerprint},
          {"embed_fingerprint", efingerprint}};
}

// ---- measure ----

// Every row of embeddings.h5 with its patch ids, read as ingest reads them.
struct Rows {
  int dim = 0;
  std::vector<float> values;
  std::vector<int64_t> ids;
  int64_t count() const { return static_cast<int64_t>(ids.size()); }
};

Rows read_rows(const std::string& run) {
  h5::File file = h5::File::open((fs::path(run) / "embed" / kTag / kEmbeddingsFile).string(),
                                 h5::Mode::kRead);
  h5::Dataset values = file.open_dataset(embedding_names::kEmbeddings);
  h5::Dataset ids = file.open_dataset(embedding_names::kPatchId);
  Rows r;
  const auto dims = values.dims();
  const auto n = static_cast<int64_t>(dims.at(0));
  r.dim = static_cast<int>(dims.at(1));
  r.values.resize(static_cast<size_t>(n) * r.dim);
  r.ids.resize(static_cast<size_t>(n));
  for (int64_t at = 0; at < n; at += kBlockRows) {
    const int64_t m = std::min(kBlockRows, n - at);
    values.read_rows_as_floats(r.values.data() + static_cast<size_t>(at) * r.dim, at, m);
    ids.read_rows(r.ids.data() + at, at, m);
  }
  return r;
}

// A raw FAISS build from memory: create, train on an even sample of train_size rows when the
// index needs it, add every row in one call (the add alone is what ingest's rows/s is set
// against), write to scratch.
json raw_build(const Options& o, const std::string& spec, const Rows& rows,
               const std::string& scratch) {
  set_vector_threads(o.threads);
  bench::reset_peak_rss();
  VectorIndex index = VectorIndex::create(spec, rows.dim, Metric::kInnerProduct);
  double train_s = 0;
  if (!index.is_trained()) {
    const int64_t n = std::min(o.train_size, rows.count());
    const int64_t step = rows.count() / n;
    std::vector<float> sample(static_cast<size_t>(n) * rows.dim);
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(rows.values.data() + static_cast<size_t>(i * step) * rows.dim, rows.dim,
                  sample.data() + static_cast<size_t>(i) * rows.dim);
    }
    Stopwatch train;
    index.train(sample.data(), n);
    train_s = train.seconds();
  }
  Stopwatch add;
  index.add(rows.values.data(), rows.ids.data(), rows.count());
  const double add_s = add.seconds();
  const std::string path = (fs::path(scratch) / "raw.faiss").string();
  Stopwatch write;
  index.write(path);
  const double write_s = write.seconds();
  const auto bytes = file_size(path).value_or(0);
  fs::remove(path);
  spdlog::info("raw {} D={}: train {:.2f} s, add {:.2f} s ({:.0f} rows/s), write {:.2f} s", spec,
               rows.dim, train_s, add_s, rows.count() / add_s, write_s);
  return {{"threads", o.threads},
          {"train_s", train_s},
          {"add_s", add_s},
          {"write_s", write_s},
          {"add_rows_per_s", rows.count() / add_s},
          {"train_add_rows_per_s", rows.count() / (train_s + add_s)},
          {"index_bytes", bytes},
          {"peak_rss_mb", bench::peak_rss_mb_since_reset()}};
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

std::string launcher(const Options& o, int ranks) {
  return fmt::format("{} -np {} ", o.mpirun, ranks);
}

// Runs `command`, its output appended to `log`; throws when it fails.
double run_command(const std::string& command, const std::string& log) {
  spdlog::info("$ {}", command);
  Stopwatch watch;
  const int rc = std::system((command + " >> " + quoted(log) + " 2>&1").c_str());
  const double s = watch.seconds();
  if (rc != 0) fail<Error>("'{}' failed (status {}); see '{}'", command, rc, log);
  return s;
}

// A JSON file a finished child process must have written (read_json_file, refusing absence).
json read_json_or_fail(const std::string& path) {
  std::optional<json> j = read_json_file(path);
  if (!j) fail<IoError>("cannot read '{}'", path);
  return *j;
}

// The real ingest executable; returns wall time, rows/s and the per-rank figures of its markers.
json run_ingest(const Options& o, const std::string& run, const std::string& name,
                const std::string& spec, int shards, int ranks, const std::string& log) {
  const int threads = std::max(1, o.threads / ranks);
  const std::string command =
      launcher(o, ranks) +
      fmt::format("{}/stages/ingest/ingest --run {} --name {} --index {} --shards {} "
                  "--train-size {} --threads {} --overwrite",
                  o.bin_dir, quoted(run), name, quoted(spec), shards, o.train_size, threads);
  const double wall = run_command(command, log);
  const std::string out = (fs::path(run) / "ingest" / name).string();
  const std::string gen = (fs::path(out) / "gen-00000").string();  // a fresh ingest
  const json success = read_json_or_fail((fs::path(gen) / "_SUCCESS").string());
  const int64_t rows = success.at("rows").get<int64_t>();
  json per_rank = json::array();
  double rank_total_max = 0;
  for (int r = 0; r < ranks; ++r) {
    const json m = read_json_or_fail(marker_path(gen, r));
    const json& st = m.at("stats");
    const double total = st.at("total_s").get<double>();
    const int64_t mine = m.at("rows").get<int64_t>();
    rank_total_max = std::max(rank_total_max, total);
    per_rank.push_back({{"rank", r},
                        {"rows", mine},
                        {"read_s", st.at("read_s")},
                        {"add_s", st.at("add_s")},
                        {"write_s", st.at("write_s")},
                        {"total_s", total},
                        {"rows_per_s", total > 0 ? mine / total : 0.0},
                        {"peak_rss_mb", st.at("max_rss_bytes").get<double>() / 1048576.0}});
  }
  const json catalog = read_json_or_fail((fs::path(out) / "catalog.json").string());
  json shard_xxh3 = json::array();
  for (const auto& s : catalog.at("shards")) {
    for (const auto& seg : s.at("segments")) shard_xxh3.push_back(seg.at("index").value("xxh3", ""));
  }
  double rss_max = 0;
  for (const auto& r : per_rank) rss_max = std::max(rss_max, r["peak_rss_mb"].get<double>());
  spdlog::info("ingest {} np {}: {} rows in {:.2f} s wall ({:.0f} rows/s)", spec, ranks, rows,
               wall, rows / wall);
  return {{"ranks", ranks},
          {"threads_per_rank", threads},
          {"shards", shards},
          {"wall_s", wall},
          {"rows", rows},
          {"rows_per_s", rows / wall},
          {"rows_per_s_per_rank", rows / wall / ranks},
          {"rank_total_s_max", rank_total_max},
          {"rows_per_s_rank_work", rank_total_max > 0 ? rows / rank_total_max : 0.0},
          {"peak_rss_mb_max", rss_max},
          {"per_rank", per_rank},
          {"seconds_summed_over_ranks", success.at("seconds_summed_over_ranks")},
          {"default_nprobe", catalog.value("default_nprobe", 0)},
          {"shard_index_xxh3", shard_xxh3}};
}

void write_npy(const std::string& path, const float* values, int64_t rows, int dim) {
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}",
                                   rows, dim);
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  const auto len = static_cast<uint16_t>(header.size());
  const char le[2] = {static_cast<char>(len & 0xff), static_cast<char>(len >> 8)};
  out.write(le, 2);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(values),
            static_cast<std::streamsize>(sizeof(float) * rows * dim));
  if (!out) fail<IoError>("cannot write '{}'", path);
}

// The real query executable over `name`; recall@k of its hits against `exact` (ids, q x k).
json run_query(const Options& o, const std::string& run, const std::string& name,
               const std::string& vectors, int queries, int ranks, bool single,
               const std::vector<int64_t>& exact, const std::string& scratch,
               const std::string& log) {
  const int threads = std::max(1, o.threads / ranks);
  const std::string result = (fs::path(scratch) / "query-result.json").string();
  const std::string command =
      launcher(o, ranks) +
      fmt::format("{}/stages/query/query --index {} --vectors {} --k {} --threads {} "
                  "--format json --output {}{}",
                  o.bin_dir, quoted((fs::path(run) / "ingest" / name).string()), quoted(vectors),
                  o.k, threads, quoted(result), single ? " --batch-size 1" : "");
  const double wall = run_command(command, log);
  const json r = read_json_or_fail(result);
  fs::remove(result);
  const auto& hits = r.at("queries");
  if (static_cast<int>(hits.size()) != queries) {
    fail<Error>("query returned {} results for {} queries", hits.size(), queries);
  }
  double found = 0;
  for (int q = 0; q < queries; ++q) {
    std::set<int64_t> truth(exact.begin() + static_cast<size_t>(q) * o.k,
                            exact.begin() + static_cast<size_t>(q + 1) * o.k);
    for (const auto& h : hits[q].at("hits")) found += truth.count(h.at("patch_id").get<int64_t>());
  }
  const json& t = r.at("timing");
  const double recall = found / (static_cast<double>(queries) * o.k);
  spdlog::info("query {} np {} {}: recall@{} {:.4f}, qps {:.1f}, p50 {:.3f} ms, p99 {:.3f} ms",
               name, ranks, single ? "single" : "batched", o.k, recall, t.at("qps").get<double>(),
               t.at("latency_ms").at("p50").get<double>(), t.at("latency_ms").at("p99").get<double>());
  return {{"ranks", ranks},
          {"threads_per_rank", threads},
          {"mode", single ? "single (--batch-size 1)" : "batched (all queries per call)"},
          {"queries", queries},
          {"wall_s", wall},
          {"recall_at_k", recall},
          {"qps", t.at("qps")},
          {"latency_ms", t.at("latency_ms")},
          {"timing", t},
          {"search", r.value("search", json())}};
}

double median_of(const json& reps, const std::function<double(const json&)>& get) {
  std::vector<double> v;
  for (const auto& r : reps) v.push_back(get(r));
  return bench::summarize(v)["median"].get<double>();
}

struct Report {
  json doc;
  std::string path;
  void save() const { bench::write_report(path, doc); }
};

// The ingest part for one size: every index spec, repetitions interleaved.
json measure_ingest(const Options& o, const Rows& rows, const std::string& run,
                    const std::string& scratch, const std::string& log, Report& report,
                    json& section) {
  for (const std::string& spec : o.indexes) {
    const bool flat = VectorIndex::create(spec, rows.dim, Metric::kInnerProduct).is_trained();
    const int reps = flat ? o.flat_reps : o.slow_reps;
    json entry = {{"index", spec}, {"dim", rows.dim}, {"rows", rows.count()}, {"repetitions", json::array()}};
    for (int rep = 0; rep < reps; ++rep) {
      json r = {{"repetition", rep}, {"load_average_at_start", bench::load_average()}};
      r["raw"] = raw_build(o, spec, rows, scratch);
      r["ingest"] = json::object();
      for (int ranks : o.ranks) {
        const std::string name = fmt::format("bench-np{}", ranks);
        json m = run_ingest(o, run, name, spec, o.shards, ranks, log);
        m["ratio_to_raw_add"] = m["rows_per_s"].get<double>() / r["raw"]["add_rows_per_s"].get<double>();
        m["ratio_to_raw_train_add"] =
            m["rows_per_s"].get<double>() / r["raw"]["train_add_rows_per_s"].get<double>();
        r["ingest"]["np" + std::to_string(ranks)] = m;
        if (!o.keep) remove_tree((fs::path(run) / "ingest" / name).string());
      }
      entry["repetitions"].push_back(r);
      section["ingest"].push_back(entry);  // saved as it goes; replaced below
      report.save();
      section["ingest"].erase(section["ingest"].size() - 1);
    }
    entry["summary"] = bench::summarize_repetitions(entry["repetitions"]);
    section["ingest"].push_back(entry);
    report.save();
  }
  return section;
}

// Queries: Q rows spread over the index, perturbed.
std::vector<float> make_queries(const Options& o, const Mixture& mixture, const Rows& rows) {
  std::vector<float> q(static_cast<size_t>(o.queries) * rows.dim);
  const int64_t step = std::max<int64_t>(1, rows.count() / o.queries);
  for (int i = 0; i < o.queries; ++i) {
    const int64_t row = (i * step + step / 2) % rows.count();
    mixture.row(rows.ids[row], q.data() + static_cast<size_t>(i) * rows.dim, o.query_noise,
                static_cast<uint64_t>(i));
  }
  return q;
}

void measure_query(const Options& o, const Mixture& mixture, const Rows& rows,
                   const std::string& run, const std::string& scratch, const std::string& log,
                   Report& report, json& section) {
  const std::vector<float> queries = make_queries(o, mixture, rows);
  const std::string batched_file = (fs::path(scratch) / "queries.npy").string();
  const std::string single_file = (fs::path(scratch) / "queries-single.npy").string();
  write_npy(batched_file, queries.data(), o.queries, rows.dim);
  write_npy(single_file, queries.data(), o.single_queries, rows.dim);
  // Exact ground truth: an in-memory Flat index of every row.
  set_vector_threads(o.threads);
  std::vector<int64_t> exact(static_cast<size_t>(o.queries) * o.k);
  double exact_s = 0;
  {
    VectorIndex flat = VectorIndex::create("Flat", rows.dim, Metric::kInnerProduct);
    flat.add(rows.values.data(), rows.ids.data(), rows.count());
    std::vector<float> scores(exact.size());
    SearchOptions so;
    so.k = o.k;
    Stopwatch watch;
    flat.search(queries.data(), o.queries, so, scores.data(), exact.data());
    exact_s = watch.seconds();
  }
  section["query"] = {{"dim", rows.dim},
                      {"rows", rows.count()},
                      {"queries", o.queries},
                      {"single_queries", o.single_queries},
                      {"query_noise", o.query_noise},
                      {"k", o.k},
                      {"exact_search_s", exact_s},
                      {"queries_xxh3", xxh3_file(batched_file)},
                      {"results", json::array()}};
  report.save();
  for (const std::string& spec : o.query_indexes) {
    for (int shards : o.query_shards) {
      const std::string name = fmt::format("query-k{}", shards);
      const int build_ranks = *std::max_element(o.ranks.begin(), o.ranks.end());
      json build = run_ingest(o, run, name, spec, shards, std::min(build_ranks, shards), log);
      json entry = {{"index", spec}, {"shards", shards}, {"default_nprobe", build["default_nprobe"]},
                    {"shard_index_xxh3", build["shard_index_xxh3"]}, {"runs", json::array()}};
      for (int ranks : o.ranks) {
        entry["runs"].push_back(run_query(o, run, name, batched_file, o.queries, ranks, false,
                                          exact, scratch, log));
        entry["runs"].push_back(run_query(o, run, name, single_file, o.single_queries, ranks,
                                          true, exact, scratch, log));
      }
      if (!o.keep) remove_tree((fs::path(run) / "ingest" / name).string());
      section["query"]["results"].push_back(entry);
      report.save();
    }
  }
}

// The issue's targets, from this run's numbers.
json targets(const Options& o, const json& sizes) {
  json t = json::object();
  json flat = json::array();
  for (const auto& s : sizes) {
    for (const auto& e : s["ingest"]) {
      if (e["index"] != "Flat") continue;
      for (int ranks : o.ranks) {
        const std::string key = "np" + std::to_string(ranks);
        const double ratio = median_of(e["repetitions"], [&](const json& r) {
          return r["ingest"][key]["ratio_to_raw_add"].get<double>();
        });
        flat.push_back({{"dim", e["dim"]}, {"ranks", ranks}, {"median_ratio", ratio},
                        {"met", ratio >= 0.9}});
      }
    }
  }
  t["ingest_flat_at_least_0.9_of_raw_add"] = flat;
  if (!sizes.empty() && sizes[0].contains("query")) {
    const json& results = sizes[0]["query"]["results"];
    json recall = json::array(), p50 = json::array();
    std::map<std::pair<int, std::string>, double> flat_p50;  // (ranks, mode) -> p50 at K = 1
    for (const auto& e : results) {
      for (const auto& r : e["runs"]) {
        if (e["index"] == "IVF1024,Flat" && r["mode"].get<std::string>().rfind("batched", 0) == 0) {
          recall.push_back({{"shards", e["shards"]}, {"ranks", r["ranks"]},
                            {"recall_at_k", r["recall_at_k"]},
                            {"met", r["recall_at_k"].get<double>() >= 0.95}});
        }
        if (e["index"] == "Flat" && e["shards"] == 1) {
          flat_p50[{r["ranks"].get<int>(), r["mode"].get<std::string>()}] =
              r["latency_ms"]["p50"].get<double>();
        }
      }
    }
    for (const auto& e : results) {
      if (e["index"] != "Flat" || e["shards"] == 1) continue;
      for (const auto& r : e["runs"]) {
        const auto it = flat_p50.find({r["ranks"].get<int>(), r["mode"].get<std::string>()});
        if (it == flat_p50.end()) continue;
        const double ratio = r["latency_ms"]["p50"].get<double>() / it->second;
        p50.push_back({{"shards", e["shards"]}, {"ranks", r["ranks"]}, {"mode", r["mode"]},
                       {"p50_ratio_to_one_shard", ratio}, {"met", ratio <= 1.2}});
      }
    }
    t["recall_at_10_at_least_0.95_ivf_flat_default_nprobe"] = recall;
    t["sharded_flat_p50_within_1.2x_of_unsharded"] = p50;
  }
  return t;
}

int bench_main(const po::variables_map& values, const json& command) {
  const Options o = options_from(values, nullptr);
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
