#include "benchmarks/embed/options.h"

#include <filesystem>

#include <fmt/format.h>

#include "benchmarks/bench_report.h"
#include "common/core/error.h"
#include "stages/embed/model.h"

namespace tessera::embed::driver {

namespace fs = std::filesystem;

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

}  // namespace tessera::embed::driver
