// embed_bench: measures the embed stage on a fixed set of patches of a generated slide, in one job
// with one model, batch size, thread count and precision, four ways (docs/performance.md, "embed"):
//   model-only  Model::forward over batches prepared once up front (the model's own ceiling)
//   cached      Model::prepare + forward, batch after batch, over pixels already in memory
//               (both on a thread of their own, as embed_rows runs forward on one)
//   store       embed_rows with a StoreSource: the stage's path from patchgen's HDF5 shards, read
//               and prepare overlapped with forward, embeddings appended to an HDF5 shard
//   wsi         embed_rows with a WsiSource: the coupled path reading the slide with OpenSlide
// Pipeline efficiency = median store tiles/s / median model-only tiles/s. Writes one JSON report
// (bench_report: set-up apart from the repetitions, faults and pressure per repetition, the input
// cache policy, and with --compare the ratio of medians against an earlier report, or why not).
//
//   mpirun -np 1 embed_bench --model NAME [--run RUN] [--patches N] [--reps N] [--warmup N]
//                            [--cache warm|fresh|drop] [--compare BEFORE.json] [--out FILE]
//                            [embed options: --batch-size, --precision, --prefetch, ...]
#include <openslide/openslide.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/core/cpu.h"
#include "common/core/options.h"
#include "benchmarks/bench_report.h"
#include "common/core/csv.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/marker.h"
#include "common/mpi/mpi_main.h"
#include "stages/embed/config.h"
#include "stages/embed/infer.h"
#include "stages/embed/model.h"
#include "stages/embed/source.h"
#include "stages/embed/work.h"
#include "stages/patchgen/config.h"
#include "common/store/embeddings.h"
#include "common/store/index.h"
#include "stages/patchgen/patchgen.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::embed {
namespace {

namespace fs = std::filesystem;
using bench::Stopwatch;
using nlohmann::json;

constexpr double kTargetCpu = 0.85;
constexpr double kTargetCuda = 0.95;
const std::vector<std::string> kModes = {"model-only", "cached", "store", "wsi"};
constexpr const char* kUsage =
    "mpirun -np R embed_bench --model NAME|FILE.pt [--run RUN] [--patches N] [--reps N] "
    "[--warmup N] [--cache warm|fresh|drop] [--compare BEFORE.json] [--out FILE] [embed options]";

// embed options the benchmark sets itself.
const std::set<std::string> kSetByBench = {"run", "tag", "source", "overwrite",
                                           "progress-interval", "debug-kill-rank",
                                           "debug-kill-after"};

struct BenchOptions {
  std::string run;
  std::string slide;
  int64_t width = 0;
  int64_t height = 0;
  uint64_t slide_seed = 1;
  int64_t patches = 0;
  int chunk_patches = 64;
  int reps = 3;
  int warmup = 1;
  double target = 0;
  std::string cache;
  std::string compare;
  std::string out;
};

po::options_description bench_options() {
  po::options_description desc("embed_bench options");
  desc.add_options()
      ("run", po::value<std::string>()->default_value("bench-out/embed-bench/run"),
       "patchgen run to read; made from a generated slide when RUN/patchgen is not complete")
      ("slide", po::value<std::string>()->default_value(""),
       "slide for a new run (default: RUN/../synth-WxH-seedS.tif, generated when missing)")
      ("slide-width", po::value<int64_t>()->default_value(10000), "width of a generated slide")
      ("slide-height", po::value<int64_t>()->default_value(8000), "height of a generated slide")
      ("slide-seed", po::value<uint64_t>()->default_value(1), "seed of a generated slide")
      ("patches", po::value<int64_t>()->default_value(256),
       "the fixed set: the first N rows of the run's index")
      ("chunk-patches", po::value<int>()->default_value(64),
       "patchgen's --chunk-patches for a new run (an existing run must have been made with it)")
      ("reps", po::value<int>()->default_value(3), "timed repetitions of every mode")
      ("warmup", po::value<int>()->default_value(1), "untimed warm-up repetitions (reported apart)")
      ("target", po::value<double>()->default_value(0),
       "pipeline efficiency target (0: 0.95 on cuda, 0.85 on cpu)")
      ("cache", po::value<std::string>()->default_value(bench::kCacheWarm),
       "input cache policy: warm (index opened once), fresh (index, shards and slide reopened "
       "for every store/wsi run), drop (fresh, and their cached pages dropped with "
       "POSIX_FADV_DONTNEED first; advice, not proof of a cold cache)")
      ("compare", po::value<std::string>()->default_value(""),
       "an earlier embed_bench report: adds the ratio of medians per mode to this one, or why "
       "the two are not comparable")
      ("out", po::value<std::string>()->default_value(""),
       "JSON report (default RUN/../embed_bench_MODEL_PRECISION_DEVICE_bsB_npR.json)");
  po::options_description stage;
  add_options(stage);
  desc.add(bench::passed_through("embed options (passed through)", stage, kSetByBench));
  return desc;
}

// embed's Config from the passed-through options plus the ones the benchmark sets.
Config embed_config(const po::variables_map& values, const std::string& run) {
  po::options_description stage;
  add_options(stage);
  po::variables_map v = bench::passed_through_values(values, stage, kSetByBench);
  v.emplace("run", po::variable_value(std::string(run), false));
  v.emplace("tag", po::variable_value(std::string("embed-bench"), false));
  v.emplace("source", po::variable_value(std::string("store"), false));
  v.emplace("overwrite", po::variable_value(false, false));
  v.emplace("progress-interval", po::variable_value(1e9, false));
  v.emplace("debug-kill-rank", po::variable_value(-1, false));
  v.emplace("debug-kill-after", po::variable_value(int64_t{-1}, false));
  return config_from(v);
}

BenchOptions bench_options_from(const po::variables_map& v, const Config& config, int ranks) {
  BenchOptions o;
  o.run = fs::absolute(v["run"].as<std::string>()).lexically_normal().string();
  o.width = v["slide-width"].as<int64_t>();
  o.height = v["slide-height"].as<int64_t>();
  o.slide_seed = v["slide-seed"].as<uint64_t>();
  o.slide = v["slide"].as<std::string>();
  const fs::path parent = fs::path(o.run).parent_path();
  if (o.slide.empty()) {
    o.slide = (parent / fmt::format("synth-{}x{}-seed{}.tif", o.width, o.height, o.slide_seed))
                  .string();
  }
  o.slide = fs::absolute(o.slide).string();
  o.patches = v["patches"].as<int64_t>();
  o.chunk_patches = v["chunk-patches"].as<int>();
  o.cache = v["cache"].as<std::string>();
  bench::check_cache_policy(o.cache);
  o.compare = v["compare"].as<std::string>();
  o.reps = v["reps"].as<int>();
  o.warmup = v["warmup"].as<int>();
  o.target = v["target"].as<double>();
  if (o.target <= 0) o.target = config.device == "cuda" ? kTargetCuda : kTargetCpu;
  o.out = v["out"].as<std::string>();
  if (o.out.empty()) {
    o.out = (parent / fmt::format("embed_bench_{}_{}_{}_bs{}_np{}.json", default_tag(config.model),
                                  config.precision, config.device, config.batch_size, ranks))
                .string();
  }
  if (o.patches < 1) fail<InvalidInput>("invalid --patches {}: must be >= 1", o.patches);
  if (o.reps < 1) fail<InvalidInput>("invalid --reps {}: must be >= 1", o.reps);
  if (o.warmup < 0) fail<InvalidInput>("invalid --warmup {}: must be >= 0", o.warmup);
  return o;
}

// Collective. Makes RUN/patchgen (default patchgen options) from the slide, generating the slide
// first, unless RUN/patchgen/_SUCCESS exists.
json ensure_run(const BenchOptions& o, Comm& comm) {
  const std::string success = (fs::path(o.run) / "patchgen" / "_SUCCESS").string();
  if (comm.broadcast(fs::exists(success) ? "1" : "0", 0) == "1") return {{"generated", false}};
  const std::string manifest = (fs::path(o.run) / "manifest.csv").string();
  json info = {{"generated", true}};
  if (comm.rank() == 0) {
    if (!fs::exists(o.slide)) {
      spdlog::info("generating {}x{} slide '{}' (seed {})", o.width, o.height, o.slide,
                   o.slide_seed);
      synth::SlideSpec spec;
      spec.path = o.slide;
      spec.width = o.width;
      spec.height = o.height;
      spec.seed = o.slide_seed;
      fs::create_directories(fs::path(o.slide).parent_path());
      Stopwatch watch;
      synth::write_slide(spec);
      info["slide_generate_s"] = watch.seconds();
    }
    fs::create_directories(o.run);
    atomic_write_file(manifest, csv_record({"slide_id", "path"}) + csv_record({"bench", o.slide}));
  }
  comm.barrier();
  po::options_description desc;
  patchgen::add_options(desc);
  add_common_options(desc);
  const patchgen::Config config =
      patchgen::config_from(parse_options(desc, {"--manifest", manifest, "--out", o.run,
                                                 "--chunk-patches",
                                                 std::to_string(o.chunk_patches)})
                                .values);
  Stopwatch watch;
  const int code = patchgen::run(config, comm);
  if (code != kExitOk) {
    fail<Error>("patchgen of '{}' into '{}' exited with code {}", o.slide, o.run, code);
  }
  info["patchgen_s"] = watch.seconds();
  return info;
}

// patchgen's chunk-patches of the run (from RUN/patchgen/config.ini); throws InvalidInput when
// it is not `expected`.
int run_chunk_patches(const std::string& run, int expected) {
  const std::string ini = (fs::path(run) / "patchgen" / "config.ini").string();
  std::istringstream lines(read_file(ini));
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind("chunk-patches", 0) != 0) continue;
    const int chunk = std::stoi(line.substr(line.find('=') + 1));
    if (chunk != expected) {
      fail<InvalidInput>("run '{}' was made with chunk-patches {}, not --chunk-patches {}: use "
                         "another --run",
                         run, chunk, expected);
    }
    return chunk;
  }
  fail<InvalidInput>("'{}' has no chunk-patches line", ini);
}

// The files a stage-path mode reads: the index, the shards and the slides.
std::vector<std::string> input_files(const IndexInfo& index) {
  std::vector<std::string> files = {index.path};
  for (int s = 0; s < index.num_shards; ++s) files.push_back(index.shard_path(s));
  for (const std::string& slide : index.slides.path) files.push_back(slide);
  return files;
}

// This rank's share of the fixed set, cut into batches, with its pixels in memory: batch b holds
// batch_size patches at pixels[b * batch_size * patch_bytes], the padding of the last one zero.
// As in embed_rows, the padding goes through the model only on CUDA (`pad`); on the CPU a short
// last batch costs less.
struct PatchSet {
  int64_t total = 0;  // patches over all ranks
  int batch_size = 0;
  bool pad = false;
  int patch_size = 0;
  size_t patch_bytes = 0;
  std::vector<int64_t> rows;
  std::vector<std::vector<int64_t>> batches;
  std::vector<uint8_t> pixels;
  const uint8_t* batch_pixels(size_t b) const {
    return pixels.data() + b * static_cast<size_t>(batch_size) * patch_bytes;
  }
  // Rows batch b sends through the model.
  int forward_rows(size_t b) const { return pad ? batch_size : static_cast<int>(batches[b].size()); }
};

PatchSet load_patch_set(const IndexInfo& index, const IndexReader& reader, int64_t total,
                        int batch_size, bool pad, Comm& comm) {
  PatchSet set;
  set.total = total;
  set.batch_size = batch_size;
  set.pad = pad;
  set.patch_size = index.patch_size;
  set.patch_bytes = static_cast<size_t>(index.patch_size) * index.patch_size * 3;
  const Partition partition = Partition::cyclic(total, comm.size());
  for (int64_t b = 0; b < batch_count(partition, comm.rank(), batch_size); ++b) {
    set.batches.push_back(batch_rows(partition, comm.rank(), batch_size, b));
    set.rows.insert(set.rows.end(), set.batches.back().begin(), set.batches.back().end());
  }
  set.pixels.assign(set.batches.size() * batch_size * set.patch_bytes, 0);
  StoreSource source(index);
  for (size_t b = 0; b < set.batches.size(); ++b) {
    source.read(reader.read_rows(set.batches[b]),
                set.pixels.data() + b * batch_size * set.patch_bytes);
  }
  return set;
}

// The real rows of a padded [batches * batch_size, d] output, in row order.
std::vector<float> real_rows(const PatchSet& set, const std::vector<float>& padded, int d) {
  std::vector<float> out;
  out.reserve(set.rows.size() * d);
  for (size_t b = 0; b < set.batches.size(); ++b) {
    const float* first = padded.data() + b * set.batch_size * static_cast<size_t>(d);
    out.insert(out.end(), first, first + set.batches[b].size() * d);
  }
  return out;
}

struct ModeRun {
  json metrics;
  std::vector<float> embeddings;  // this rank's, in row order
};

// Collective. Times `body` between barriers; adds resource usage deltas around it.
template <typename Body>
json timed(Comm& comm, int64_t total, Body&& body) {
  const json before = bench::resource_usage();
  bench::reset_peak_rss();
  comm.barrier();
  Stopwatch watch;
  body();
  comm.barrier();
  const double wall = watch.seconds();
  const json after = bench::resource_usage();
  const json rss = bench::peak_rss_mb_since_reset();
  const auto delta = [&](const char* key) {
    return after[key].get<double>() - before[key].get<double>();
  };
  return {{"seconds", wall},
          {"tiles_per_s", total / wall},
          {"peak_rss_mb", comm.allreduce_max(rss.is_number() ? rss.get<double>() : -1.0)},
          {"minor_page_faults",
           comm.allreduce_sum(static_cast<int64_t>(delta("minor_page_faults")))},
          {"major_page_faults",
           comm.allreduce_sum(static_cast<int64_t>(delta("major_page_faults")))},
          {"cpu_s_max_rank", comm.allreduce_max(delta("user_s") + delta("system_s"))},
          {"cpu_system_s_max_rank", comm.allreduce_max(delta("system_s"))}};
}

// Runs `body` on a new thread and waits for it. embed_rows runs forward on its own inference
// thread; so do model-only and cached, because a thread's OpenMP team and malloc arena change the
// speed: on the 2-core development machine, forward passes on the main thread took 7x more page
// faults and, under load, up to 10x longer (spinning OpenMP workers).
template <typename Body>
void on_new_thread(Body&& body) {
  std::exception_ptr error;
  std::thread thread([&] {
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
  });
  thread.join();
  if (error) std::rethrow_exception(error);
}

ModeRun model_only(const Model& model, const PatchSet& set,
                   const std::vector<PreparedBatch>& prepared, Comm& comm) {
  const int d = model.output_dim();
  std::vector<float> out(prepared.size() * set.batch_size * static_cast<size_t>(d));
  ModeRun r;
  r.metrics = timed(comm, set.total, [&] {
    on_new_thread([&] {
      for (size_t b = 0; b < prepared.size(); ++b) {
        model.forward(prepared[b], out.data() + b * set.batch_size * static_cast<size_t>(d));
      }
    });
  });
  r.embeddings = real_rows(set, out, d);
  return r;
}

ModeRun cached(const Model& model, const PatchSet& set, Comm& comm) {
  const int d = model.output_dim();
  std::vector<float> out(set.batches.size() * set.batch_size * static_cast<size_t>(d));
  ModeRun r;
  r.metrics = timed(comm, set.total, [&] {
    on_new_thread([&] {
      for (size_t b = 0; b < set.batches.size(); ++b) {
        const PreparedBatch input =
            model.prepare(set.batch_pixels(b), set.forward_rows(b), set.patch_size);
        model.forward(input, out.data() + b * set.batch_size * static_cast<size_t>(d));
      }
    });
  });
  r.embeddings = real_rows(set, out, d);
  return r;
}

// The inputs of the stage-path modes under a --cache policy. warm: the index and its reader opened
// at start-up, kept open (shards and slide are opened by each run's source, inside the timer, as
// in the stage). fresh and drop: no handle kept; every store/wsi run opens the index anew, outside
// the timer, drop first advising the kernel to drop the input files' cached pages.
struct Inputs {
  std::string policy;
  std::string stage_dir;
  std::vector<std::string> files;
  const IndexInfo* index = nullptr;    // warm only
  const IndexReader* reader = nullptr;  // warm only
};

// store or wsi: the stage's own loop into a scratch shard, read back (untimed) for the hash.
ModeRun stage_path(const std::string& kind, const Model& model, const Inputs& inputs,
                   const PatchSet& set, const Config& config, const std::string& scratch,
                   Comm& comm) {
  const std::string shard = (fs::path(scratch) / (kind + "-" + rank_file_name(comm.rank(), ".h5")))
                                .string();
  json cache = {{"policy", inputs.policy}};
  std::optional<IndexInfo> own_index;
  std::optional<IndexReader> own_reader;
  if (inputs.policy != bench::kCacheWarm) {
    if (inputs.policy == bench::kCacheDrop) {
      Stopwatch drop_watch;
      cache["dropped"] = bench::drop_page_cache(inputs.files);
      cache["drop_s"] = drop_watch.seconds();
    }
    Stopwatch open_watch;
    own_index.emplace(load_index_info(inputs.stage_dir));
    own_reader.emplace(own_index->path);
    cache["open_s"] = open_watch.seconds();
  }
  const IndexInfo& index = own_index ? *own_index : *inputs.index;
  const IndexReader& reader = own_reader ? *own_reader : *inputs.reader;
  InferStats stats;
  ModeRun r;
  r.metrics = timed(comm, set.total, [&] {
    auto source = make_source(kind, index);
    stats = embed_rows(index, reader, Partition::cyclic(set.total, comm.size()), comm.rank(),
                       model, *source, config, shard, "");
  });
  r.metrics["infer_rank0"] = json::parse(comm.broadcast(stats.to_json().dump(), 0));
  r.metrics["cache_rank0"] = json::parse(comm.broadcast(cache.dump(), 0));
  {
    const EmbeddingsReader file(shard);
    std::vector<int64_t> ids(static_cast<size_t>(file.rows()));
    file.read_ids(ids.data(), 0, file.rows());
    bool same = ids.size() == set.rows.size();
    const auto expected = reader.read_rows(set.rows).patch_id;
    for (size_t i = 0; same && i < ids.size(); ++i) same = ids[i] == expected[i];
    if (!same) fail<Error>("'{}' does not hold the benchmark's patch ids in order", shard);
    r.embeddings.resize(static_cast<size_t>(file.rows()) * file.dim());
    file.read_values(r.embeddings.data(), 0, file.rows());
  }
  fs::remove(shard);
  return r;
}

std::string sha256_floats(const std::vector<float>& values) {
  return sha256_hex(std::string_view(reinterpret_cast<const char*>(values.data()),
                                     values.size() * sizeof(float)));
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(double{a[i]} - double{b[i]}));
  return m;
}

struct Context {
  const Model& model;
  const Inputs& inputs;
  const PatchSet& set;
  const std::vector<PreparedBatch>& prepared;
  const Config& config;
  std::string scratch;
  Comm& comm;
};

// Efficiencies of cached, store and wsi against model-only from `modes` (mode -> metrics):
// by throughput, rate(mode) / rate(model-only), the definition the target applies to; and by CPU
// time, cpu(model-only) / cpu(mode) for the same tiles, which a machine shared with other jobs
// disturbs far less than wall-clock rates (on an otherwise idle machine whose cores the model
// saturates, the two agree).
json efficiencies(const json& modes, const json::json_pointer& rate,
                  const json::json_pointer& cpu) {
  const auto at = [&](const char* mode, const json::json_pointer& key) {
    return modes.at(mode).at(key).get<double>();
  };
  json by_rate, by_cpu;
  for (const char* mode : {"cached", "store", "wsi"}) {
    by_rate[mode] = at(mode, rate) / at("model-only", rate);
    by_cpu[mode] = at("model-only", cpu) / at(mode, cpu);
  }
  return {{"cached", by_rate["cached"]}, {"store", by_rate["store"]}, {"wsi", by_rate["wsi"]},
          {"by_cpu_time", by_cpu}};
}

// Collective. One repetition: every mode once, in kModes order rotated by `offset` so that no
// mode always runs first. `last` receives each mode's embeddings (this rank's).
json repetition(int index, size_t offset, const Context& c,
                std::map<std::string, std::vector<float>>* last) {
  c.comm.barrier();
  const bench::RepetitionProbe probe;
  const json load = bench::load_average();
  std::vector<std::string> order = kModes;
  std::rotate(order.begin(), order.begin() + static_cast<long>(offset % order.size()), order.end());
  json modes;
  for (const std::string& mode : order) {
    ModeRun r = mode == "model-only" ? model_only(c.model, c.set, c.prepared, c.comm)
                : mode == "cached"   ? cached(c.model, c.set, c.comm)
                                     : stage_path(mode, c.model, c.inputs, c.set, c.config,
                                                  c.scratch, c.comm);
    json hashes = json::array();
    for (const auto& h : c.comm.allgather(sha256_floats(r.embeddings))) hashes.push_back(h);
    r.metrics["embeddings_sha256"] = hashes;
    modes[mode] = std::move(r.metrics);
    (*last)[mode] = std::move(r.embeddings);
  }
  c.comm.barrier();
  json around = probe.finish();
  {
    // Each mode resets the peak-RSS mark: the repetition's peak is the largest of theirs.
    double peak = around["peak_rss_mb"].is_number() ? around["peak_rss_mb"].get<double>() : -1.0;
    for (const auto& m : modes) peak = std::max(peak, m["peak_rss_mb"].get<double>());
    around["peak_rss_mb"] = c.comm.allreduce_max(peak);
    around["minor_page_faults"] =
        c.comm.allreduce_sum(around["minor_page_faults"].get<int64_t>());
    around["major_page_faults"] =
        c.comm.allreduce_sum(around["major_page_faults"].get<int64_t>());
    around["pressure"] = json::parse(c.comm.broadcast(around["pressure"].dump(), 0));
  }
  const auto rate = [&](const char* mode) { return modes[mode]["tiles_per_s"].get<double>(); };
  const json efficiency =
      efficiencies(modes, "/tiles_per_s"_json_pointer, "/cpu_s_max_rank"_json_pointer);
  spdlog::info("repetition {}: tiles/s model-only {:.2f}, cached {:.2f}, store {:.2f}, wsi {:.2f}; "
               "store efficiency {:.3f}",
               index, rate("model-only"), rate("cached"), rate("store"), rate("wsi"),
               efficiency["store"].get<double>());
  return {{"index", index},  {"order", order},           {"load_average_at_start", load},
          {"modes", modes},  {"efficiency", efficiency}, {"around", around}};
}

// The NVIDIA driver and GPU models from /proc/driver/nvidia (null where not readable).
json gpu_info() {
  json info = {{"driver", nullptr}, {"gpus", json::array()}};
  std::ifstream version("/proc/driver/nvidia/version");
  std::string line;
  if (std::getline(version, line)) info["driver"] = line;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc/driver/nvidia/gpus", ec)) {
    std::ifstream in(e.path() / "information");
    while (std::getline(in, line)) {
      if (line.rfind("Model:", 0) == 0) {
        info["gpus"].push_back(line.substr(line.find_first_not_of(" \t", 6)));
      }
    }
  }
  return info;
}

// The environment variables that change how libtorch and OpenMP run (null when unset).
json environment() {
  json env;
  for (const char* name : {"OMP_NUM_THREADS", "OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "OMP_PROC_BIND",
                           "MKL_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "CUBLAS_WORKSPACE_CONFIG"}) {
    const char* value = std::getenv(name);
    env[name] = value ? json(value) : json();
  }
  return env;
}

int bench_main(const po::variables_map& values, Comm& comm, const json& command) {
  Stopwatch total_watch;
  const json load_start = bench::load_average();
  const json usage_start = bench::resource_usage();
  const BenchOptions o = bench_options_from(values, embed_config(values, "."), comm.size());
  const Config config = embed_config(values, o.run);
  // Read before the run, so that a wrong --compare path fails in seconds, not after it.
  const json before = o.compare.empty() ? json() : bench::load_report(o.compare);
  const json generation = ensure_run(o, comm);
  const int chunk_patches = run_chunk_patches(o.run, o.chunk_patches);
  const std::string stage_dir = (fs::path(o.run) / "patchgen").string();
  Stopwatch index_watch;
  const IndexInfo index = load_index_info(stage_dir);
  std::optional<IndexReader> reader(std::in_place, index.path);
  const double index_open_s = index_watch.seconds();
  if (index.rows < o.patches) {
    fail<InvalidInput>("run '{}' has {} patches, fewer than --patches {}: use a larger slide "
                       "(--slide-width/--slide-height) with a new --run",
                       o.run, index.rows, o.patches);
  }

  Stopwatch load_watch;
  const Model model = Model::load(model_spec(config, comm.local_rank()));
  const double model_load_s = load_watch.seconds();

  Stopwatch set_watch;
  const PatchSet set = load_patch_set(index, *reader, o.patches, config.batch_size,
                                      config.device == "cuda", comm);
  const double patch_set_load_s = set_watch.seconds();
  Stopwatch prepare_watch;
  std::vector<PreparedBatch> prepared;
  for (size_t b = 0; b < set.batches.size(); ++b) {
    prepared.push_back(model.prepare(set.batch_pixels(b), set.forward_rows(b), set.patch_size));
  }
  const double prepare_s = prepare_watch.seconds();
  Inputs inputs{o.cache, stage_dir, input_files(index)};
  if (o.cache == bench::kCacheWarm) {
    inputs.index = &index;
    inputs.reader = &*reader;
  } else {
    reader.reset();  // an open handle would keep HDF5's cache of index.h5 across repetitions
  }
  const std::string scratch = (fs::path(o.run) / "embed-bench-scratch").string();
  if (comm.rank() == 0) fs::create_directories(scratch);
  comm.barrier();
  const Context context{model, inputs, set, prepared, config, scratch, comm};
  if (comm.rank() == 0) {
    spdlog::info("embed_bench: {} patches of run '{}', model {} (D={}), {} {}, batch {}, "
                 "{} torch threads, {} ranks, {} warm-up + {} timed repetitions, cache {}",
                 o.patches, o.run, config.model, model.output_dim(), config.device,
                 config.precision, config.batch_size, config.torch_threads, comm.size(), o.warmup,
                 o.reps, o.cache);
  }

  std::map<std::string, std::vector<float>> last;
  json warmups = json::array(), reps = json::array();
  for (int w = 0; w < o.warmup; ++w) warmups.push_back(repetition(w, 0, context, &last));
  for (int r = 0; r < o.reps; ++r) {
    reps.push_back(repetition(r, static_cast<size_t>(r), context, &last));
  }
  json diff;
  for (const std::string& mode : kModes) {
    diff[mode] = comm.allreduce_max(max_abs_diff(last[mode], last["model-only"]));
  }
  json usage = json::array();
  for (const auto& s : comm.allgather(bench::resource_usage().dump())) {
    usage.push_back(json::parse(s));
  }
  if (comm.rank() == 0) fs::remove_all(scratch);
  if (comm.rank() != 0) return kExitOk;

  const json summary = bench::summarize_repetitions(reps);
  const json efficiency = efficiencies(summary["modes"], "/tiles_per_s/median"_json_pointer,
                                       "/cpu_s_max_rank/median"_json_pointer);
  json hashes, identical;
  for (const std::string& mode : kModes) {
    hashes[mode] = reps.back()["modes"][mode]["embeddings_sha256"];
    bool same = true;
    for (const json& rep : warmups) same &= rep["modes"][mode]["embeddings_sha256"] == hashes[mode];
    for (const json& rep : reps) same &= rep["modes"][mode]["embeddings_sha256"] == hashes[mode];
    identical[mode] = same;
  }
  const double store_efficiency = efficiency["store"].get<double>();
  json report = {
      {"benchmark", "embed"},
      {"date", utc_timestamp()},
      {"command_line", command},
      {"machine", bench::machine_info()},
      {"gpu", gpu_info()},
      {"versions",
       bench::versions({{"openslide", openslide_get_version()},
                        {"libtorch", model.fingerprint()["libtorch"].get<std::string>()}})},
      {"environment", environment()},
      {"load_average", {{"start", load_start}, {"end", bench::load_average()}}},
      {"parameters",
       {{"model", config.model},
        {"model_fingerprint", model.fingerprint()},
        {"device", config.device},
        {"precision", config.precision},
        {"batch_size", config.batch_size},
        {"torch_threads", config.torch_threads},
        {"prefetch", config.prefetch},
        {"chunk_patches", chunk_patches},
        {"store_dtype", config.store_dtype},
        {"deterministic", config.deterministic},
        {"patches", o.patches},
        {"batches_per_rank", set.batches.size()},
        {"ranks", comm.size()},
        {"reps", o.reps},
        {"warmup", o.warmup},
        {"embed_config", config.config_ini}}},
      {"run",
       {{"path", o.run},
        {"generation", generation},
        {"slide", index.slides.path.at(0)},
        {"slide_spec", {{"width", o.width}, {"height", o.height}, {"seed", o.slide_seed}}},
        {"index_patches", index.rows},
        {"patch_size", index.patch_size},
        {"mpp", index.mpp},
        {"encoding", index.encoding},
        {"shards", index.num_shards}}},
      {"model_load_s", model_load_s},
      {"setup",
       {{"run_generation", generation},
        {"index_open_s", index_open_s},
        {"model_load_s", model_load_s},
        {"patch_set_load_s", patch_set_load_s},
        {"prepare_s", prepare_s}}},
      {"cache_policy", o.cache},
      {"cache_note", bench::cache_policy_field(o.cache)["cache_note"]},
      {"measured", bench::measured_field(bench::Measured{"/modes", "tiles_per_s", true})},
      {"warmup", warmups},
      {"repetitions", reps},
      {"summary", summary},
      {"efficiency", efficiency},
      {"target", {{"store_efficiency_min", o.target},
                  {"store_efficiency", store_efficiency},
                  {"met", store_efficiency >= o.target}}},
      {"output",
       {{"embeddings_sha256", hashes},
        {"identical_across_repetitions", identical},
        {"model_only_equals_cached", hashes["model-only"] == hashes["cached"]},
        {"store_equals_wsi", hashes["store"] == hashes["wsi"]},
        {"store_equals_model_only", hashes["store"] == hashes["model-only"]},
        {"max_abs_diff_vs_model_only", diff}}},
      {"resources",
       {{"start_rank0", usage_start}, {"end_per_rank", usage}}},
      {"total_s", total_watch.seconds()}};
  if (!o.compare.empty()) {
    json comparison = bench::compare_reports(before, report);
    comparison["before_report"] = fs::absolute(o.compare).string();
    std::istringstream lines(bench::format_comparison(comparison));
    for (std::string line; std::getline(lines, line);) {
      if (comparison["refused"].is_null()) {
        spdlog::info("compare: {}", line);
      } else {
        spdlog::warn("compare: {}", line);
      }
    }
    report["compare"] = comparison;
  }
  bench::write_report(o.out, report);
  spdlog::info("embed_bench: store efficiency {:.3f} (target {}), wsi {:.3f}, cached {:.3f}; "
               "report '{}'",
               store_efficiency, o.target, efficiency["wsi"].get<double>(),
               efficiency["cached"].get<double>(), o.out);
  return kExitOk;
}

}  // namespace
}  // namespace tessera::embed

int main(int argc, char** argv) {
  namespace em = tessera::embed;
  tessera::keep_freed_memory();  // as the embed executable
  const nlohmann::json command = tessera::bench::command_line(argc, argv);
  return tessera::mpi_main(argc, argv, em::kUsage, em::bench_options(),
                           [&](const tessera::po::variables_map& values, tessera::Comm& comm) {
                             return em::bench_main(values, comm, command);
                           });
}
