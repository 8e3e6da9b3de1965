#include "common/store/store.h"

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>

#include "common/core/error.h"
#include "common/h5/h5.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

std::vector<uint8_t> random_patch(int size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> p(static_cast<size_t>(size) * size * 3);
  for (auto& v : p) v = static_cast<uint8_t>(rng());
  return p;
}

class StoreTest : public ::testing::TestWithParam<std::string> {};

// Damage inside the pixels fails the read of that chunk, naming the shard, for both encodings;
// the other chunks still read.
TEST_P(StoreTest, DamagedPixelsFailTheirChunksRead) {
  const std::string encoding = GetParam();
  const auto path =
      (fs::temp_directory_path() / ("tessera_store_damage_" + encoding + ".h5")).string();
  StoreLayout layout;
  layout.patch_size = 64;
  layout.encoding = encoding;
  layout.chunk_patches = 8;
  std::vector<uint8_t> p = random_patch(64, 5);
  {
    ShardWriter writer(path, layout, 0, 1);
    for (int i = 0; i < 40; ++i) writer.add(i, 0, i, i, 0.5f, p.data());
    writer.close();
  }
  std::vector<uint8_t> out(64 * 64 * 3);
  ShardReader(path).read_patches({0}, out.data());
  {
    // Flip bytes in the middle of the file: inside some chunk of pixels (or JPEG blobs).
    std::fstream io(path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekg(0, std::ios::end);
    const auto size = static_cast<std::streamoff>(io.tellg());
    io.seekp(size / 2);
    const std::string junk(64, '\x42');
    io.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  ShardReader reader(path);
  int failures = 0;
  for (uint64_t row = 0; row < 40; row += 8) {
    try {
      reader.read_patches({row}, out.data());
    } catch (const IoError& e) {
      ++failures;
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  EXPECT_GE(failures, 1);
  EXPECT_LT(failures, 5);
  fs::remove(path);
}

TEST_P(StoreTest, WriteThenReadRowsAndColumns) {
  const std::string encoding = GetParam();
  const auto path = (fs::temp_directory_path() / ("tessera_store_" + encoding + ".h5")).string();
  StoreLayout layout;
  layout.patch_size = 32;
  layout.encoding = encoding;
  layout.jpeg_quality = 95;
  layout.chunk_patches = 4;
  const int n = 11;  // not a multiple of the chunk
  std::vector<std::vector<uint8_t>> patches;
  {
    ShardWriter writer(path, layout, 1, 3);
    for (int i = 0; i < n; ++i) {
      // Smooth content so JPEG stays close to the original.
      std::vector<uint8_t> p(32 * 32 * 3);
      for (size_t k = 0; k < p.size(); ++k) p[k] = static_cast<uint8_t>((k / 3 % 32) * 4 + i * 7);
      patches.push_back(p);
      writer.add((int64_t{i} + (int64_t{2} << 32)), 0, 10 * i, 20 * i, 0.5f + 0.01f * i, p.data());
    }
    writer.close();
    EXPECT_EQ(writer.rows(), n);
  }
  ShardReader reader(path);
  EXPECT_EQ(reader.rows(), n);
  EXPECT_EQ(reader.patch_size(), 32);
  EXPECT_EQ(reader.encoding(), encoding);
  ShardColumns c = reader.read_columns();
  ASSERT_EQ(c.patch_id.size(), static_cast<size_t>(n));
  EXPECT_EQ(c.patch_id[5], (int64_t{5} + (int64_t{2} << 32)));
  EXPECT_EQ(c.coords[2 * 5], 50);
  EXPECT_EQ(c.coords[2 * 5 + 1], 100);
  EXPECT_FLOAT_EQ(c.tissue[5], 0.55f);
  // A range of the columns is that slice of the whole; an empty range is empty; past the end is
  // refused naming the shard.
  const ShardColumns part = reader.read_columns(3, 5);
  EXPECT_EQ(part.patch_id, std::vector<int64_t>(c.patch_id.begin() + 3, c.patch_id.begin() + 8));
  EXPECT_EQ(part.slide, std::vector<int32_t>(c.slide.begin() + 3, c.slide.begin() + 8));
  EXPECT_EQ(part.coords, std::vector<int64_t>(c.coords.begin() + 6, c.coords.begin() + 16));
  EXPECT_EQ(part.tissue, std::vector<float>(c.tissue.begin() + 3, c.tissue.begin() + 8));
  EXPECT_TRUE(reader.read_columns(n, 0).patch_id.empty());
  try {
    reader.read_columns(n - 2, 3);
    ADD_FAILURE() << "rows past the end were read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  EXPECT_EQ(patch_shard_file(7), "shards/rank-00007.h5");
  std::vector<uint64_t> rows = {0, 3, 4, 5, 10};
  std::vector<uint8_t> out(rows.size() * 32 * 32 * 3);
  reader.read_patches(rows, out.data());
  for (size_t r = 0; r < rows.size(); ++r) {
    const uint8_t* got = out.data() + r * 32 * 32 * 3;
    const auto& want = patches[rows[r]];
    int max_diff = 0;
    for (size_t k = 0; k < want.size(); ++k) max_diff = std::max(max_diff, std::abs(got[k] - want[k]));
    if (encoding == "raw") {
      EXPECT_EQ(max_diff, 0) << "row " << rows[r];
    } else {
      EXPECT_LE(max_diff, 12) << "row " << rows[r];
    }
  }
  fs::remove(path);
}

// add_rows in runs of any length, mixed with add(), gives the shard add() alone gives: the same
// columns, pixels and per-chunk checksums (which the reader verifies on every chunk it reads).
TEST_P(StoreTest, AddRowsInAnyRunsEqualsAddingOneByOne) {
  const std::string encoding = GetParam();
  const fs::path dir = fs::temp_directory_path();
  const std::string one = (dir / ("tessera_store_one_" + encoding + ".h5")).string();
  const std::string runs = (dir / ("tessera_store_runs_" + encoding + ".h5")).string();
  StoreLayout layout;
  layout.patch_size = 16;
  layout.encoding = encoding;
  layout.chunk_patches = 8;
  const size_t n = 61, bytes = 16 * 16 * 3;
  std::vector<uint8_t> pixels(n * bytes);
  std::mt19937 rng(3);
  for (auto& v : pixels) v = static_cast<uint8_t>(rng());
  std::vector<int64_t> ids(n), xy(2 * n);
  std::vector<int32_t> slides(n);
  std::vector<float> tissue(n);
  for (size_t i = 0; i < n; ++i) {
    ids[i] = static_cast<int64_t>(i) * 3;
    slides[i] = static_cast<int32_t>(i / 20);
    xy[2 * i] = static_cast<int64_t>(i) * 16;
    xy[2 * i + 1] = static_cast<int64_t>(i) * 32;
    tissue[i] = 0.01f * static_cast<float>(i);
  }
  {
    ShardWriter writer(one, layout, 0, 1);
    for (size_t i = 0; i < n; ++i) {
      writer.add(ids[i], slides[i], xy[2 * i], xy[2 * i + 1], tissue[i], pixels.data() + i * bytes);
    }
    writer.close();
  }
  {
    ShardWriter writer(runs, layout, 0, 1);
    size_t i = 0;
    for (size_t run : {1, 7, 8, 2, 0, 3, 17, 1}) {  // then single rows through add() to the end
      writer.add_rows(run, ids.data() + i, slides.data() + i, xy.data() + 2 * i, tissue.data() + i,
                      pixels.data() + i * bytes);
      i += run;
      writer.add(ids[i], slides[i], xy[2 * i], xy[2 * i + 1], tissue[i], pixels.data() + i * bytes);
      ++i;
    }
    writer.add_rows(n - i, ids.data() + i, slides.data() + i, xy.data() + 2 * i,
                    tissue.data() + i, pixels.data() + i * bytes);
    writer.close();
    EXPECT_EQ(writer.rows(), static_cast<int64_t>(n));
  }
  ShardReader a(one), b(runs);
  ASSERT_EQ(b.rows(), static_cast<int64_t>(n));
  const ShardColumns ca = a.read_columns(), cb = b.read_columns();
  EXPECT_EQ(ca.patch_id, cb.patch_id);
  EXPECT_EQ(ca.slide, cb.slide);
  EXPECT_EQ(ca.coords, cb.coords);
  EXPECT_EQ(ca.tissue, cb.tissue);
  std::vector<uint64_t> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i] = i;
  std::vector<uint8_t> pa(n * bytes), pb(n * bytes);
  a.read_patches(rows, pa.data());
  b.read_patches(rows, pb.data());
  EXPECT_TRUE(pa == pb);
  if (encoding == "raw") EXPECT_TRUE(pb == pixels);
  auto sums = [](const std::string& path) {
    return h5::File::open(path, h5::Mode::kRead).open_dataset("patches_xxh3").read_all<int64_t>();
  };
  EXPECT_EQ(sums(one), sums(runs));
  EXPECT_EQ(sums(runs).size(), (n + 7) / 8);
  fs::remove(one);
  fs::remove(runs);
}

INSTANTIATE_TEST_SUITE_P(Encodings, StoreTest, ::testing::Values("raw", "jpeg"));

// Compressed raw chunks (a filter, and chunks never zero-filled) written in runs that start and
// end inside chunks read back exactly.
TEST(Store, DeflatedRawChunksWrittenInPartsReadBack) {
  const auto path = (fs::temp_directory_path() / "tessera_store_deflate_parts.h5").string();
  StoreLayout layout;
  layout.patch_size = 16;
  layout.chunk_patches = 8;
  layout.deflate_level = 1;
  const size_t n = 21, bytes = 16 * 16 * 3;
  std::vector<uint8_t> pixels(n * bytes);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<uint8_t>(i / 7);
  std::vector<int64_t> ids(n), xy(2 * n, 0);
  std::vector<int32_t> slides(n, 0);
  std::vector<float> tissue(n, 1.0f);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int64_t>(i);
  {
    ShardWriter writer(path, layout, 0, 1);
    for (size_t first : {size_t{0}, size_t{5}, size_t{11}}) {
      const size_t count = first == 11 ? n - 11 : 6 - (first == 5 ? 0 : 1);
      writer.add_rows(count, ids.data() + first, slides.data() + first, xy.data() + 2 * first,
                      tissue.data() + first, pixels.data() + first * bytes);
    }
    writer.close();
  }
  ShardReader reader(path);
  ASSERT_EQ(reader.rows(), static_cast<int64_t>(n));
  std::vector<uint64_t> rows(n);
  for (size_t i = 0; i < n; ++i) rows[i] = i;
  std::vector<uint8_t> got(n * bytes);
  reader.read_patches(rows, got.data());
  EXPECT_TRUE(got == pixels);
  fs::remove(path);
}

// A failed write (here: the file-size limit, as on a full disk) is an IoError naming the shard.
// The limit is lifted before the writer is destroyed: HDF5 cannot close a file it cannot flush.
TEST(Store, WriteFailureNamesShard) {
  const auto path = (fs::temp_directory_path() / "tessera_store_efbig.h5").string();
  StoreLayout layout;
  layout.patch_size = 64;
  layout.chunk_patches = 4;
  std::vector<uint8_t> rgb(64 * 64 * 3, 100);
  struct rlimit saved {};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &saved), 0);
  auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  struct rlimit limited = saved;
  limited.rlim_cur = 256 << 10;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &limited), 0);
  std::string message;
  {
    ShardWriter writer(path, layout, 0, 1);
    try {
      for (int i = 0; i < 200; ++i) writer.add(i, 0, 0, 0, 1.0f, rgb.data());
      writer.close();
    } catch (const IoError& e) {
      message = e.what();
    }
    setrlimit(RLIMIT_FSIZE, &saved);
    std::signal(SIGXFSZ, old_handler);
  }
  EXPECT_NE(message.find(path), std::string::npos) << message;
  fs::remove(path);
}

TEST(Store, CompressionParsing) {
  EXPECT_EQ(parse_compression("none"), 0);
  EXPECT_EQ(parse_compression("deflate"), 4);
  EXPECT_EQ(parse_compression("deflate:9"), 9);
  EXPECT_THROW(parse_compression("deflate:0"), InvalidInput);
  EXPECT_THROW(parse_compression("zstd"), InvalidInput);
}

TEST(Store, JpegRoundTripAndCorruptData) {
  auto p = random_patch(16, 3);
  auto jpeg = encode_jpeg(p.data(), 16, 16, 90);
  std::vector<uint8_t> out(p.size());
  decode_jpeg(jpeg.data(), jpeg.size(), 16, 16, out.data());
  EXPECT_THROW(decode_jpeg(jpeg.data(), jpeg.size(), 32, 32, out.data()), IoError);
  std::vector<uint8_t> junk(100, 7);
  EXPECT_THROW(decode_jpeg(junk.data(), junk.size(), 16, 16, out.data()), IoError);
}

TEST(Store, MissingShardNamesFile) {
  try {
    ShardReader reader("/nonexistent/rank-00000.h5");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/rank-00000.h5"), std::string::npos);
  }
}

}  // namespace
}  // namespace tessera
