#include "common/store/pt_tensor.h"

#include <cstdio>

#include <ATen/ops/from_blob.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera {

void write_pt_tensor(const std::string& path, const std::vector<float>& values, int64_t rows,
                     int64_t dim) {
  if (static_cast<int64_t>(values.size()) != rows * dim) {
    fail<Error>("write_pt_tensor '{}': {} values for [{}, {}]", path, values.size(), rows, dim);
  }
  // from_blob does not copy; pickle_save serialises the storage into its own buffer. A const_cast
  // is safe: the tensor is only read.
  const at::Tensor t = at::from_blob(const_cast<float*>(values.data()), {rows, dim}, at::kFloat);
  // torch::jit::pickle_save writes torch.save's zip format (torch.load reads it); torch::save writes
  // a TorchScript archive that torch.load does not.
  const std::vector<char> bytes = torch::jit::pickle_save(t);
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) fail<IoError>("cannot create '{}'", tmp);
  const size_t n = std::fwrite(bytes.data(), 1, bytes.size(), f);
  const bool closed = std::fclose(f) == 0;
  if (n != bytes.size() || !closed) fail<IoError>("cannot write '{}'", tmp);
  commit_file(tmp, path);
}

}  // namespace tessera
