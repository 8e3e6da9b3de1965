#include "stages/embed/config.h"

#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera::embed {

void add_options(po::options_description& desc) {
  po::options_description io("Input and output");
  io.add_options()
      ("run", po::value<std::string>()->required(), "run directory with a completed patchgen stage")
      ("tag", po::value<std::string>()->default_value(""),
       "output folder RUN/embed/<tag> (default: the model name)")
      ("source", po::value<std::string>()->default_value("store"),
       "store: read patchgen's shards; wsi: read the same patches from the slides (coupled baseline)")
      ("store-dtype", po::value<std::string>()->default_value("fp32"), "fp32 or fp16 embeddings on disk")
      ("partition", po::value<std::string>()->default_value("cyclic"),
       "how index rows are split over ranks: cyclic, block-cyclic:B or contiguous")
      ("progress-interval", po::value<double>()->default_value(5.0),
       "seconds between progress reports of rank 0");
  po::options_description model("Model and inference");
  model.add_options()
      ("model", po::value<std::string>()->required(),
       "built-in (vit-tiny, vit-s16, vit-b16, vit-l16, vit-h14, vit-g14, resnet50-trunc) or a "
       "TorchScript file")
      ("preset", po::value<std::string>()->default_value(""),
       "preset file (default: next to a TorchScript model; built-ins carry their own)")
      ("seed", po::value<uint64_t>()->default_value(0), "weight seed of built-in models")
      ("device", po::value<std::string>()->default_value("cpu"),
       "cpu, cuda (GPU local_rank mod count) or auto")
      ("precision", po::value<std::string>()->default_value("fp32"), "fp32, bf16 or fp16")
      ("torch-threads", po::value<int>()->default_value(0), "libtorch intra-op threads (0: all cores)")
      ("batch-size", po::value<int>()->default_value(32), "patches per forward pass")
      ("prefetch", po::value<int>()->default_value(2), "batches read and prepared ahead")
      ("deterministic", po::bool_switch(),
       "run each image through the model on its own: embeddings then do not depend on batch "
       "companions, so outputs are byte-identical for any number of ranks (slower)");
  po::options_description debug("Fault injection (tests only)");
  debug.add_options()
      ("debug-kill-rank", po::value<int>()->default_value(-1), "rank that kills itself (SIGKILL)")
      ("debug-kill-after", po::value<int64_t>()->default_value(-1),
       "... after embedding this many patches");
  desc.add(io).add(model);
  add_stage_options(desc);
  desc.add(debug);
}

ModelSpec model_spec(const Config& config, int device_index) {
  ModelSpec spec;
  spec.model = config.model;
  spec.preset_path = config.preset;
  spec.seed = config.seed;
  spec.device = config.device;
  spec.device_index = device_index;
  spec.precision = config.precision;
  spec.torch_threads = config.torch_threads;
  spec.deterministic = config.deterministic;
  return spec;
}

std::string default_tag(const std::string& model) {
  std::filesystem::path p(model);
  return p.has_extension() ? p.stem().string() : p.filename().string();
}

namespace {

void require(bool ok, const char* option, const std::string& why) {
  if (!ok) fail<InvalidInput>("invalid --{}: {}", option, why);
}

}  // namespace

Config config_from(const po::variables_map& v) {
  Config c;
  c.run = v["run"].as<std::string>();
  c.model = v["model"].as<std::string>();
  c.preset = v["preset"].as<std::string>();
  c.tag = v["tag"].as<std::string>();
  c.seed = v["seed"].as<uint64_t>();
  c.device = v["device"].as<std::string>();
  c.precision = v["precision"].as<std::string>();
  c.torch_threads = v["torch-threads"].as<int>();
  c.batch_size = v["batch-size"].as<int>();
  c.prefetch = v["prefetch"].as<int>();
  c.deterministic = v["deterministic"].as<bool>();
  c.source = v["source"].as<std::string>();
  c.store_dtype = v["store-dtype"].as<std::string>();
  c.stage = stage_options_from(v, slurm_array_environment());
  c.partition = Partition::Spec::parse(v["partition"].as<std::string>(), "partition");
  c.progress_interval = v["progress-interval"].as<double>();
  c.debug_kill_rank = v["debug-kill-rank"].as<int>();
  c.debug_kill_after = v["debug-kill-after"].as<int64_t>();
  if (c.tag.empty()) c.tag = default_tag(c.model);
  require(is_safe_slide_id(c.tag), "tag",
          "'" + c.tag + "' is not a safe folder name (A-Z a-z 0-9 . _ -)");
  require(c.device == "cpu" || c.device == "cuda" || c.device == "auto", "device",
          "expected cpu, cuda or auto");
  require(c.precision == "fp32" || c.precision == "bf16" || c.precision == "fp16", "precision",
          "expected fp32, bf16 or fp16");
  require(c.torch_threads >= 0 && c.torch_threads <= 1024, "torch-threads", "must be 0..1024");
  require(c.batch_size >= 1 && c.batch_size <= 65536, "batch-size", "must be 1..65536");
  require(c.prefetch >= 1 && c.prefetch <= 64, "prefetch", "must be 1..64");
  require(c.source == "store" || c.source == "wsi", "source", "expected store or wsi");
  require(c.store_dtype == "fp32" || c.store_dtype == "fp16", "store-dtype", "expected fp32 or fp16");
  c.config_ini = effective_config(v);
  // Prefetch changes speed only. The thread count stays in: libtorch's reductions depend on it.
  c.fingerprint_ini = effective_config(
      v, {"run", "overwrite", "progress-interval", "verify", "file-locking", "debug-kill-rank",
          "debug-kill-after", "prefetch"});
  return c;
}

}  // namespace tessera::embed
