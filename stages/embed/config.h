// embed's configuration: the option table and the typed Config that run() takes.
#pragma once

#include <cstdint>
#include <string>

#include "common/core/options_fwd.h"
#include "common/slide/slide.h"
#include "common/stage/partition.h"
#include "common/stage/stage_options.h"
#include "stages/embed/model.h"
#include "stages/embed/peer_formats.h"

namespace tessera::embed {

struct Config {
  std::string run;                // run directory holding a completed patchgen/
  std::string model;              // built-in name or TorchScript path
  std::string preset;             // optional preset file
  std::string tag;                // output folder RUN/embed/<tag>; default: model name
  uint64_t seed = 0;
  std::string device = "cpu";
  std::string precision = "fp32";
  std::string precision_mode = "autocast";  // autocast | cast (ModelSpec::precision_mode)
  // Embed although the patches' size or mpp departs from the preset beyond its tolerance.
  bool force_preset_mismatch = false;
  int torch_threads = 0;
  int batch_size = 32;
  int prefetch = 2;               // batches read and prepared ahead of inference
  bool deterministic = false;     // embed each image on its own (rank-count independent bytes)
  std::string source = "store";   // store | wsi
  SlideReader reader = SlideReader::kAuto;  // how --source wsi reads slides
  std::string store_dtype = "fp32";  // fp32 | fp16 for the rank shards and merged outputs
  Partition::Spec partition{PartitionKind::kContiguous, 1};  // of the index rows over ranks
  PeerLayouts peer_layouts;       // CLAM and TRIDENT layouts written besides features/
  StageOptions stage;             // part/parts, verify, file locking, overwrite
  double progress_interval = 5;
  // Rendered from the validated fields above (tag after defaulting to the model name, partition
  // and verify in their canonical spelling).
  std::string config_ini;         // kResult and kRunControl options: feeding it back through
                                  // --config reproduces this Config
  std::string fingerprint_ini;    // kResult options only: what the outputs depend on
};

// Every embed option with its default, help and kind (result-affecting, run control or debug).
// torch-threads, batch-size and device are result-affecting: they can change float rounding.
OptionTable option_table();

// Adds option_table()'s options to `desc` (for drivers that parse embed's options along with
// their own).
void add_options(po::options_description& desc);

// Throws InvalidInput naming the option for out-of-range values.
Config config_from(const po::variables_map& values);

// The model part of the configuration; `device_index` is the rank's node-local rank (the GPU is
// chosen modulo the device count).
ModelSpec model_spec(const Config& config, int device_index);

// The tag used when --tag is not given: the built-in name, or the TorchScript file's stem.
std::string default_tag(const std::string& model);

inline constexpr const char* kUsage = "mpirun -np R embed --run RUN --model NAME|FILE.pt [options]";

}  // namespace tessera::embed
