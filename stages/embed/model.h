// The model layer of the embed stage: loads a built-in architecture or a TorchScript file, turns
// uint8 RGB patches into normalised input, and runs inference to float32 embeddings. In the embed
// stage libtorch is confined to model.cpp and builtin_models.cpp/.h (CLAM's .pt files are written
// by common/store/pt_tensor.cpp); this header is torch-free.
//
// Built-in models are randomly initialised, NOT pretrained: they reproduce the shapes and the
// compute cost of real pathology foundation models for benchmarks and tests, and their embeddings
// carry no biological meaning. Real models are exported to TorchScript with
// stages/embed/tools/export_torchscript.py and loaded by path.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/embed/preset.h"

namespace tessera::embed {

struct ModelSpec {
  // A built-in name (see builtin_model_names()) or the path of a TorchScript file.
  std::string model;
  // Optional preset file. Default for TorchScript: the model path with its extension replaced by
  // .ini, else .json (the files export_torchscript.py writes). Default for built-ins: their own
  // preset; a preset given here overrides it (e.g. vit-l16 with configs/models/uni.ini), provided
  // its output_dim matches what the network produces. A bare name (uni, conch, or TRIDENT's
  // uni_v1, conch_v1, ...) names a preset of configs/models (see resolve_preset_path()).
  std::string preset_path;
  uint64_t seed = 0;           // weight initialisation of built-ins; ignored for TorchScript
  std::string device = "cpu";  // "cpu", "cuda", or "auto" (cuda when available)
  // CUDA device ordinal; taken modulo cuda_device_count(), so a rank may pass its node-local rank.
  int device_index = 0;
  // "fp32", "bf16" or "fp16", applied as precision_mode says. fp16 needs CUDA (libtorch 1.13 has
  // no CPU fp16 matrix kernels, and its CPU autocast knows only bf16). bf16 on CPU is fast only
  // with AVX-512 (oneDNN); without it libtorch falls back to scalar kernels, 10-30x slower than
  // fp32 on an AVX2 machine (load() warns).
  std::string precision = "fp32";
  // How a reduced precision is applied (ignored for fp32):
  //   "autocast": weights and input stay fp32 and libtorch's autocast runs the ops of its
  //     lower-precision list (linear, matmul, convolution) in bf16/fp16 while the rest (the
  //     residual stream, LayerNorm, and whatever autocast keeps in fp32) stays fp32: what the
  //     peers (timm/TRIDENT under torch.autocast) compute.
  //   "cast": module and input are cast to the precision as a whole (the earlier behaviour; risks
  //     fp16 overflow in the residual stream of giant ViTs).
  std::string precision_mode = "autocast";
  // Intra-op threads of libtorch (a process-wide setting); 0 = the cores of the process's CPU
  // affinity (usable_cores()).
  int torch_threads = 0;
  // Run each image of a batch through the network on its own, so that an embedding does not
  // depend on its batch companions or position (GEMM kernels round edge rows differently).
  // Slower; makes embed's outputs byte-identical for any number of ranks.
  bool deterministic = false;
};

class Model;

// A preprocessed batch: normalised input [n, 3, I, I] in the model's input precision (fp32 under
// autocast, else the precision), in pinned host
// memory when the model runs on CUDA. Move-only; made by Model::prepare.
class PreparedBatch {
 public:
  PreparedBatch();
  ~PreparedBatch();
  PreparedBatch(PreparedBatch&&) noexcept;
  PreparedBatch& operator=(PreparedBatch&&) noexcept;
  PreparedBatch(const PreparedBatch&) = delete;
  PreparedBatch& operator=(const PreparedBatch&) = delete;
  int size() const;  // number of images n

 private:
  friend class Model;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

class Model {
 public:
  // Builds or loads the model, moves it to the device at the requested precision, sets the torch
  // thread count, and runs one probe image through it to check that it works there and returns
  // preset().output_dim values per image. Throws InvalidInput, naming the model (and preset file),
  // for: an unknown built-in name, a missing, unreadable or non-TorchScript file, a missing or bad
  // preset, an unknown device or precision, cuda requested where it is unavailable, a
  // precision the device does not support (fp16 on CPU with libtorch 1.13), an output whose shape
  // or dimension disagrees with the preset. Not thread-safe with other load() calls (the thread
  // count is process-wide).
  static Model load(const ModelSpec& spec);
  // The same, with the fingerprint describe(spec) returned (possibly on another rank), so that a
  // TorchScript file is hashed once per job, not once per rank.
  static Model load(const ModelSpec& spec, const nlohmann::json& fingerprint);
  // What load(spec) would record as fingerprint(), without building the network: resolves and
  // checks the preset, hashes a TorchScript file (SHA-256), resolves the device. Throws
  // InvalidInput as load() does for a missing model or a bad preset.
  static nlohmann::json describe(const ModelSpec& spec);
  // The preset load(spec) would use (resolved and checked against a built-in's shape), without
  // building the network. Throws InvalidInput as describe() does.
  static Preset preset_of(const ModelSpec& spec);

  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  ~Model();

  int output_dim() const;  // D, floats per image returned by forward
  int input_size() const;  // I, the model's input side
  const Preset& preset() const;

  // Identifies what produced the embeddings: kind (builtin|torchscript), model (built-in name or
  // file path), seed (built-ins) or sha256 (file contents), the preset fields, precision,
  // precision_mode (only for bf16/fp16), output_dim, device type and the libtorch version.
  const nlohmann::json& fingerprint() const;

  // Preprocesses n patches of side patch_size (uint8 RGB, interleaved, [n, S, S, 3]) exactly as
  // preprocess_reference() defines: scaled to [0, 1], resized bilinearly (align_corners=false,
  // no antialiasing) when S != input_size(), normalised with the preset's mean and std, cast to
  // the model's input precision. `rgb` must hold n * S * S * 3 bytes; it is copied and may be
  // reused on return. n == 0 is allowed (rgb may then be null); n < 0 or S < 1 throw InvalidInput.
  // Thread-safe: may run on one thread while forward() runs on another.
  PreparedBatch prepare(const uint8_t* rgb, int n, int patch_size) const;

  // Runs inference (torch::InferenceMode) and writes batch.size() * output_dim() float32 values
  // to `out`, row-major, whatever the precision. Token outputs are pooled per the preset. Throws
  // Error naming the model when libtorch fails (e.g. out of memory) or the output shape is wrong.
  // Calls to forward() on one Model must not overlap; prepare() may run concurrently.
  // Determinism: the same model (built-in + seed, or file), input, precision, thread count and
  // batch size give bit-identical output across runs and processes on the same machine. The batch
  // size is not neutral: the GEMM kernels block differently, so an image embedded in a batch of 4
  // differs from the same image alone by float rounding (measured <= 5e-7 in fp32, one ulp in bf16)
  // unless ModelSpec::deterministic runs the images one by one.
  // On CUDA, cuDNN is put in deterministic, non-benchmark mode.
  void forward(const PreparedBatch& batch, float* out) const;

  // prepare + forward.
  std::vector<float> embed(const uint8_t* rgb, int n, int patch_size) const;

 private:
  struct Impl;
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Whether this libtorch build sees a CUDA device, and how many.
bool cuda_available();
int cuda_device_count();

// Names accepted as ModelSpec::model without a file: vit-tiny, vit-s16, vit-b16, vit-l16,
// vit-h14, vit-g14, vit-g16, resnet50-trunc.
std::vector<std::string> builtin_model_names();

}  // namespace tessera::embed
