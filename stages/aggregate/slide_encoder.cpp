#include "stages/aggregate/slide_encoder.h"

#include <torch/script.h>
#include <torch/version.h>

#include <cmath>

#include "common/core/error.h"

namespace tessera::aggregate {

struct SlideEncoder::Impl {
  mutable torch::jit::script::Module module;
  c10::Device device{c10::kCPU};
  std::string path;
};

SlideEncoder::SlideEncoder(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
SlideEncoder::SlideEncoder(SlideEncoder&&) noexcept = default;
SlideEncoder& SlideEncoder::operator=(SlideEncoder&&) noexcept = default;
SlideEncoder::~SlideEncoder() = default;

SlideEncoder SlideEncoder::load(const std::string& path, const std::string& device) {
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  try {
    impl->device = c10::Device(device);
    impl->module = torch::jit::load(path, impl->device);
  } catch (const c10::Error& e) {
    fail<InvalidInput>("cannot load the slide encoder '{}' on {}: {}", path, device,
                       e.what_without_backtrace());
  }
  impl->module.eval();
  return SlideEncoder(std::move(impl));
}

std::vector<float> SlideEncoder::encode(const std::vector<float>& features, int64_t rows, int dim,
                                        const std::vector<int64_t>& coords,
                                        int64_t patch_size_level0, const std::string& what) const {
  c10::InferenceMode guard;
  at::Tensor out;
  try {
    const at::Tensor f =
        torch::from_blob(const_cast<float*>(features.data()), {1, rows, dim}, torch::kFloat32)
            .to(impl_->device);
    const at::Tensor c =
        torch::from_blob(const_cast<int64_t*>(coords.data()), {1, rows, 2}, torch::kInt64)
            .to(impl_->device);
    out = impl_->module.forward({f, c, patch_size_level0}).toTensor();
  } catch (const std::exception& e) {
    fail<InvalidInput>("the slide encoder '{}' failed on {}: {}", impl_->path, what, e.what());
  }
  if (out.dim() == 2 && out.size(0) == 1) out = out[0];
  if (out.dim() != 1 || out.size(0) < 1) {
    fail<InvalidInput>("the slide encoder '{}' returned a tensor of shape {} for {}; expected "
                       "[1, D'] or [D']",
                       impl_->path, c10::str(out.sizes()), what);
  }
  out = out.to(torch::kCPU, torch::kFloat32).contiguous();
  std::vector<float> v(out.data_ptr<float>(), out.data_ptr<float>() + out.numel());
  for (const float x : v) {
    if (!std::isfinite(x)) {
      fail<InvalidInput>("the slide encoder '{}' returned a non-finite value for {}", impl_->path,
                         what);
    }
  }
  return v;
}

std::string SlideEncoder::torch_version() { return TORCH_VERSION; }

}  // namespace tessera::aggregate
