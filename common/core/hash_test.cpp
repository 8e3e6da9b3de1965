#include "common/core/hash.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>

#include "common/core/error.h"
#include "common/core/fs.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

class HashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessera_hash_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

std::string random_bytes(size_t n, unsigned seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(Xxh3Test, KnownVectorAndSensitivity) {
  // XXH3-128 of the empty input, canonical (big-endian) form, from the xxHash reference.
  EXPECT_EQ(xxh3_hex(""), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(xxh3_hex("abc").size(), 32u);
  EXPECT_NE(xxh3_hex("abc"), xxh3_hex("abd"));
}

TEST_F(HashTest, FileHashStreamsAcrossBlocks) {
  const std::string content = random_bytes(9 * 1024 * 1024 + 123, 7);
  atomic_write_file(path("big.bin"), content);
  EXPECT_EQ(xxh3_file(path("big.bin")), xxh3_hex(content));
  EXPECT_THROW(xxh3_file(path("missing")), IoError);
}

TEST_F(HashTest, EndsCatchTruncationAndDamageAtEitherEnd) {
  const std::string content = random_bytes(1 << 20, 3);
  atomic_write_file(path("a"), content);
  const std::string base = xxh3_ends(path("a"));
  EXPECT_EQ(xxh3_ends(path("a")), base);
  std::string damaged = content;
  damaged[10] ^= 1;
  atomic_write_file(path("b"), damaged);
  EXPECT_NE(xxh3_ends(path("b")), base);
  damaged = content;
  damaged[content.size() - 10] ^= 1;
  atomic_write_file(path("b"), damaged);
  EXPECT_NE(xxh3_ends(path("b")), base);
  atomic_write_file(path("b"), content.substr(0, content.size() - 1));
  EXPECT_NE(xxh3_ends(path("b")), base);
  // The middle is not read: that is what --verify full and the per-chunk checksums are for.
  damaged = content;
  damaged[content.size() / 2] ^= 1;
  atomic_write_file(path("b"), damaged);
  EXPECT_EQ(xxh3_ends(path("b")), base);
  // Small files are hashed whole.
  atomic_write_file(path("small"), "abc");
  atomic_write_file(path("small2"), "abd");
  EXPECT_NE(xxh3_ends(path("small")), xxh3_ends(path("small2")));
}

}  // namespace
}  // namespace tessera
