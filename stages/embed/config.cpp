#include "stages/embed/config.h"

#include <cmath>
#include <filesystem>
#include <map>

#include "common/core/options.h"
#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera::embed {

namespace {

constexpr OptionKind kResult = OptionKind::kResult;
constexpr OptionKind kRunControl = OptionKind::kRunControl;
constexpr OptionKind kDebug = OptionKind::kDebug;

}  // namespace

OptionTable option_table() {
  OptionTable t;
  t.group("Input and output")
      ("run", kRunControl, po::value<std::string>()->required(),
       "run directory with a completed patchgen stage")
      ("tag", kResult, po::value<std::string>()->default_value(""),
       "output folder RUN/embed/<tag> (default: the model name)")
      ("source", kResult, po::value<std::string>()->default_value("store"),
       "store: read patchgen's shards; wsi: read the same patches from the slides (coupled baseline)")
      ("reader", kRunControl, po::value<std::string>()->default_value("auto"),
       "with --source wsi: direct (tiled JPEG TIFF and Aperio SVS, each tile decoded once), "
       "openslide, or auto (direct where it can); the pixels are the same")
      ("store-dtype", kResult, po::value<std::string>()->default_value("fp32"),
       "fp32 or fp16 embeddings on disk")
      ("partition", kResult, po::value<std::string>()->default_value("contiguous"),
       "how index rows are split over ranks: contiguous (one run of rows per rank: sequential "
       "shard reads, one virtual-dataset mapping per rank), block-cyclic:B or cyclic")
      ("peer-layouts", kResult, po::value<std::string>()->default_value("clam,trident"),
       "layouts written besides features/ for CLAM and TRIDENT to read as their own: "
       "clam,trident, clam (pt_files/ holds a second copy of the features), trident, or none")
      ("progress-interval", kRunControl, value_with_default<double>(5.0),
       "seconds between progress reports of rank 0 (>= 0)");
  t.group("Model and inference")
      ("model", kResult, po::value<std::string>()->required(),
       "built-in (vit-tiny, vit-s16, vit-b16, vit-l16, vit-h14, vit-g14, vit-g16, "
       "resnet50-trunc) or a TorchScript file")
      ("preset", kResult, po::value<std::string>()->default_value(""),
       "preset file, or the name of one in configs/models (uni, conch, ..., or TRIDENT's uni_v1, "
       "conch_v1, ...) (default: next to a TorchScript model; built-ins carry their own)")
      ("force-preset-mismatch", kRunControl, po::bool_switch(),
       "embed even when the patches' size or mpp departs from the preset's recommendation beyond "
       "its tolerance (otherwise refused, exit 2)")
      ("seed", kResult, po::value<uint64_t>()->default_value(0), "weight seed of built-in models")
      ("device", kResult, po::value<std::string>()->default_value("cpu"),
       "cpu, cuda (GPU local_rank mod count) or auto")
      ("precision", kResult, po::value<std::string>()->default_value("fp32"), "fp32, bf16 or fp16")
      ("precision-mode", kResult, po::value<std::string>()->default_value("autocast"),
       "how bf16/fp16 is applied: autocast (weights fp32, matrix products in bf16/fp16, the rest "
       "fp32, as torch.autocast) or cast (the whole module cast)")
      ("torch-threads", kResult, po::value<int>()->default_value(0),
       "libtorch intra-op threads (0: the cores of the rank's CPU affinity)")
      ("batch-size", kResult, po::value<int>()->default_value(32), "patches per forward pass")
      ("prefetch", kRunControl, po::value<int>()->default_value(2),
       "batches read and prepared ahead")
      ("deterministic", kResult, po::bool_switch(),
       "run each image through the model on its own: embeddings then do not depend on batch "
       "companions, so outputs are byte-identical for any number of ranks (slower)");
  add_part_options(t);
  add_rerun_options(t, "replace existing outputs made with another configuration");
  add_fault_options(t, "patches embedded");
  return t;
}

void add_options(po::options_description& desc) { desc.add(option_table().description()); }

ModelSpec model_spec(const Config& config, int device_index) {
  ModelSpec spec;
  spec.model = config.model;
  spec.preset_path = config.preset;
  spec.seed = config.seed;
  spec.device = config.device;
  spec.device_index = device_index;
  spec.precision = config.precision;
  spec.precision_mode = config.precision_mode;
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

// Every option's canonical value, from the validated Config.
std::map<std::string, std::string> option_values(const Config& c) {
  std::map<std::string, std::string> values = {
      {"run", c.run},
      {"tag", c.tag},
      {"source", c.source},
      {"reader", to_string(c.reader)},
      {"store-dtype", c.store_dtype},
      {"partition", c.partition.to_string()},
      {"peer-layouts", c.peer_layouts.to_string()},
      {"progress-interval", ini_value(c.progress_interval)},
      {"model", c.model},
      {"preset", c.preset},
      {"seed", ini_value(c.seed)},
      {"device", c.device},
      {"precision", c.precision},
      {"precision-mode", c.precision_mode},
      {"force-preset-mismatch", ini_value(c.force_preset_mismatch)},
      {"torch-threads", ini_value(c.torch_threads)},
      {"batch-size", ini_value(c.batch_size)},
      {"prefetch", ini_value(c.prefetch)},
      {"deterministic", ini_value(c.deterministic)},
  };
  stage_option_values(c.stage, true, values);
  return values;
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
  c.precision_mode = v["precision-mode"].as<std::string>();
  c.force_preset_mismatch = v["force-preset-mismatch"].as<bool>();
  c.torch_threads = v["torch-threads"].as<int>();
  c.batch_size = v["batch-size"].as<int>();
  c.prefetch = v["prefetch"].as<int>();
  c.deterministic = v["deterministic"].as<bool>();
  c.source = v["source"].as<std::string>();
  c.reader = parse_slide_reader(v["reader"].as<std::string>(), "reader");
  c.store_dtype = v["store-dtype"].as<std::string>();
  c.stage = stage_options_from(v, slurm_array_environment());
  c.partition = Partition::Spec::parse(v["partition"].as<std::string>(), "partition");
  c.peer_layouts = PeerLayouts::parse(v["peer-layouts"].as<std::string>());
  c.progress_interval = v["progress-interval"].as<double>();
  c.stage.faults = faults_from(v);
  if (c.tag.empty()) c.tag = default_tag(c.model);
  require_folder_name("tag", c.tag);
  require(c.device == "cpu" || c.device == "cuda" || c.device == "auto", "device",
          "expected cpu, cuda or auto");
  require(c.precision == "fp32" || c.precision == "bf16" || c.precision == "fp16", "precision",
          "expected fp32, bf16 or fp16");
  require(c.precision_mode == "autocast" || c.precision_mode == "cast", "precision-mode",
          "expected autocast or cast");
  require(c.torch_threads >= 0 && c.torch_threads <= 1024, "torch-threads", "must be 0..1024");
  require(c.batch_size >= 1 && c.batch_size <= 65536, "batch-size", "must be 1..65536");
  require(c.prefetch >= 1 && c.prefetch <= 64, "prefetch", "must be 1..64");
  require(std::isfinite(c.progress_interval) && c.progress_interval >= 0, "progress-interval",
          "must be >= 0 seconds");
  require(c.source == "store" || c.source == "wsi", "source", "expected store or wsi");
  require(c.store_dtype == "fp32" || c.store_dtype == "fp16", "store-dtype", "expected fp32 or fp16");
  const OptionTable table = option_table();
  const auto values = option_values(c);
  c.config_ini = table.config_ini(values);
  c.fingerprint_ini = table.fingerprint_ini(values);
  return c;
}

}  // namespace tessera::embed
