// Internal to the model layer: include only from model.cpp and builtin_models.cpp (it pulls in
// ATen). The built-in architectures, defined with the libtorch C++ frontend.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include "stages/embed/preset.h"

namespace tessera::embed::detail {

// Maps normalised input [n, 3, I, I] to embeddings [n, D] or to a token sequence [n, T, W]
// (pooled by the caller according to the preset).
class Network {
 public:
  virtual ~Network() = default;
  virtual at::Tensor forward(const at::Tensor& input) = 0;
  // Moves parameters and buffers to `device` and casts floating point ones to `dtype`.
  virtual void to(c10::Device device, c10::ScalarType dtype) = 0;
};

// Names of the built-in architectures, in a stable order.
std::vector<std::string> builtin_names();
bool is_builtin(const std::string& name);

// The preset a built-in carries: ImageNet mean/std, its input size and width, class-token pooling,
// prefix_tokens = 1 + its register tokens. Throws InvalidInput for an unknown name.
Preset builtin_preset(const std::string& name);

// Builds the network on the CPU in fp32, eval mode, every parameter drawn from a private
// generator seeded with `seed` (so equal seeds give bit-identical weights, independent of the
// global torch RNG and of other threads):
//   ViT: Linear weights and position/class/register tokens N(0, 0.02), patch-embedding conv
//        N(0, 1/fan_in), biases 0, LayerNorm weight 1 and bias 0. Outputs the normalised token
//        sequence [n, 1 + registers + patches, width].
//   ResNet: conv weights N(0, 2/fan_out) (He, as torchvision), BatchNorm identity (weight 1,
//        bias 0, running mean 0, variance 1). Outputs [n, 1024].
// Throws InvalidInput for an unknown name.
std::unique_ptr<Network> make_builtin_network(const std::string& name, uint64_t seed);

}  // namespace tessera::embed::detail
