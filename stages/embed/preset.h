// Model presets: what a foundation model expects as input (size, normalisation) and what it
// returns (dimension, pooling). Presets live in configs/models/<name>.ini and next to exported
// TorchScript files; built-in models carry their own. Torch-free.
#pragma once

#include <array>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera::embed {

// How an embedding is taken from a model that returns a token sequence [n, tokens, width].
// Ignored for models that return [n, D] directly (their pooling is part of the model).
enum class Pooling {
  kCls,           // the first (class) token: D = width
  kMeanPatch,     // mean of the patch tokens (tokens after the prefix): D = width
  kClsMeanConcat  // class token || mean of the patch tokens (Virchow2): D = 2 * width
};

struct Preset {
  std::string name;
  std::string version = "1";
  std::string hf_hub_id;  // where the weights come from (informational), may be empty
  int input_size = 224;   // square model input side in pixels
  std::array<float, 3> mean{0.485f, 0.456f, 0.406f};  // per RGB channel, on [0, 1] pixel values
  std::array<float, 3> std{0.229f, 0.224f, 0.225f};
  int output_dim = 0;  // embedding dimension after pooling
  Pooling pooling = Pooling::kCls;
  int prefix_tokens = 1;    // class + register tokens preceding the patch tokens
  // What the model was trained and validated on; 0 / empty: no recommendation.
  int patch_size = 0;     // recommended patchgen patch side S in pixels at `mpp`
  double mpp = 0;         // recommended patchgen resolution in micrometres per pixel
  std::string precision;  // recommended precision: fp32, bf16, fp16, or empty
  std::string source_path;  // file the preset was read from; empty for built-ins
};

// Parses a preset file. `.json` files hold one object; any other extension is INI: flat
// `key = value` lines, `#` comments. Keys: name, input_size, mean, std, output_dim, pooling
// (required); version, hf_hub_id, prefix_tokens, patch_size, mpp, precision (optional; mpp a
// positive number, precision fp32, bf16 or fp16). mean and std are three numbers
// separated by commas and/or spaces (a JSON array in .json); pooling is cls, mean_patch or
// cls_mean_concat. Throws InvalidInput naming the file (and the key where there is one) when the
// file is unreadable, a key is unknown, missing, repeated or has a malformed or out-of-range value
// (sizes and dimensions must be positive, std entries positive, prefix_tokens >= 1).
// Sets source_path to `path`. Thread-safe.
Preset load_preset(const std::string& path);

// "cls", "mean_patch", "cls_mean_concat", and back. parse_pooling throws InvalidInput naming the
// accepted values.
std::string pooling_name(Pooling pooling);
Pooling parse_pooling(const std::string& text);

// All fields except source_path, for fingerprints and reports. patch_size, mpp and precision are
// included only when set, so that presets without recommendations keep their earlier fingerprint.
nlohmann::json preset_to_json(const Preset& preset);

// The preset file `--preset` names. `text` that names an existing file is returned as is. A bare
// name (no '/', not ending in .ini or .json) is a preset of configs/models: the file name stem
// (uni, conch, uni2-h, ...) or TRIDENT's encoder name of the same model (preset_aliases()), looked
// up as <dir>/<stem>.ini in $TESSERA_PRESET_DIR (when set) and then in the source tree's
// configs/models. Throws InvalidInput naming the searched places and the known names when
// nothing is found. Thread-safe (reads the environment).
std::string resolve_preset_path(const std::string& text);

// TRIDENT's encoder name -> our preset file stem, for the presets that are the same model:
// uni_v1 -> uni, uni_v2 -> uni2-h, conch_v1 -> conch, gigapath -> prov-gigapath, virchow2 ->
// virchow2, hoptimus0 -> h-optimus-0, hoptimus1 -> h-optimus-1, phikon_v2 -> phikon-v2 (the inverse
// of trident_encoder_alias() in peer_formats.h).
const std::vector<std::pair<std::string, std::string>>& preset_aliases();

// How far a run may depart from a preset's recommended patch size and mpp before embed refuses:
// relative differences |S / patch_size - 1| and |mpp / preset mpp - 1|. Within these a departure
// only warns (e.g. 256 px tiles for a 224 px model, resized as its own reference transform does).
inline constexpr double kPatchSizeTolerance = 0.15;
inline constexpr double kMppTolerance = 0.10;

// What embed makes of running `preset` on patches of side `patch_size` at `mpp` (patchgen's
// index) with `precision`: `warnings` for every departure from a recommendation (patch size, mpp,
// precision, or an unknown mpp), `refusal` (empty when none) when the patch size or mpp departs
// beyond the tolerances above, naming both values and --force-preset-mismatch. Pure.
struct PresetCheck {
  std::vector<std::string> warnings;
  std::string refusal;
};
PresetCheck check_against_preset(const Preset& preset, int patch_size, double mpp,
                                 const std::string& precision);

// Logs check_against_preset's warnings (spdlog warn) and throws InvalidInput with its refusal
// unless `force`, in which case the refusal is logged as a warning too. Call on rank 0 before
// anything is written.
void enforce_preset(const Preset& preset, int patch_size, double mpp, const std::string& precision,
                    bool force);

// ImageNet normalisation, the default of timm and torchvision models.
inline constexpr std::array<float, 3> kImageNetMean{0.485f, 0.456f, 0.406f};
inline constexpr std::array<float, 3> kImageNetStd{0.229f, 0.224f, 0.225f};

}  // namespace tessera::embed
