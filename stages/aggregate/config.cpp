#include "stages/aggregate/config.h"

#include <filesystem>
#include <map>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/options.h"

namespace tessera::aggregate {

namespace {

constexpr OptionKind kResult = OptionKind::kResult;
constexpr OptionKind kRunControl = OptionKind::kRunControl;

void require(bool ok, const char* option, const std::string& why) {
  if (!ok) fail<InvalidInput>("invalid --{}: {}", option, why);
}

}  // namespace

const char* to_string(Level level) { return level == Level::kSlide ? "slide" : "patient"; }

OptionTable option_table() {
  OptionTable t;
  t.group("Input and output")
      ("run", kRunControl, po::value<std::string>()->required(),
       "run directory with a completed embed stage (RUN/embed/<tag>/, every part)")
      ("tag", kResult, po::value<std::string>()->default_value(""),
       "embed output to read: RUN/embed/<tag> (default: the only tag under RUN/embed)")
      ("name", kResult, po::value<std::string>()->default_value(""),
       "output folder RUN/slides/<name> (default: the encoder name, -patient appended at patient "
       "level)");
  t.group("Aggregation")
      ("pooling", kResult, po::value<std::string>()->default_value("mean"),
       "built-in pooling of a slide's patch features: mean, max or mean+max (2D)")
      ("slide-encoder", kResult, po::value<std::string>()->default_value(""),
       "TorchScript slide encoder taking (features [1,N,D], coords [1,N,2] level-0, "
       "patch_size_level0) as TRIDENT's slide encoders do (stages/embed/tools/"
       "export_slide_encoder.py); replaces --pooling")
      ("encoder-name", kResult, po::value<std::string>()->default_value(""),
       "name in slide_features_<name>/ (default: mean-<patch encoder> etc., or the TorchScript "
       "file stem)")
      ("level", kResult, po::value<std::string>()->default_value("slide"),
       "slide (one vector per slide) or patient (one per patient_id, over all its slides' "
       "patches)")
      ("device", kResult, po::value<std::string>()->default_value("cpu"),
       "where a slide encoder runs: cpu, cuda or cuda:N");
  add_rerun_options(t, "replace an aggregate output made with other settings");
  return t;
}

Config config_from(const po::variables_map& v) {
  Config c;
  c.run = v["run"].as<std::string>();
  c.tag = v["tag"].as<std::string>();
  c.name = v["name"].as<std::string>();
  c.pooling = v["pooling"].as<std::string>();
  c.slide_encoder = v["slide-encoder"].as<std::string>();
  c.encoder_name = v["encoder-name"].as<std::string>();
  const std::string level = v["level"].as<std::string>();
  c.device = v["device"].as<std::string>();
  c.stage = rerun_options_from(v);
  require(level == "slide" || level == "patient", "level", "expected slide or patient");
  c.level = level == "slide" ? Level::kSlide : Level::kPatient;
  require(c.pooling == "mean" || c.pooling == "max" || c.pooling == "mean+max", "pooling",
          "expected mean, max or mean+max");
  if (!c.tag.empty()) require_folder_name("tag", c.tag);
  if (!c.name.empty()) require_folder_name("name", c.name);
  if (!c.encoder_name.empty()) require_folder_name("encoder-name", c.encoder_name);
  require(c.device == "cpu" || c.device.rfind("cuda", 0) == 0, "device",
          "expected cpu, cuda or cuda:N");
  if (!c.slide_encoder.empty()) {
    require(std::filesystem::is_regular_file(c.slide_encoder), "slide-encoder",
            "'" + c.slide_encoder + "' is not a readable file");
    c.slide_encoder = std::filesystem::absolute(c.slide_encoder).lexically_normal().string();
  }
  std::map<std::string, std::string> values = {
      {"run", c.run},
      {"tag", c.tag},
      {"name", c.name},
      {"pooling", c.pooling},
      {"slide-encoder", c.slide_encoder},
      {"encoder-name", c.encoder_name},
      {"level", level},
      {"device", c.device},
  };
  stage_option_values(c.stage, false, values);
  const OptionTable table = option_table();
  c.config_ini = table.config_ini(values);
  c.fingerprint_ini = table.fingerprint_ini(values);
  return c;
}

std::string default_encoder_name(const Config& config, const std::string& patch_encoder) {
  if (!config.encoder_name.empty()) return config.encoder_name;
  if (!config.slide_encoder.empty()) {
    return std::filesystem::path(config.slide_encoder).stem().string();
  }
  const std::string pooling = config.pooling == "mean+max" ? "meanmax" : config.pooling;
  return pooling + "-" + patch_encoder;
}

std::string default_name(const Config& config, const std::string& encoder_name) {
  if (!config.name.empty()) return config.name;
  return encoder_name + (config.level == Level::kPatient ? "-patient" : "");
}

}  // namespace tessera::aggregate
