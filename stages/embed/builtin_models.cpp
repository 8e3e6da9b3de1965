#include "stages/embed/builtin_models.h"

#include <cmath>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/torch.h>

#include "common/core/strings.h"
#include "common/core/error.h"

namespace tessera::embed::detail {
namespace {

namespace nn = torch::nn;

// Shape of a ViT. mlp_hidden is the width of the first MLP layer; a SwiGLU ("packed", as timm's
// SwiGLUPacked) MLP splits it into gate and value halves, so its second layer is mlp_hidden / 2
// wide.
struct VitShape {
  int width, depth, heads, patch, mlp_hidden;
  bool swiglu;
  int registers;
};

struct BuiltinInfo {
  const char* name;
  bool is_vit;
  VitShape vit;  // when is_vit
  int output_dim;
};

// Shapes of the reference models (weights are random, see the header):
//   vit-tiny  for tests; SwiGLU and one register so every ViT code path runs cheaply
//   vit-s16 / vit-b16  ViT-S/16, ViT-B/16 (ImageNet ViTs)
//   vit-l16   UNI, Phikon-v2 (ViT-L/16)
//   vit-h14   Virchow2 (ViT-H/14, SwiGLU 6832, 4 registers); CLS output here, 1280-d
//   vit-g14   H-optimus-0/1 (ViT-g/14, SwiGLU 8192, 4 registers)
//   vit-g16   Prov-GigaPath's tile encoder (ViT-g with 16 px patches: timm vit_giant_patch14_dinov2
//             with patch_size=16, mlp_ratio 5.33334, i.e. SwiGLU 8192, no registers; 197 tokens)
//   resnet50-trunc  CLAM's ResNet-50 truncated after layer3, global average pool: 1024-d
const BuiltinInfo kBuiltins[] = {
    {"vit-tiny", true, {64, 2, 2, 16, 256, true, 1}, 64},
    {"vit-s16", true, {384, 12, 6, 16, 1536, false, 0}, 384},
    {"vit-b16", true, {768, 12, 12, 16, 3072, false, 0}, 768},
    {"vit-l16", true, {1024, 24, 16, 16, 4096, false, 0}, 1024},
    {"vit-h14", true, {1280, 32, 16, 14, 6832, true, 4}, 1280},
    {"vit-g14", true, {1536, 40, 24, 14, 8192, true, 4}, 1536},
    {"vit-g16", true, {1536, 40, 24, 16, 8192, true, 0}, 1536},
    {"resnet50-trunc", false, {}, 1024},
};
constexpr int kInputSize = 224;

const BuiltinInfo& find_builtin(const std::string& name) {
  for (const auto& info : kBuiltins) {
    if (name == info.name) return info;
  }
  std::string known;
  for (const auto& info : kBuiltins) known += (known.empty() ? "" : ", ") + std::string(info.name);
  fail<InvalidInput>("unknown built-in model '{}' (built-ins: {})", name, known);
}

class AttentionImpl : public nn::Module {
 public:
  AttentionImpl(int width, int heads)
      : heads_(heads),
        scale_(1.0 / std::sqrt(static_cast<double>(width / heads))),
        qkv_(register_module("qkv", nn::Linear(width, 3 * width))),
        proj_(register_module("proj", nn::Linear(width, width))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    const int64_t n = x.size(0), t = x.size(1), c = x.size(2);
    const auto qkv =
        qkv_->forward(x).reshape({n, t, 3, heads_, c / heads_}).permute({2, 0, 3, 1, 4});
    const auto q = qkv[0] * scale_;
    const auto attention = torch::matmul(q, qkv[1].transpose(-2, -1)).softmax(-1);
    return proj_->forward(torch::matmul(attention, qkv[2]).transpose(1, 2).reshape({n, t, c}));
  }

 private:
  int64_t heads_;
  double scale_;
  nn::Linear qkv_, proj_;
};
TORCH_MODULE(Attention);

class MlpImpl : public nn::Module {
 public:
  MlpImpl(int width, int hidden, bool swiglu)
      : swiglu_(swiglu),
        fc1_(register_module("fc1", nn::Linear(width, hidden))),
        fc2_(register_module("fc2", nn::Linear(swiglu ? hidden / 2 : hidden, width))) {}

  torch::Tensor forward(const torch::Tensor& x) {
    auto h = fc1_->forward(x);
    if (swiglu_) {
      const auto halves = h.chunk(2, -1);
      h = torch::silu(halves[0]) * halves[1];
    } else {
      h = torch::gelu(h);
    }
    return fc2_->forward(h);
  }

 private:
  bool swiglu_;
  nn::Linear fc1_, fc2_;
};
TORCH_MODULE(Mlp);

nn::LayerNorm layer_norm(int width) {
  return nn::LayerNorm(nn::LayerNormOptions({width}).eps(1e-6));
}

class BlockImpl : public nn::Module {
 public:
  explicit BlockImpl(const VitShape& s)
      : norm1_(register_module("norm1", layer_norm(s.width))),
        attn_(register_module("attn", Attention(s.width, s.heads))),
        norm2_(register_module("norm2", layer_norm(s.width))),
        mlp_(register_module("mlp", Mlp(s.width, s.mlp_hidden, s.swiglu))) {}

  torch::Tensor forward(torch::Tensor x) {
    x = x + attn_->forward(norm1_->forward(x));
    return x + mlp_->forward(norm2_->forward(x));
  }

 private:
  nn::LayerNorm norm1_;
  Attention attn_;
  nn::LayerNorm norm2_;
  Mlp mlp_;
};
TORCH_MODULE(Block);

// Pre-norm ViT: patch embedding, class token, learned position embedding (class + patches),
// register tokens inserted after the class token without position embedding (DINOv2 style).
class VitImpl : public nn::Module {
 public:
  explicit VitImpl(const VitShape& s) {
    const int grid = kInputSize / s.patch;
    patch_embed_ = register_module(
        "patch_embed", nn::Conv2d(nn::Conv2dOptions(3, s.width, s.patch).stride(s.patch)));
    cls_token_ = register_parameter("cls_token", torch::zeros({1, 1, s.width}));
    pos_embed_ = register_parameter("pos_embed", torch::zeros({1, 1 + grid * grid, s.width}));
    if (s.registers > 0) {
      reg_tokens_ = register_parameter("reg_tokens", torch::zeros({1, s.registers, s.width}));
    }
    blocks_ = register_module("blocks", nn::ModuleList());
    for (int i = 0; i < s.depth; ++i) blocks_->push_back(Block(s));
    norm_ = register_module("norm", layer_norm(s.width));
  }

  torch::Tensor forward(const torch::Tensor& input) {
    const int64_t n = input.size(0);
    auto x = patch_embed_->forward(input).flatten(2).transpose(1, 2);
    x = torch::cat({cls_token_.expand({n, -1, -1}), x}, 1) + pos_embed_;
    if (reg_tokens_.defined()) {
      x = torch::cat(
          {x.narrow(1, 0, 1), reg_tokens_.expand({n, -1, -1}), x.narrow(1, 1, x.size(1) - 1)}, 1);
    }
    for (const auto& block : *blocks_) x = block->as<Block>()->forward(x);
    return norm_->forward(x);
  }

 private:
  nn::Conv2d patch_embed_{nullptr};
  torch::Tensor cls_token_, pos_embed_, reg_tokens_;
  nn::ModuleList blocks_{nullptr};
  nn::LayerNorm norm_{nullptr};
};
TORCH_MODULE(Vit);

nn::Conv2d conv(int in, int out, int kernel, int stride, int padding) {
  return nn::Conv2d(nn::Conv2dOptions(in, out, kernel).stride(stride).padding(padding).bias(false));
}

// torchvision's Bottleneck (stride on the 3x3 convolution, "ResNet v1.5").
class BottleneckImpl : public nn::Module {
 public:
  BottleneckImpl(int in, int planes, int stride)
      : conv1_(register_module("conv1", conv(in, planes, 1, 1, 0))),
        bn1_(register_module("bn1", nn::BatchNorm2d(planes))),
        conv2_(register_module("conv2", conv(planes, planes, 3, stride, 1))),
        bn2_(register_module("bn2", nn::BatchNorm2d(planes))),
        conv3_(register_module("conv3", conv(planes, planes * 4, 1, 1, 0))),
        bn3_(register_module("bn3", nn::BatchNorm2d(planes * 4))) {
    if (stride != 1 || in != planes * 4) {
      downsample_ = register_module("downsample", nn::Sequential(conv(in, planes * 4, 1, stride, 0),
                                                                 nn::BatchNorm2d(planes * 4)));
    }
  }

  torch::Tensor forward(const torch::Tensor& x) {
    // In place, as torchvision's Bottleneck: no new tensor per ReLU or residual add.
    auto out = bn1_->forward(conv1_->forward(x)).relu_();
    out = bn2_->forward(conv2_->forward(out)).relu_();
    out = bn3_->forward(conv3_->forward(out));
    out += downsample_ ? downsample_->forward(x) : x;
    return out.relu_();
  }

 private:
  nn::Conv2d conv1_;
  nn::BatchNorm2d bn1_;
  nn::Conv2d conv2_;
  nn::BatchNorm2d bn2_;
  nn::Conv2d conv3_;
  nn::BatchNorm2d bn3_;
  nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(Bottleneck);

// ResNet-50 stem and layers 1-3 followed by global average pooling (CLAM's resnet50_trunc).
class ResNet50TruncImpl : public nn::Module {
 public:
  ResNet50TruncImpl() {
    stem_ = register_module(
        "stem", nn::Sequential(conv(3, 64, 7, 2, 3), nn::BatchNorm2d(64), nn::ReLU(nn::ReLUOptions(true)),
                               nn::MaxPool2d(nn::MaxPool2dOptions(3).stride(2).padding(1))));
    layers_ = register_module("layers", nn::Sequential());
    int in = 64;
    const int planes[] = {64, 128, 256}, blocks[] = {3, 4, 6}, strides[] = {1, 2, 2};
    for (int l = 0; l < 3; ++l) {
      for (int b = 0; b < blocks[l]; ++b) {
        layers_->push_back(Bottleneck(in, planes[l], b == 0 ? strides[l] : 1));
        in = planes[l] * 4;
      }
    }
  }

  torch::Tensor forward(const torch::Tensor& input) {
    return torch::adaptive_avg_pool2d(layers_->forward(stem_->forward(input)), {1, 1}).flatten(1);
  }

 private:
  nn::Sequential stem_{nullptr}, layers_{nullptr};
};
TORCH_MODULE(ResNet50Trunc);

void init_vit(nn::Module& module, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  for (auto& item : module.named_parameters()) {
    const std::string& name = item.key();
    auto& p = item.value();
    if (name == "patch_embed.weight") {
      const double fan_in = static_cast<double>(p.numel() / p.size(0));
      p.normal_(0.0, 1.0 / std::sqrt(fan_in), gen);
    } else if (ends_with(name, ".bias")) {
      p.zero_();
    } else if (name.find("norm") != std::string::npos) {
      p.fill_(1.0);  // LayerNorm weights (their biases are handled above)
    } else {
      p.normal_(0.0, 0.02, gen);  // Linear weights, cls/pos/register tokens
    }
  }
}

void init_resnet(nn::Module& module, at::Generator& gen) {
  torch::NoGradGuard no_grad;
  for (auto& child : module.modules(/*include_self=*/false)) {
    if (auto* c = child->as<nn::Conv2d>()) {
      const auto& w = c->weight;
      const double fan_out = static_cast<double>(w.size(0) * w.size(2) * w.size(3));
      w.normal_(0.0, std::sqrt(2.0 / fan_out), gen);
    } else if (auto* bn = child->as<nn::BatchNorm2d>()) {
      bn->weight.fill_(1.0);
      bn->bias.zero_();
      bn->running_mean.zero_();
      bn->running_var.fill_(1.0);
    }
  }
}

template <typename Holder>
class ModuleNetwork : public Network {
 public:
  explicit ModuleNetwork(Holder module) : module_(std::move(module)) { module_->eval(); }
  at::Tensor forward(const at::Tensor& input) override { return module_->forward(input); }
  void to(c10::Device device, c10::ScalarType dtype) override { module_->to(device, dtype); }

 private:
  Holder module_;
};

}  // namespace

std::vector<std::string> builtin_names() {
  std::vector<std::string> names;
  for (const auto& info : kBuiltins) names.emplace_back(info.name);
  return names;
}

bool is_builtin(const std::string& name) {
  for (const auto& info : kBuiltins) {
    if (name == info.name) return true;
  }
  return false;
}

Preset builtin_preset(const std::string& name) {
  const BuiltinInfo& info = find_builtin(name);
  Preset preset;
  preset.name = info.name;
  preset.version = "builtin";
  preset.input_size = kInputSize;
  preset.mean = kImageNetMean;
  preset.std = kImageNetStd;
  preset.output_dim = info.output_dim;
  preset.pooling = Pooling::kCls;
  preset.prefix_tokens = info.is_vit ? 1 + info.vit.registers : 1;
  return preset;
}

std::unique_ptr<Network> make_builtin_network(const std::string& name, uint64_t seed) {
  const BuiltinInfo& info = find_builtin(name);
  at::Generator gen = at::detail::createCPUGenerator(seed);
  if (info.is_vit) {
    Vit vit(info.vit);
    init_vit(*vit, gen);
    return std::make_unique<ModuleNetwork<Vit>>(std::move(vit));
  }
  ResNet50Trunc resnet;
  init_resnet(*resnet, gen);
  return std::make_unique<ModuleNetwork<ResNet50Trunc>>(std::move(resnet));
}

}  // namespace tessera::embed::detail
