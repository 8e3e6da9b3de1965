// The .pt tensor writer: what it writes loads back through libtorch's unpickler (the reader of
// torch.load's format) as the same tensor; equal inputs give equal bytes; a size mismatch and an
// unwritable path are refused.
#include "common/store/pt_tensor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include <torch/csrc/jit/serialization/pickle.h>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct PtDir {
  fs::path path = fs::temp_directory_path() / ("tessera_pt_tensor_test_" + std::to_string(getpid()));
  PtDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~PtDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

at::Tensor load(const std::string& path) {
  const std::string bytes = read_file(path);
  return torch::jit::pickle_load(std::vector<char>(bytes.begin(), bytes.end())).toTensor();
}

TEST(PtTensor, LoadsBackAsTheSameTensor) {
  PtDir dir;
  const std::vector<float> v = {1, 2, 3, 4, 5, 6.5f};
  write_pt_tensor(dir.file("a.pt"), v, 2, 3);
  EXPECT_FALSE(fs::exists(dir.file("a.pt.tmp")));
  const at::Tensor t = load(dir.file("a.pt"));
  ASSERT_EQ(t.dim(), 2);
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(1), 3);
  EXPECT_EQ(t.scalar_type(), at::kFloat);
  const at::Tensor c = t.contiguous();
  EXPECT_EQ(std::vector<float>(c.data_ptr<float>(), c.data_ptr<float>() + 6), v);
  write_pt_tensor(dir.file("b.pt"), v, 2, 3);
  EXPECT_EQ(read_file(dir.file("a.pt")), read_file(dir.file("b.pt")));
  write_pt_tensor(dir.file("empty.pt"), {}, 0, 3);
  const at::Tensor e = load(dir.file("empty.pt"));
  EXPECT_EQ(e.size(0), 0);
  EXPECT_EQ(e.size(1), 3);
}

TEST(PtTensor, SizeMismatchAndUnwritablePathAreRefused) {
  PtDir dir;
  const std::vector<float> v = {1, 2, 3, 4, 5, 6};
  EXPECT_THROW(write_pt_tensor(dir.file("bad.pt"), v, 3, 3), Error);
  EXPECT_FALSE(fs::exists(dir.file("bad.pt")));
  const std::string missing = dir.file("no/such/a.pt");
  try {
    write_pt_tensor(missing, v, 2, 3);
    FAIL() << "a tensor was written into a missing folder";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
