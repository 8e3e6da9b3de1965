#include "stages/embed/preset.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <vector>

#include <boost/program_options.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/core/strings.h"
#include "common/core/error.h"

namespace tessera::embed {
namespace {

namespace po = boost::program_options;

const char* const kKeys[] = {"name",          "version",    "hf_hub_id", "input_size",
                             "mean",          "std",        "output_dim", "pooling",
                             "prefix_tokens", "patch_size", "mpp",        "precision"};
const char* const kRequired[] = {"name", "input_size", "mean", "std", "output_dim", "pooling"};

using KeyValues = std::map<std::string, std::string>;

KeyValues read_ini(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail<InvalidInput>("preset {}: cannot open the file", path);
  po::options_description desc;
  for (const char* key : kKeys) desc.add_options()(key, po::value<std::string>());
  po::variables_map values;
  try {
    po::store(po::parse_config_file(in, desc, /*allow_unregistered=*/false), values);
  } catch (const po::error& e) {
    fail<InvalidInput>("preset {}: {}", path, e.what());
  }
  KeyValues kv;
  for (const auto& [key, value] : values) kv[key] = trim(value.as<std::string>());
  return kv;
}

KeyValues read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail<InvalidInput>("preset {}: cannot open the file", path);
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    fail<InvalidInput>("preset {}: not valid JSON: {}", path, e.what());
  }
  if (!doc.is_object()) fail<InvalidInput>("preset {}: expected a JSON object", path);
  KeyValues kv;
  for (const auto& [key, value] : doc.items()) {
    if (std::find(std::begin(kKeys), std::end(kKeys), key) == std::end(kKeys)) {
      fail<InvalidInput>("preset {}: unknown key '{}'", path, key);
    }
    if (value.is_string()) {
      kv[key] = value.get<std::string>();
    } else if (value.is_array()) {
      std::string joined;
      for (const auto& item : value) joined += (joined.empty() ? "" : ",") + item.dump();
      kv[key] = joined;
    } else {
      kv[key] = value.dump();
    }
  }
  return kv;
}

int parse_positive_int(const std::string& path, const std::string& key, const std::string& text,
                       int minimum) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < minimum) {
    fail<InvalidInput>("preset {}: key '{}' must be an integer >= {}, got '{}'", path, key, minimum,
                       text);
  }
  return value;
}

std::array<float, 3> parse_triple(const std::string& path, const std::string& key,
                                  const std::string& text, bool positive) {
  std::string spaced = text;
  for (char& c : spaced) {
    if (c == ',') c = ' ';
  }
  std::istringstream words(spaced);
  std::vector<float> numbers;
  std::string word;
  while (words >> word) {
    float value = 0;
    const auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
    if (ec != std::errc() || end != word.data() + word.size() || (positive && !(value > 0))) {
      fail<InvalidInput>("preset {}: key '{}' has a bad {}number '{}'", path, key,
                         positive ? "(non-positive) " : "", word);
    }
    numbers.push_back(value);
  }
  if (numbers.size() != 3) {
    fail<InvalidInput>("preset {}: key '{}' needs 3 numbers (R, G, B), got {} in '{}'", path, key,
                       numbers.size(), text);
  }
  return {numbers[0], numbers[1], numbers[2]};
}

double parse_positive_double(const std::string& path, const std::string& key,
                             const std::string& text) {
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || !(value > 0) ||
      !std::isfinite(value)) {
    fail<InvalidInput>("preset {}: key '{}' must be a positive number, got '{}'", path, key, text);
  }
  return value;
}

// The source tree's configs/models, as CMake names it (not from __FILE__, which a compiler
// cache or a relative build may shorten to a path relative to the build folder).
std::filesystem::path source_models_dir() { return TESSERA_SOURCE_MODELS_DIR; }

}  // namespace

std::string pooling_name(Pooling pooling) {
  switch (pooling) {
    case Pooling::kCls:
      return "cls";
    case Pooling::kMeanPatch:
      return "mean_patch";
    case Pooling::kClsMeanConcat:
      return "cls_mean_concat";
  }
  return "unknown";
}

Pooling parse_pooling(const std::string& text) {
  for (Pooling p : {Pooling::kCls, Pooling::kMeanPatch, Pooling::kClsMeanConcat}) {
    if (text == pooling_name(p)) return p;
  }
  fail<InvalidInput>("unknown pooling '{}' (expected cls, mean_patch or cls_mean_concat)", text);
}

Preset load_preset(const std::string& path) {
  const KeyValues kv = ends_with(path, ".json") ? read_json(path) : read_ini(path);
  for (const char* key : kRequired) {
    if (kv.count(key) == 0) fail<InvalidInput>("preset {}: missing required key '{}'", path, key);
  }
  const auto optional = [&](const char* key) -> std::optional<std::string> {
    const auto it = kv.find(key);
    return it == kv.end() ? std::nullopt : std::optional<std::string>(it->second);
  };

  Preset preset;
  preset.source_path = path;
  preset.name = kv.at("name");
  if (preset.name.empty()) fail<InvalidInput>("preset {}: key 'name' is empty", path);
  preset.version = optional("version").value_or(preset.version);
  preset.hf_hub_id = optional("hf_hub_id").value_or("");
  preset.input_size = parse_positive_int(path, "input_size", kv.at("input_size"), 1);
  preset.output_dim = parse_positive_int(path, "output_dim", kv.at("output_dim"), 1);
  preset.mean = parse_triple(path, "mean", kv.at("mean"), /*positive=*/false);
  preset.std = parse_triple(path, "std", kv.at("std"), /*positive=*/true);
  try {
    preset.pooling = parse_pooling(kv.at("pooling"));
  } catch (const InvalidInput& e) {
    fail<InvalidInput>("preset {}: key 'pooling': {}", path, e.what());
  }
  if (const auto prefix = optional("prefix_tokens")) {
    preset.prefix_tokens = parse_positive_int(path, "prefix_tokens", *prefix, 1);
  }
  if (const auto size = optional("patch_size")) {
    preset.patch_size = parse_positive_int(path, "patch_size", *size, 1);
  }
  if (const auto mpp = optional("mpp")) preset.mpp = parse_positive_double(path, "mpp", *mpp);
  if (const auto precision = optional("precision")) {
    if (*precision != "fp32" && *precision != "bf16" && *precision != "fp16") {
      fail<InvalidInput>("preset {}: key 'precision' must be fp32, bf16 or fp16, got '{}'", path,
                         *precision);
    }
    preset.precision = *precision;
  }
  return preset;
}

nlohmann::json preset_to_json(const Preset& preset) {
  nlohmann::json json = {{"name", preset.name},
          {"version", preset.version},
          {"hf_hub_id", preset.hf_hub_id},
          {"input_size", preset.input_size},
          {"mean", preset.mean},
          {"std", preset.std},
          {"output_dim", preset.output_dim},
          {"pooling", pooling_name(preset.pooling)},
          {"prefix_tokens", preset.prefix_tokens}};
  if (preset.patch_size > 0) json["patch_size"] = preset.patch_size;
  if (preset.mpp > 0) json["mpp"] = preset.mpp;
  if (!preset.precision.empty()) json["precision"] = preset.precision;
  return json;
}

const std::vector<std::pair<std::string, std::string>>& preset_aliases() {
  static const std::vector<std::pair<std::string, std::string>> aliases = {
      {"uni_v1", "uni"},           {"uni_v2", "uni2-h"},         {"conch_v1", "conch"},
      {"gigapath", "prov-gigapath"}, {"virchow2", "virchow2"},   {"hoptimus0", "h-optimus-0"},
      {"hoptimus1", "h-optimus-1"}, {"phikon_v2", "phikon-v2"}};
  return aliases;
}

std::string resolve_preset_path(const std::string& text) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (text.empty() || fs::is_regular_file(text, ec)) return text;
  if (text.find('/') != std::string::npos || ends_with(text, ".ini") || ends_with(text, ".json")) {
    fail<InvalidInput>("preset {}: no such file", text);
  }
  std::string stem = text;
  for (const auto& [alias, target] : preset_aliases()) {
    if (text == alias) stem = target;
  }
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("TESSERA_PRESET_DIR"); env != nullptr && *env != '\0') {
    dirs.emplace_back(env);
  }
  dirs.push_back(source_models_dir());
  std::string searched;
  for (const auto& dir : dirs) {
    const fs::path candidate = dir / (stem + ".ini");
    if (fs::is_regular_file(candidate, ec)) return candidate.string();
    searched += (searched.empty() ? "" : ", ") + dir.string();
  }
  std::string known;
  for (const auto& [alias, target] : preset_aliases()) {
    known += fmt::format("{}{} ({})", known.empty() ? "" : ", ", target, alias);
  }
  fail<InvalidInput>(
      "preset '{}': not a file, and no {}.ini in {} (set TESSERA_PRESET_DIR; presets: {})", text,
      stem, searched, known);
}

PresetCheck check_against_preset(const Preset& preset, int patch_size, double mpp,
                                 const std::string& precision) {
  PresetCheck check;
  const std::string what = fmt::format("preset {}", preset.name);
  std::vector<std::string> beyond;
  if (preset.patch_size > 0 && patch_size != preset.patch_size) {
    const double off = std::abs(static_cast<double>(patch_size) / preset.patch_size - 1.0);
    check.warnings.push_back(fmt::format(
        "{} recommends {} px patches, the patches are {} px ({:.0f}% off; the model input is {} "
        "px)",
        what, preset.patch_size, patch_size, 100.0 * off, preset.input_size));
    if (off > kPatchSizeTolerance) {
      beyond.push_back(fmt::format("patch size {} px instead of {} px", patch_size,
                                   preset.patch_size));
    }
  }
  if (preset.mpp > 0) {
    if (!(mpp > 0)) {
      check.warnings.push_back(fmt::format(
          "{} recommends {} um/px, but the patch index records no mpp: not checked", what,
          preset.mpp));
    } else if (std::abs(mpp - preset.mpp) > 1e-9 * preset.mpp) {
      const double off = std::abs(mpp / preset.mpp - 1.0);
      check.warnings.push_back(fmt::format("{} recommends {} um/px, the patches are at {} um/px "
                                           "({:.0f}% off)",
                                           what, preset.mpp, mpp, 100.0 * off));
      if (off > kMppTolerance) {
        beyond.push_back(fmt::format("{} um/px instead of {} um/px", mpp, preset.mpp));
      }
    }
  }
  if (!preset.precision.empty() && precision != preset.precision) {
    check.warnings.push_back(fmt::format("{} recommends precision {}, the run uses {}", what,
                                         preset.precision, precision));
  }
  if (!beyond.empty()) {
    std::string list;
    for (const auto& b : beyond) list += (list.empty() ? "" : " and ") + b;
    check.refusal = fmt::format(
        "{}: the patches depart from what the model was trained on ({}; tolerance {:.0f}% in "
        "patch size, {:.0f}% in mpp): its embeddings would be of another scale. Rerun patchgen "
        "with the recommended size and mpp, or pass --force-preset-mismatch to embed anyway",
        what, list, 100.0 * kPatchSizeTolerance, 100.0 * kMppTolerance);
  }
  return check;
}

void enforce_preset(const Preset& preset, int patch_size, double mpp, const std::string& precision,
                    bool force) {
  const PresetCheck check = check_against_preset(preset, patch_size, mpp, precision);
  for (const auto& warning : check.warnings) spdlog::warn("{}", warning);
  if (check.refusal.empty()) return;
  if (!force) throw InvalidInput(check.refusal);
  spdlog::warn("{} (--force-preset-mismatch given: embedding anyway)", check.refusal);
}

}  // namespace tessera::embed
