// Model presets: what a foundation model expects as input (size, normalisation) and what it
// returns (dimension, pooling). Presets live in configs/models/<name>.ini and next to exported
// TorchScript files; built-in models carry their own. Torch-free.
#pragma once

#include <array>
#include <string>

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
  std::string source_path;  // file the preset was read from; empty for built-ins
};

// Parses a preset file. `.json` files hold one object; any other extension is INI: flat
// `key = value` lines, `#` comments. Keys: name, input_size, mean, std, output_dim, pooling
// (required); version, hf_hub_id, prefix_tokens (optional). mean and std are three numbers
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

// All fields except source_path, for fingerprints and reports.
nlohmann::json preset_to_json(const Preset& preset);

// ImageNet normalisation, the default of timm and torchvision models.
inline constexpr std::array<float, 3> kImageNetMean{0.485f, 0.456f, 0.406f};
inline constexpr std::array<float, 3> kImageNetStd{0.229f, 0.224f, 0.225f};

}  // namespace tessera::embed
