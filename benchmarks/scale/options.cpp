#include "benchmarks/scale/options.h"

#include <filesystem>

#include "common/core/error.h"

namespace tessera::scale {

namespace fs = std::filesystem;

po::options_description bench_options() {
  po::options_description desc("scale_bench options");
  desc.add_options()
      ("slides", po::value<int>()->default_value(static_cast<int>(kCohortSlides)),
       "number of synthetic slides (the paper's cohort: 4185)")
      ("patches-total", po::value<int64_t>()->default_value(100'000),
       "patches over all slides; the per-slide distribution is the full cohort's scaled by "
       "patches-total / 170M")
      ("count-sigma", po::value<double>()->default_value(0.8),
       "sigma of the lognormal per-slide patch count")
      ("seed", po::value<uint64_t>()->default_value(1), "seed of the synthetic cohort")
      ("dim", po::value<int>()->default_value(1536), "embedding dimension D")
      ("store-dtype", po::value<std::string>()->default_value("fp16"),
       "embedding storage type: fp16 or fp32")
      ("batch-size", po::value<int>()->default_value(32), "embed batch size (index rows per read)")
      ("patch-size", po::value<int>()->default_value(8),
       "pixels per side of the (blank, raw) patches written to the patchgen shards")
      ("partition", po::value<std::string>()->default_value("cyclic"),
       "partition of patches over ranks: cyclic, block-cyclic:B or contiguous")
      ("embed-partition", po::value<std::string>()->default_value("contiguous"),
       "embed's partition of index rows over ranks. Not embed's default (cyclic): with HDF5 "
       "1.10 a (block-)cyclic embeddings.h5 stores and decodes one mapping block per row, and "
       "opening it takes time quadratic in the rows (docs/performance.md)")
      ("reps", po::value<int>()->default_value(3), "timed repetitions")
      ("warmup", po::value<int>()->default_value(0), "untimed warm-up repetitions (reported apart)")
      ("scratch", po::value<std::string>()->default_value("bench-out/scale"),
       "scratch folder; runs go to SCRATCH/npR and are removed at the end unless --keep")
      ("out", po::value<std::string>()->default_value(""),
       "JSON report (default SCRATCH/scale_bench_<patches>_npR.json)")
      ("keep", po::bool_switch(), "keep the last repetition's run directory");
  return desc;
}

BenchOptions bench_options_from(const po::variables_map& v, int world_size) {
  BenchOptions o;
  o.slides = v["slides"].as<int>();
  o.patches_total = v["patches-total"].as<int64_t>();
  o.count_sigma = v["count-sigma"].as<double>();
  o.seed = v["seed"].as<uint64_t>();
  o.dim = v["dim"].as<int>();
  o.store_dtype = v["store-dtype"].as<std::string>();
  o.batch_size = v["batch-size"].as<int>();
  o.patch_size = v["patch-size"].as<int>();
  o.partition = Partition::Spec::parse(v["partition"].as<std::string>(), "--partition");
  o.embed_partition =
      Partition::Spec::parse(v["embed-partition"].as<std::string>(), "--embed-partition");
  o.reps = v["reps"].as<int>();
  o.warmup = v["warmup"].as<int>();
  o.scratch = fs::absolute(v["scratch"].as<std::string>()).lexically_normal().string();
  o.out = v["out"].as<std::string>();
  o.keep = v["keep"].as<bool>();
  if (o.out.empty()) {
    o.out = (fs::path(o.scratch) /
             fmt::format("scale_bench_{}_np{}.json", o.patches_total, world_size))
                .string();
  }
  if (o.slides < 1) fail<InvalidInput>("invalid --slides {}: must be >= 1", o.slides);
  if (o.patches_total < o.slides) {
    fail<InvalidInput>("invalid --patches-total {}: must be >= --slides ({})", o.patches_total,
                       o.slides);
  }
  if (!(o.count_sigma >= 0)) fail<InvalidInput>("invalid --count-sigma {}", o.count_sigma);
  if (o.dim < 1) fail<InvalidInput>("invalid --dim {}: must be >= 1", o.dim);
  if (o.store_dtype != "fp16" && o.store_dtype != "fp32") {
    fail<InvalidInput>("invalid --store-dtype '{}': expected fp16 or fp32", o.store_dtype);
  }
  if (o.batch_size < 1) fail<InvalidInput>("invalid --batch-size {}", o.batch_size);
  if (o.patch_size < 1) fail<InvalidInput>("invalid --patch-size {}", o.patch_size);
  if (o.reps < 1) fail<InvalidInput>("invalid --reps {}: must be >= 1", o.reps);
  if (o.warmup < 0) fail<InvalidInput>("invalid --warmup {}: must be >= 0", o.warmup);
  return o;
}

}  // namespace tessera::scale
