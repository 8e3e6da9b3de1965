// embed's exchanged files: the rank shard writer, embeddings.h5 over the shards (written and read
// back through the virtual datasets) and the paths store gives for them.
#include "common/store/embeddings.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

struct EmbedDir {
  fs::path path = fs::temp_directory_path() / ("tessera_embeddings_test_" + std::to_string(getpid()));
  EmbedDir() {
    fs::remove_all(path);
    fs::create_directories(path / "shards");
  }
  ~EmbedDir() { fs::remove_all(path); }
};

// Row g of the index: patch id 100 + g, slide g / 4, coords (g, 2g), values g + k / 10.
void write_shard(const fs::path& dir, int rank, const std::vector<int64_t>& global_rows, int dim,
                 bool fp16) {
  EmbeddingShardWriter w((dir / embedding_shard_file(rank)).string(), dim, fp16, rank, "{}");
  for (int64_t g : global_rows) {
    const int64_t id = 100 + g;
    const int32_t slide = static_cast<int32_t>(g / 4);
    const int64_t xy[2] = {g, 2 * g};
    std::vector<float> v(dim);
    for (int k = 0; k < dim; ++k) v[k] = static_cast<float>(g) + k / 10.0f;
    w.append(&id, &slide, xy, v.data(), 1);
  }
  EXPECT_EQ(w.rows(), static_cast<int64_t>(global_rows.size()));
  w.close();
}

EmbeddingsAttributes attributes_of(int dim, const std::string& dtype) {
  EmbeddingsAttributes a;
  a.output_dim = dim;
  a.store_dtype = dtype;
  a.model_fingerprint = R"({"model":"m"})";
  a.config_fingerprint = "cfg";
  a.patchgen_fingerprint = "pg";
  a.patch_size = 224;
  a.mpp = 0.5;
  a.partition = "cyclic:2";
  a.num_shards = 2;
  return a;
}

TEST(EmbeddingFiles, PathsAreTheDocumentedLayout) {
  EXPECT_EQ(embedding_shard_file(3), "shards/rank-00003.h5");
  EXPECT_EQ(embeddings_path("/r/embed/t"), "/r/embed/t/embeddings.h5");
  EXPECT_EQ(slide_features_dir("/r/embed/t"), "/r/embed/t/features");
  EXPECT_EQ(slide_features_file("S1"), "features/S1.h5");
  EXPECT_EQ(slide_features_path("/r/embed/t", "S1"), "/r/embed/t/features/S1.h5");
}

// Nine rows over two ranks, block-cyclic by 2 (rank 0: 0 1 4 5 8, rank 1: 2 3 6 7): the
// regular mapping of full blocks plus the short last block of rank 0 put every row in place.
TEST(EmbeddingFiles, ShardsAndEmbeddingsFileRoundTrip) {
  for (const std::string dtype : {"fp32", "fp16"}) {
    EmbedDir dir;
    const int dim = 3;
    write_shard(dir.path, 0, {0, 1, 4, 5, 8}, dim, dtype == "fp16");
    write_shard(dir.path, 1, {2, 3, 6, 7}, dim, dtype == "fp16");
    const std::vector<ShardRows> mappings = {
        {0, 0, 4, 2, 2, 0}, {0, 8, 1, 1, 1, 4}, {1, 2, 4, 2, 2, 0}};
    write_embeddings_file(dir.path.string(), 9, {5, 4}, mappings, attributes_of(dim, dtype));
    EXPECT_FALSE(fs::exists(embeddings_path(dir.path.string()) + ".tmp"));

    const EmbeddingsReader reader(embeddings_path(dir.path.string()));
    ASSERT_EQ(reader.rows(), 9);
    ASSERT_EQ(reader.dim(), dim);
    std::vector<int64_t> ids(9);
    reader.read_ids(ids.data(), 0, 9);
    std::vector<float> values(9 * dim);
    reader.read_values(values.data(), 0, 9);
    for (int64_t g = 0; g < 9; ++g) {
      EXPECT_EQ(ids[g], 100 + g) << dtype;
      for (int k = 0; k < dim; ++k) {
        EXPECT_NEAR(values[g * dim + k], g + k / 10.0f, dtype == "fp16" ? 0.01 : 0) << dtype;
      }
    }
    std::vector<int64_t> two(2);
    reader.read_ids(two.data(), 7, 2);
    EXPECT_EQ(two, (std::vector<int64_t>{107, 108}));
    const EmbeddingsAttributes a = reader.attributes();
    EXPECT_EQ(a.output_dim, dim);
    EXPECT_EQ(a.store_dtype, dtype);
    EXPECT_EQ(a.model_fingerprint, R"({"model":"m"})");
    EXPECT_EQ(a.patchgen_fingerprint, "pg");
    EXPECT_EQ(a.partition, "cyclic:2");
    EXPECT_EQ(a.num_shards, 2);

    // A rank shard reads through the same reader, in its own order.
    const EmbeddingsReader shard((dir.path / embedding_shard_file(1)).string());
    ASSERT_EQ(shard.rows(), 4);
    shard.read_ids(ids.data(), 0, 4);
    EXPECT_EQ(std::vector<int64_t>(ids.begin(), ids.begin() + 4),
              (std::vector<int64_t>{102, 103, 106, 107}));
    EXPECT_THROW(shard.attributes(), IoError);
  }
}

TEST(EmbeddingFiles, ShardOfOtherRowsIsRefusedNamingIt) {
  EmbedDir dir;
  write_shard(dir.path, 0, {0, 1, 2}, 3, false);
  write_shard(dir.path, 1, {3}, 3, false);
  try {
    write_embeddings_file(dir.path.string(), 5, {3, 2}, {{0, 0, 1, 3, 1, 0}, {1, 3, 1, 2, 1, 0}},
                          attributes_of(3, "fp32"));
    FAIL() << "a shard short of its rows was taken";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("rank-00001.h5"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(embeddings_path(dir.path.string())));
}

TEST(EmbeddingFiles, ReaderRefusesWhatIsNotAnEmbedOutput) {
  EmbedDir dir;
  const std::string other = (dir.path / "other.h5").string();
  {
    h5::File f = h5::File::open(other, h5::Mode::kCreateTruncate);
    f.set_attr("format_version", kEmbedFormatVersion);
    const std::vector<int64_t> ids = {1, 2};
    f.write_vector<int64_t>(embedding_names::kPatchId, ids);
    f.close();
  }
  for (const std::string& path : {other, (dir.path / "missing.h5").string()}) {
    try {
      EmbeddingsReader reader(path);
      FAIL() << path << " was read";
    } catch (const IoError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  // A complete shard of another format version.
  write_shard(dir.path, 0, {0, 1}, 3, false);
  const std::string shard = (dir.path / embedding_shard_file(0)).string();
  EXPECT_EQ(EmbeddingsReader(shard).rows(), 2);
  {
    h5::File f = h5::File::open(shard, h5::Mode::kReadWrite);
    f.set_attr("format_version", kEmbedFormatVersion + 1);
    f.close();
  }
  try {
    EmbeddingsReader reader(shard);
    FAIL() << "a shard of another format version was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("format version"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessera
