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
// Its parts: options.h (the options), run.h (the run, the patch set, the modes and repetitions),
// report.h (efficiencies, GPU, environment); this file sets up, repeats and reports.
//
//   mpirun -np 1 embed_bench --model NAME [--run RUN] [--patches N] [--reps N] [--warmup N]
//                            [--cache warm|fresh|drop] [--compare BEFORE.json] [--out FILE]
//                            [embed options: --batch-size, --precision, --prefetch, ...]
#include <openslide/openslide.h>

#include <filesystem>
#include <map>
#include <optional>
#include <sstream>

#include <spdlog/spdlog.h>

#include "benchmarks/bench_report.h"
#include "benchmarks/embed/options.h"
#include "benchmarks/embed/report.h"
#include "benchmarks/embed/run.h"
#include "common/core/cpu.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/mpi/mpi_main.h"
#include "stages/embed/work.h"

namespace tessera::embed::driver {
namespace {

namespace fs = std::filesystem;
using bench::Stopwatch;
using nlohmann::json;

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
}  // namespace tessera::embed::driver

int main(int argc, char** argv) {
  namespace em = tessera::embed::driver;
  tessera::keep_freed_memory();  // as the embed executable
  const nlohmann::json command = tessera::bench::command_line(argc, argv);
  return tessera::mpi_main(argc, argv, em::kUsage, em::bench_options(),
                           [&](const tessera::po::variables_map& values, tessera::Comm& comm) {
                             return em::bench_main(values, comm, command);
                           });
}
