// embed_rows, one rank's loop, over a real (tiny) patchgen run: each rank writes exactly the index
// rows the partition gives it, in index order, with their ids, slides and coordinates; the
// vectors are the model's for those patches whatever the batch size, prefetch depth or layout.
#include <gtest/gtest.h>

#include <map>

#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/mpi/comm.h"
#include "common/store/embeddings.h"
#include "stages/embed/config.h"
#include "stages/embed/infer.h"
#include "stages/embed/model.h"
#include "stages/embed/source.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/patchgen.h"
#include "tests/inprocess/support.h"

namespace tessera::embed {
namespace {

namespace fs = std::filesystem;
namespace names = embedding_names;
using inprocess::ScratchDir;

struct ShardRows {
  std::vector<int64_t> patch_id, coords;
  std::vector<int32_t> slide;
  std::vector<float> values;
};

ShardRows read_shard(const std::string& path) {
  const h5::File f = h5::File::open(path, h5::Mode::kRead);
  ShardRows s;
  s.patch_id = f.open_dataset(names::kPatchId).read_all<int64_t>();
  s.slide = f.open_dataset(names::kSlide).read_all<int32_t>();
  s.coords = f.open_dataset(names::kCoords).read_all<int64_t>();
  s.values = f.open_dataset(names::kEmbeddings).read_all<float>();
  return s;
}

class EmbedRows : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new ScratchDir("embed_rows");
    const std::string manifest = inprocess::write_cohort(dir_->path().string());
    const patchgen::Config config = inprocess::stage_config(
        patchgen::option_table(),
        {"--manifest", manifest, "--out", *dir_ / "run", "--patch-size", "64", "--file-locking",
         "false", "--reader-threads", "1", "--qc", "false"},
        patchgen::config_from);
    SerialComm comm;
    ASSERT_EQ(patchgen::run(config, comm), 0);
    info_ = new IndexInfo(load_index_info(*dir_ / "run/patchgen"));
  }
  static void TearDownTestSuite() {
    delete info_;
    delete dir_;
  }

  static Config embed_config(std::vector<std::string> extra) {
    std::vector<std::string> args = {"--run", *dir_ / "run", "--model", "vit-tiny",
                                     "--torch-threads", "1", "--deterministic"};
    args.insert(args.end(), extra.begin(), extra.end());
    return inprocess::stage_config(option_table(), args, config_from);
  }

  // Runs every rank of `partition` one after the other; returns each rank's shard.
  static std::vector<ShardRows> run_ranks(const Partition& partition, const Config& config,
                                          const std::string& name) {
    const Model model = Model::load(model_spec(config, 0));
    const IndexReader index(info_->path);
    std::vector<ShardRows> shards;
    for (int r = 0; r < partition.size(); ++r) {
      auto source = make_source("store", *info_);
      const std::string shard = *dir_ / fmt::format("{}-rank{}.h5", name, r);
      const InferStats stats = embed_rows(*info_, index, partition, r, model, *source, config,
                                          shard, *dir_ / fmt::format("{}-{}.jsonl", name, r));
      EXPECT_EQ(stats.patches, partition.count(r));
      shards.push_back(read_shard(shard));
    }
    return shards;
  }

  static ScratchDir* dir_;
  static IndexInfo* info_;
};

ScratchDir* EmbedRows::dir_ = nullptr;
IndexInfo* EmbedRows::info_ = nullptr;

TEST_F(EmbedRows, EachRankWritesItsRowsInIndexOrderWithTheSameVectorsForAnyBatching) {
  ASSERT_GT(info_->rows, 20);
  const IndexRows rows = IndexReader(info_->path).read_range(0, info_->rows);
  // The reference: one rank, one patch per batch, nothing prefetched.
  const std::vector<ShardRows> one =
      run_ranks(Partition(Partition::Spec::parse("contiguous", "p"), info_->rows, 1),
                embed_config({"--batch-size", "1", "--prefetch", "1"}), "one");
  ASSERT_EQ(one[0].patch_id, rows.patch_id);
  ASSERT_EQ(one[0].slide, rows.slide);
  ASSERT_EQ(one[0].coords, rows.coords);
  const size_t dim = one[0].values.size() / rows.size();
  ASSERT_EQ(one[0].values.size(), dim * rows.size());
  std::map<int64_t, std::vector<float>> vector_of;
  for (size_t i = 0; i < rows.size(); ++i) {
    vector_of[rows.patch_id[i]].assign(one[0].values.begin() + i * dim,
                                       one[0].values.begin() + (i + 1) * dim);
  }
  int n = 0;
  for (const char* layout : {"contiguous", "block-cyclic:4"}) {
    for (const std::vector<std::string>& batching :
         {std::vector<std::string>{"--batch-size", "7", "--prefetch", "3"},
          std::vector<std::string>{"--batch-size", "64", "--prefetch", "1"}}) {
      SCOPED_TRACE(fmt::format("{} {} {}", layout, batching[1], batching[3]));
      const Partition partition(Partition::Spec::parse(layout, "p"), info_->rows, 3);
      const auto shards = run_ranks(partition, embed_config(batching), fmt::format("r3-{}", n++));
      for (int r = 0; r < 3; ++r) {
        const ShardRows& s = shards[r];
        ASSERT_EQ(static_cast<int64_t>(s.patch_id.size()), partition.count(r));
        for (int64_t j = 0; j < partition.count(r); ++j) {
          const int64_t i = partition.global_index(r, j);
          EXPECT_EQ(s.patch_id[j], rows.patch_id[i]) << "rank " << r << " row " << j;
          EXPECT_EQ(s.slide[j], rows.slide[i]);
          EXPECT_EQ(s.coords[2 * j], rows.coords[2 * i]);
          EXPECT_EQ(s.coords[2 * j + 1], rows.coords[2 * i + 1]);
          const std::vector<float> v(s.values.begin() + j * dim, s.values.begin() + (j + 1) * dim);
          EXPECT_EQ(v, vector_of.at(s.patch_id[j])) << "patch " << s.patch_id[j];
        }
      }
    }
  }
}

// A rank that owns no rows (more ranks than rows) still writes a valid, empty shard.
TEST_F(EmbedRows, ARankWithoutRowsWritesAnEmptyShard) {
  const Partition partition(Partition::Spec::parse("contiguous", "p"), 2, 3);
  const IndexInfo& info = *info_;
  const Config config = embed_config({"--batch-size", "4"});
  const Model model = Model::load(model_spec(config, 0));
  auto source = make_source("store", info);
  const std::string shard = *dir_ / "empty.h5";
  EXPECT_EQ(embed_rows(info, IndexReader(info.path), partition, 2, model, *source, config, shard,
                       *dir_ / "empty.jsonl")
                .patches,
            0);
  const ShardRows s = read_shard(shard);
  EXPECT_TRUE(s.patch_id.empty());
  EXPECT_TRUE(s.values.empty());
}

}  // namespace
}  // namespace tessera::embed
