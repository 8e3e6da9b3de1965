// aggregate's configuration: the option table and the typed Config that run() takes.
#pragma once

#include <string>

#include "common/core/options_fwd.h"
#include "common/stage/stage_options.h"

namespace tessera::aggregate {

enum class Level { kSlide, kPatient };

struct Config {
  std::string run;             // run directory holding embed/<tag>/ and patchgen/
  std::string tag;             // embed output read (RUN/embed/<tag>); "" = the only one
  std::string name;            // output folder RUN/slides/<name>; "" = default_name()
  std::string pooling = "mean";  // mean | max | mean+max (when no slide encoder is given)
  std::string slide_encoder;   // TorchScript file (TRIDENT's calling convention); "" = pooling
  std::string encoder_name;    // TRIDENT name of the slide encoder; "" = default_encoder_name()
  Level level = Level::kSlide;
  std::string device = "cpu";  // cpu | cuda | cuda:N (slide encoders only)
  StageOptions stage;          // verify, file locking, overwrite (part/parts unused)
  std::string config_ini;
  std::string fingerprint_ini;
};

OptionTable option_table();

// Throws InvalidInput naming the option for out-of-range values.
Config config_from(const po::variables_map& values);

// "slide" / "patient".
const char* to_string(Level level);

// The encoder name of slide_features_<encoder>/: the --encoder-name, else for a pooling TRIDENT's
// style "<pooling>-<patch encoder>" (mean-uni_v1; mean+max becomes meanmax-...), else the
// TorchScript file's stem.
std::string default_encoder_name(const Config& config, const std::string& patch_encoder);

// The output folder name: --name, else the encoder name, with "-patient" at patient level.
std::string default_name(const Config& config, const std::string& encoder_name);

inline constexpr const char* kUsage =
    "mpirun -np R aggregate --run RUN [--tag T] [--pooling mean|max|mean+max | --slide-encoder "
    "F.pt] [--level slide|patient] [options]";

}  // namespace tessera::aggregate
