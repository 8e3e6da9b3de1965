// embed's merge over a real (tiny) patchgen run and hand-written rank shards: embeddings.h5 maps
// every index row to the shard the partition gives it, for every layout, rank count and dtype;
// the per-slide files hold each slide's rows whichever rank writes them.
#include "stages/embed/merge.h"

#include <gtest/gtest.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/mpi/comm.h"
#include "common/store/embeddings.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/patchgen.h"
#include "tests/inprocess/support.h"

namespace tessera::embed {
namespace {

namespace fs = std::filesystem;
namespace names = embedding_names;
using inprocess::ScratchDir;

constexpr int kDim = 4;

// Exact in float16 too: small integers plus quarters.
float value_of(int64_t row, int c) { return static_cast<float>(row % 100) + 0.25f * c; }

class Merge : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("embed_merge");
    const std::string manifest = inprocess::write_cohort(dir_->path().string());
    const patchgen::Config config = inprocess::stage_config(
        patchgen::option_table(),
        {"--manifest", manifest, "--out", *dir_ / "run", "--patch-size", "64", "--file-locking",
         "false", "--reader-threads", "1", "--qc", "false"},
        patchgen::config_from);
    SerialComm comm;
    ASSERT_EQ(patchgen::run(config, comm), 0);
    info_ = new IndexInfo(load_index_info(*dir_ / "run/patchgen"));
    rows_ = new IndexRows(IndexReader(info_->path).read_range(0, info_->rows));
  }
  static void TearDownTestSuite() {
    delete rows_;
    delete info_;
    delete dir_;
  }

  // A fresh stage directory with the shards of `partition`, rank r holding its rows in order.
  static std::string stage_with_shards(const std::string& name, const Partition& partition,
                                       bool fp16) {
    const std::string stage = *dir_ / name;
    fs::remove_all(stage);
    fs::create_directories(stage + "/shards");
    for (int r = 0; r < partition.size(); ++r) {
      EmbeddingShardWriter w(stage + "/shards/" + rank_file_name(r, ".h5"), kDim, fp16, r, "m");
      for (int64_t j = 0; j < partition.count(r); ++j) {
        const int64_t i = partition.global_index(r, j);
        std::vector<float> v(kDim);
        for (int c = 0; c < kDim; ++c) v[c] = value_of(i, c);
        w.append(&rows_->patch_id[i], &rows_->slide[i], &rows_->coords[2 * i], v.data(), 1);
      }
      w.close();
    }
    return stage;
  }

  static ScratchDir* dir_;
  static IndexInfo* info_;
  static IndexRows* rows_;
};

ScratchDir* Merge::dir_ = nullptr;
IndexInfo* Merge::info_ = nullptr;
IndexRows* Merge::rows_ = nullptr;

TEST_F(Merge, EmbeddingsFileMapsEveryRowToItsShardForEveryLayout) {
  ASSERT_GT(info_->rows, 20);
  for (const char* spec : {"contiguous", "cyclic", "block-cyclic:3"}) {
    for (int R : {1, 2, 3, 5}) {
      for (const char* dtype : {"fp32", "fp16"}) {
        const Partition partition(Partition::Spec::parse(spec, "partition"), info_->rows, R);
        const std::string stage = stage_with_shards("layout", partition, dtype == std::string("fp16"));
        Config config;
        config.store_dtype = dtype;
        write_embeddings_file(*info_, partition, kDim, config, {{"model", "m"}}, stage, "fp");
        EXPECT_FALSE(path_exists(stage + "/embeddings.h5.tmp"));
        const h5::File f = h5::File::open(stage + "/embeddings.h5", h5::Mode::kRead);
        const std::string where = fmt::format("{} R={} {}", spec, R, dtype);
        EXPECT_EQ(f.open_dataset(names::kPatchId).read_all<int64_t>(), rows_->patch_id) << where;
        EXPECT_EQ(f.open_dataset(names::kSlide).read_all<int32_t>(), rows_->slide) << where;
        EXPECT_EQ(f.open_dataset(names::kCoords).read_all<int64_t>(), rows_->coords) << where;
        const std::vector<float> values = f.open_dataset(names::kEmbeddings).read_all<float>();
        ASSERT_EQ(values.size(), static_cast<size_t>(info_->rows * kDim)) << where;
        for (int64_t i = 0; i < info_->rows; ++i) {
          for (int c = 0; c < kDim; ++c) {
            ASSERT_EQ(values[i * kDim + c], value_of(i, c)) << where << " row " << i;
          }
        }
        EXPECT_EQ(f.attr_int("output_dim"), kDim);
        EXPECT_EQ(f.attr_int("num_shards"), R);
        EXPECT_EQ(f.attr_string("partition"), partition.spec().to_string());
        EXPECT_EQ(f.attr_string("store_dtype"), dtype);
        EXPECT_EQ(f.attr_string("patchgen_fingerprint"), info_->config_fingerprint);
        EXPECT_EQ(f.attr_string("config_fingerprint"), "fp");
      }
    }
  }
}

TEST_F(Merge, AShardWithOtherRowsThanItsRanksIsRefusedByName) {
  const Partition written(Partition::Spec::parse("contiguous", "partition"), info_->rows, 2);
  const std::string stage = stage_with_shards("mismatch", written, false);
  const Partition asked(Partition::Spec::parse("contiguous", "partition"), info_->rows, 3);
  // Rank 2's shard does not exist; rank 0's holds more rows than rank 0 of 3 has.
  try {
    write_embeddings_file(*info_, asked, kDim, Config{}, {}, stage, "fp");
    ADD_FAILURE() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("rank-00000.h5"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(path_exists(stage + "/embeddings.h5"));
}

TEST_F(Merge, SlideFilesHoldEachSlidesRowsWhicheverRankWritesThem) {
  const Partition partition(Partition::Spec::parse("cyclic", "partition"), info_->rows, 2);
  const std::string stage = stage_with_shards("slides", partition, false);
  write_embeddings_file(*info_, partition, kDim, Config{}, {{"model", "m"}}, stage, "fp");
  SlideFilesSpec spec;
  spec.peers = PeerLayouts::parse("clam,trident");
  spec.encoder = "enc";
  const IndexReader index(info_->path);
  int64_t written = 0;
  const int world = 3;  // more ranks than slides with rows would leave one idle
  for (int r = 0; r < world; ++r) {
    written += write_slide_features(*info_, index, r, world, {{"model", "m"}}, spec, stage);
  }
  EXPECT_EQ(written, 3);
  for (size_t s = 0; s < info_->slides.size(); ++s) {
    const std::string& id = info_->slides.slide_id[s];
    const int64_t first = info_->slide_offset[s];
    const int64_t n = info_->slides.patch_count[s];
    const h5::File f = h5::File::open(stage + "/features/" + id + ".h5", h5::Mode::kRead);
    EXPECT_EQ(f.attr_string("slide_id"), id);
    const auto features = f.open_dataset(names::kFeatures).read_all<float>();
    const auto coords = f.open_dataset(names::kCoords).read_all<int64_t>();
    ASSERT_EQ(features.size(), static_cast<size_t>(n * kDim)) << id;
    ASSERT_EQ(coords.size(), static_cast<size_t>(2 * n)) << id;
    for (int64_t k = 0; k < n; ++k) {
      for (int c = 0; c < kDim; ++c) EXPECT_EQ(features[k * kDim + c], value_of(first + k, c));
      EXPECT_EQ(coords[2 * k], rows_->coords[2 * (first + k)]);
      EXPECT_EQ(coords[2 * k + 1], rows_->coords[2 * (first + k) + 1]);
    }
    for (const std::string peer : {"/clam/pt_files/" + id + ".pt", "/clam/h5_files/" + id + ".h5",
                                   "/clam/patches/" + id + ".h5", "/features_enc/" + id + ".h5",
                                   "/patches/" + id + "_patches.h5"}) {
      EXPECT_TRUE(file_size(stage + peer).value_or(0) > 0) << peer;
    }
  }
  write_status_table(*info_, stage);
  const std::string table = inprocess::file_bytes(stage + "/slides.csv");
  for (const char* id : {"\na,", "\nb,", "\nc,"}) EXPECT_NE(table.find(id), std::string::npos) << table;
}

TEST_F(Merge, SlideFilesRefuseEmbeddingsOfAnotherIndex) {
  const Partition partition(Partition::Spec::parse("contiguous", "partition"), info_->rows, 1);
  const std::string stage = *dir_ / "other";
  fs::remove_all(stage);
  fs::create_directories(stage + "/shards");
  {
    // Patch ids shifted by one: the rows of another patch run.
    EmbeddingShardWriter w(stage + "/shards/" + rank_file_name(0, ".h5"), kDim, false, 0, "m");
    std::vector<int64_t> ids = rows_->patch_id;
    for (auto& id : ids) ++id;
    const std::vector<float> values(static_cast<size_t>(info_->rows) * kDim, 1.0f);
    w.append(ids.data(), rows_->slide.data(), rows_->coords.data(), values.data(),
             static_cast<size_t>(info_->rows));
    w.close();
  }
  write_embeddings_file(*info_, partition, kDim, Config{}, {}, stage, "fp");
  SlideFilesSpec spec;
  spec.peers = PeerLayouts::parse("none");
  const IndexReader index(info_->path);
  try {
    write_slide_features(*info_, index, 0, 1, {}, spec, stage);
    ADD_FAILURE() << "no exception";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("disagree with the patch index"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace tessera::embed
