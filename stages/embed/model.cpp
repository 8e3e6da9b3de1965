#include "stages/embed/model.h"

#include <cstring>
#include <mutex>
#include <thread>

#include <ATen/Parallel.h>
#include <ATen/autocast_mode.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>
#include <torch/script.h>
#include <torch/version.h>

#include "common/core/cpu.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "stages/embed/builtin_models.h"

namespace tessera::embed {
namespace {

// The message of a libtorch error without its C++ stack trace.
std::string brief(const c10::Error& e) {
  std::string msg = e.what_without_backtrace();
  const auto eol = msg.find('\n');
  return eol == std::string::npos ? msg : msg.substr(0, eol);
}

class TorchScriptNetwork : public detail::Network {
 public:
  TorchScriptNetwork(torch::jit::Module module, std::string path)
      : module_(std::move(module)), path_(std::move(path)) {
    module_.eval();
  }

  at::Tensor forward(const at::Tensor& input) override {
    const c10::IValue out = module_.forward({input});
    if (out.isTensor()) return out.toTensor();
    if (out.isTuple()) {
      const auto& elements = out.toTupleRef().elements();
      if (!elements.empty() && elements[0].isTensor()) return elements[0].toTensor();
    }
    fail("model {}: forward returned a {}, expected a tensor or a tuple starting with one", path_,
         out.tagKind());
  }

  void to(c10::Device device, c10::ScalarType dtype) override { module_.to(device, dtype); }

 private:
  torch::jit::Module module_;
  std::string path_;
};

std::string replace_extension(const std::string& path, const std::string& ext) {
  const auto slash = path.find_last_of('/');
  const auto dot = path.find_last_of('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash)) return path + ext;
  return path.substr(0, dot) + ext;
}

std::string default_preset_path(const std::string& model_path) {
  for (const char* ext : {".ini", ".json"}) {
    const std::string candidate = replace_extension(model_path, ext);
    if (file_size(candidate)) return candidate;
  }
  fail<InvalidInput>("model {}: no preset given and neither {} nor {} exists next to it",
                     model_path, replace_extension(model_path, ".ini"),
                     replace_extension(model_path, ".json"));
}

c10::ScalarType parse_precision(const std::string& precision) {
  if (precision == "fp32") return at::kFloat;
  if (precision == "bf16") return at::kBFloat16;
  if (precision == "fp16") return at::kHalf;
  fail<InvalidInput>("unknown precision '{}' (expected fp32, bf16 or fp16)", precision);
}

void check_precision_mode(const std::string& mode) {
  if (mode != "autocast" && mode != "cast") {
    fail<InvalidInput>("unknown precision mode '{}' (expected autocast or cast)", mode);
  }
}

// Enables libtorch's autocast for `device` at `dtype` on this thread for the guard's lifetime,
// as Python's torch.autocast does (nesting counted, cast cache cleared at the outermost exit).
class AutocastGuard {
 public:
  AutocastGuard(c10::Device device, c10::ScalarType dtype) : cuda_(device.is_cuda()) {
    if (cuda_) {
      was_enabled_ = at::autocast::is_enabled();
      was_dtype_ = at::autocast::get_autocast_gpu_dtype();
      at::autocast::set_enabled(true);
      at::autocast::set_autocast_gpu_dtype(dtype);
    } else {
      was_enabled_ = at::autocast::is_cpu_enabled();
      was_dtype_ = at::autocast::get_autocast_cpu_dtype();
      at::autocast::set_cpu_enabled(true);
      at::autocast::set_autocast_cpu_dtype(dtype);
    }
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    if (cuda_) {
      at::autocast::set_enabled(was_enabled_);
      at::autocast::set_autocast_gpu_dtype(was_dtype_);
    } else {
      at::autocast::set_cpu_enabled(was_enabled_);
      at::autocast::set_autocast_cpu_dtype(was_dtype_);
    }
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  bool cuda_;
  bool was_enabled_ = false;
  c10::ScalarType was_dtype_ = at::kFloat;
};

c10::Device resolve_device(const ModelSpec& spec) {
  if (spec.device == "cpu" || (spec.device == "auto" && !torch::cuda::is_available())) {
    return c10::Device(c10::kCPU);
  }
  if (spec.device != "cuda" && spec.device != "auto") {
    fail<InvalidInput>("unknown device '{}' (expected cpu, cuda or auto)", spec.device);
  }
  if (!torch::cuda::is_available()) {
    fail<InvalidInput>("device cuda requested but libtorch {} sees no CUDA device", TORCH_VERSION);
  }
  if (spec.device_index < 0) fail<InvalidInput>("device index {} is negative", spec.device_index);
  const auto count = static_cast<int>(torch::cuda::device_count());
  return c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(spec.device_index % count));
}

// Whether libtorch's oneDNN has fast bf16 kernels here (it needs AVX-512 BW/VL/DQ on x86);
// without them bf16 matrix products fall back to scalar loops.
bool cpu_has_fast_bf16() {
#if defined(__x86_64__) || defined(__i386__)
  return __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
         __builtin_cpu_supports("avx512dq");
#else
  return true;
#endif
}

// 0: the cores of this process's CPU affinity (what mpirun or srun gave the rank), not the
// machine's; more than those warns, since the threads would share cores.
void configure_threads(int requested) {
  const int threads = thread_count(requested, "--torch-threads");
  static std::once_flag interop_once;
  std::call_once(interop_once, [threads] {
    try {
      at::set_num_interop_threads(threads);
    } catch (const c10::Error&) {
      // The inter-op pool was already started by someone else: keep its size.
    }
  });
  at::set_num_threads(threads);
}

}  // namespace

struct PreparedBatch::Impl {
  at::Tensor input;  // [n, 3, I, I] in the model dtype, on the host
};

PreparedBatch::PreparedBatch() : impl_(std::make_unique<Impl>()) {}
PreparedBatch::~PreparedBatch() = default;
PreparedBatch::PreparedBatch(PreparedBatch&&) noexcept = default;
PreparedBatch& PreparedBatch::operator=(PreparedBatch&&) noexcept = default;
int PreparedBatch::size() const {
  return impl_ && impl_->input.defined() ? static_cast<int>(impl_->input.size(0)) : 0;
}

struct Model::Impl {
  std::unique_ptr<detail::Network> network;
  Preset preset;
  std::string label;  // built-in name or file path, for messages
  c10::Device device{c10::kCPU};
  c10::ScalarType dtype = at::kFloat;        // the requested precision
  c10::ScalarType input_dtype = at::kFloat;  // of the prepared input and the module's weights
  bool autocast = false;                     // dtype applied through autocast
  at::Tensor mean, std;  // [1, 3, 1, 1] float on the host
  nlohmann::json fingerprint;
  bool deterministic = false;

  // Runs the network on a host batch and returns validated float embeddings [n, D] on the host.
  at::Tensor run(const at::Tensor& input) const {
    const int64_t n = input.size(0);
    at::Tensor raw;
    if (autocast) {
      AutocastGuard guard(device, dtype);
      raw = network->forward(input.to(device, /*non_blocking=*/true));
    } else {
      raw = network->forward(input.to(device, /*non_blocking=*/true));
    }
    at::Tensor pooled;
    if (raw.dim() == 2) {
      pooled = raw;
    } else if (raw.dim() == 3) {
      const at::Tensor tokens = raw.to(at::kFloat);
      const int64_t patches = tokens.size(1) - preset.prefix_tokens;
      if (preset.pooling != Pooling::kCls && patches < 1) {
        fail("model {}: returned {} tokens, but preset {} needs {} prefix tokens plus patch tokens",
             label, tokens.size(1), preset.name, preset.prefix_tokens);
      }
      const auto cls = [&] { return tokens.select(1, 0); };
      const auto mean_patch = [&] {
        return tokens.narrow(1, preset.prefix_tokens, patches).mean(1);
      };
      switch (preset.pooling) {
        case Pooling::kCls:
          pooled = cls();
          break;
        case Pooling::kMeanPatch:
          pooled = mean_patch();
          break;
        case Pooling::kClsMeanConcat:
          pooled = at::cat({cls(), mean_patch()}, 1);
          break;
      }
    } else {
      fail("model {}: returned a tensor of shape {}, expected [n, D] or [n, tokens, width]", label,
           fmt::join(raw.sizes(), "x"));
    }
    if (pooled.size(0) != n || pooled.size(1) != preset.output_dim) {
      fail(
          "model {}: produced embeddings of shape [{}, {}] for {} images, but preset {} ({}) says "
          "output_dim = {} with {} pooling",
          label, pooled.size(0), pooled.size(1), n, preset.name,
          preset.source_path.empty() ? "built-in" : preset.source_path, preset.output_dim,
          pooling_name(preset.pooling));
    }
    return pooled.to(c10::kCPU, at::kFloat).contiguous();
  }
};

Model::Model(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

namespace {

// The preset of `spec` as load() uses it, validated against a built-in network's shape.
Preset resolve_preset(const ModelSpec& spec) {
  const std::string preset_path = resolve_preset_path(spec.preset_path);
  if (detail::is_builtin(spec.model)) {
    Preset preset = preset_path.empty() ? detail::builtin_preset(spec.model)
                                        : load_preset(preset_path);
    const Preset own = detail::builtin_preset(spec.model);
    if (preset.input_size != own.input_size) {
      fail<InvalidInput>("preset {}: input_size {} differs from the {} built-in input size {}",
                         preset_path, preset.input_size, spec.model, own.input_size);
    }
    if (preset.pooling != Pooling::kCls && preset.prefix_tokens != own.prefix_tokens) {
      fail<InvalidInput>("preset {}: prefix_tokens {} differs from the {} built-in's {}",
                         preset_path, preset.prefix_tokens, spec.model, own.prefix_tokens);
    }
    return preset;
  }
  if (!file_size(spec.model)) {
    std::string known;
    for (const auto& name : detail::builtin_names()) known += (known.empty() ? "" : ", ") + name;
    fail<InvalidInput>("model {}: no such file, and not a built-in model ({})", spec.model, known);
  }
  return load_preset(preset_path.empty() ? default_preset_path(spec.model) : preset_path);
}

// Refuses what cannot run: libtorch 1.13's CPU autocast supports only bf16.
void check_precision(const ModelSpec& spec, c10::Device device) {
  const c10::ScalarType dtype = parse_precision(spec.precision);
  check_precision_mode(spec.precision_mode);
  if (dtype == at::kHalf && spec.precision_mode == "autocast" && !device.is_cuda()) {
    fail<InvalidInput>("model {}: precision fp16 needs CUDA (libtorch {} autocasts only to bf16 on "
                       "the CPU): use bf16 or fp32",
                       spec.model, TORCH_VERSION);
  }
}

}  // namespace

Preset Model::preset_of(const ModelSpec& spec) { return resolve_preset(spec); }

nlohmann::json Model::describe(const ModelSpec& spec) {
  const c10::Device device = resolve_device(spec);
  check_precision(spec, device);
  const Preset preset = resolve_preset(spec);
  nlohmann::json fingerprint;
  if (detail::is_builtin(spec.model)) {
    fingerprint = {{"kind", "builtin"}, {"model", spec.model}, {"seed", spec.seed}};
  } else {
    fingerprint = {
        {"kind", "torchscript"}, {"model", spec.model}, {"sha256", sha256_file(spec.model)}};
  }
  fingerprint["preset"] = preset_to_json(preset);
  fingerprint["precision"] = spec.precision;
  if (spec.precision != "fp32") fingerprint["precision_mode"] = spec.precision_mode;
  fingerprint["output_dim"] = preset.output_dim;
  fingerprint["device"] = device.is_cuda() ? "cuda" : "cpu";
  fingerprint["libtorch"] = TORCH_VERSION;
  fingerprint["deterministic"] = spec.deterministic;
  return fingerprint;
}

Model Model::load(const ModelSpec& spec) { return load(spec, describe(spec)); }

Model Model::load(const ModelSpec& spec, const nlohmann::json& fingerprint) {
  auto impl = std::make_unique<Impl>();
  impl->label = spec.model;
  impl->dtype = parse_precision(spec.precision);
  impl->device = resolve_device(spec);
  check_precision(spec, impl->device);
  impl->autocast = impl->dtype != at::kFloat && spec.precision_mode == "autocast";
  impl->input_dtype = impl->autocast ? at::kFloat : impl->dtype;
  configure_threads(spec.torch_threads);
  if (impl->dtype == at::kBFloat16 && !impl->device.is_cuda() && !cpu_has_fast_bf16()) {
    spdlog::warn("model {}: bf16 on a CPU without AVX-512 runs libtorch's slow fallback kernels "
                 "(10-30x slower than fp32); prefer fp32 here",
                 spec.model);
  }
  if (impl->device.is_cuda()) {
    at::globalContext().setBenchmarkCuDNN(false);
    at::globalContext().setDeterministicCuDNN(true);
  }
  impl->preset = resolve_preset(spec);
  if (detail::is_builtin(spec.model)) {
    impl->network = detail::make_builtin_network(spec.model, spec.seed);
  } else {
    torch::jit::Module module;
    try {
      module = torch::jit::load(spec.model, c10::Device(c10::kCPU));
    } catch (const c10::Error& e) {
      fail<InvalidInput>("model {}: cannot load it as TorchScript: {}", spec.model, brief(e));
    }
    impl->network = std::make_unique<TorchScriptNetwork>(std::move(module), spec.model);
  }
  impl->deterministic = spec.deterministic;
  impl->fingerprint = fingerprint;

  const auto& p = impl->preset;
  impl->mean = torch::tensor(std::vector<float>(p.mean.begin(), p.mean.end())).view({1, 3, 1, 1});
  impl->std = torch::tensor(std::vector<float>(p.std.begin(), p.std.end())).view({1, 3, 1, 1});

  Model model(std::move(impl));
  const std::string where = fmt::format("on {} at precision {} ({})", model.impl_->device.str(),
                                        spec.precision, spec.precision_mode);
  try {
    model.impl_->network->to(model.impl_->device, model.impl_->input_dtype);
    const std::vector<uint8_t> probe(static_cast<size_t>(p.input_size) * p.input_size * 3, 128);
    c10::InferenceMode guard;
    model.impl_->run(model.prepare(probe.data(), 1, p.input_size).impl_->input);
  } catch (const c10::Error& e) {
    const bool fp16_cpu = spec.precision == "fp16" && !model.impl_->device.is_cuda();
    fail<InvalidInput>(
        "model {}: a probe image failed {}: {}{}", spec.model, where, brief(e),
        fp16_cpu ? " (libtorch has no fp16 kernels for this on CPU: use bf16 or fp32)" : "");
  } catch (const InvalidInput&) {
    throw;
  } catch (const Error& e) {
    throw InvalidInput(e.what());
  }
  return model;
}

int Model::output_dim() const { return impl_->preset.output_dim; }
int Model::input_size() const { return impl_->preset.input_size; }
const Preset& Model::preset() const { return impl_->preset; }
const nlohmann::json& Model::fingerprint() const { return impl_->fingerprint; }

PreparedBatch Model::prepare(const uint8_t* rgb, int n, int patch_size) const {
  if (n < 0 || patch_size < 1) {
    fail<InvalidInput>("model {}: cannot prepare {} patches of side {}", impl_->label, n,
                       patch_size);
  }
  c10::InferenceMode guard;
  const int64_t size = impl_->preset.input_size;
  PreparedBatch batch;
  if (n == 0) {
    batch.impl_->input =
        at::empty({0, 3, size, size}, at::TensorOptions().dtype(impl_->input_dtype));
    return batch;
  }
  // from_blob does not write through the pointer; the first conversion copies.
  const at::Tensor pixels =
      at::from_blob(const_cast<uint8_t*>(rgb), {n, patch_size, patch_size, 3}, at::kByte);
  at::Tensor x =
      pixels.permute({0, 3, 1, 2})
          .to(at::kFloat, /*non_blocking=*/false, /*copy=*/false, at::MemoryFormat::Contiguous)
          .div_(255.0);
  if (patch_size != size) {
    x = at::upsample_bilinear2d(x, {size, size}, /*align_corners=*/false);
  }
  x.sub_(impl_->mean).div_(impl_->std);
  if (impl_->input_dtype != at::kFloat) x = x.to(impl_->input_dtype);
  if (impl_->device.is_cuda()) x = x.pin_memory();
  batch.impl_->input = std::move(x);
  return batch;
}

void Model::forward(const PreparedBatch& batch, float* out) const {
  if (!batch.impl_) fail<InvalidInput>("model {}: the batch was moved from", impl_->label);
  const at::Tensor& input = batch.impl_->input;
  const int64_t size = impl_->preset.input_size;
  if (!input.defined() || input.dim() != 4 || input.size(1) != 3 || input.size(2) != size ||
      input.size(3) != size || input.scalar_type() != impl_->input_dtype) {
    fail<InvalidInput>("model {}: the batch was not prepared by this model", impl_->label);
  }
  const int64_t n = input.size(0);
  if (n == 0) return;
  c10::InferenceMode guard;
  at::Tensor result;
  try {
    if (impl_->deterministic && n > 1) {
      std::vector<at::Tensor> rows;
      rows.reserve(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) rows.push_back(impl_->run(input.narrow(0, i, 1)));
      result = at::cat(rows, 0);
    } else {
      result = impl_->run(input);
    }
  } catch (const c10::Error& e) {
    fail("model {}: inference on a batch of {} failed: {}", impl_->label, n, brief(e));
  }
  std::memcpy(out, result.data_ptr<float>(),
              static_cast<size_t>(n) * impl_->preset.output_dim * sizeof(float));
}

std::vector<float> Model::embed(const uint8_t* rgb, int n, int patch_size) const {
  std::vector<float> out(static_cast<size_t>(n) * output_dim());
  forward(prepare(rgb, n, patch_size), out.data());
  return out;
}

bool cuda_available() { return torch::cuda::is_available(); }
int cuda_device_count() { return static_cast<int>(torch::cuda::device_count()); }
std::vector<std::string> builtin_model_names() { return detail::builtin_names(); }

}  // namespace tessera::embed
