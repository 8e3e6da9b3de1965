// A TorchScript slide encoder with TRIDENT's calling convention: forward(features, coords,
// patch_size_level0) where features is float32 [1, N, D] (a slide's patch features), coords int64
// [1, N, 2] (level-0 x, y of each patch's top-left corner) and patch_size_level0 an int (level-0
// pixels per patch side), returning float [1, D'] or [D']. stages/embed/tools/
// export_slide_encoder.py wraps TRIDENT's encoders (TITAN, PRISM, CHIEF, GigaPath, ...) into such
// a module. The only translation unit of aggregate that includes torch headers.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tessera::aggregate {

class SlideEncoder {
 public:
  // Loads the module onto `device` ("cpu", "cuda", "cuda:N") in eval mode. Throws InvalidInput
  // naming the file when it is not a TorchScript module, or the device does not exist.
  static SlideEncoder load(const std::string& path, const std::string& device);
  SlideEncoder(SlideEncoder&&) noexcept;
  SlideEncoder& operator=(SlideEncoder&&) noexcept;
  ~SlideEncoder();

  // Encodes one slide: `features` rows x dim, `coords` rows x 2. Returns the output vector (float).
  // Throws InvalidInput naming `what` when the module fails or returns anything but one vector of
  // finite values. Not thread-safe.
  std::vector<float> encode(const std::vector<float>& features, int64_t rows, int dim,
                            const std::vector<int64_t>& coords, int64_t patch_size_level0,
                            const std::string& what) const;

  // The libtorch version, for the fingerprint.
  static std::string torch_version();

 private:
  struct Impl;
  explicit SlideEncoder(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera::aggregate
