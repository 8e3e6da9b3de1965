#include "common/vector/vector_index.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "common/core/error.h"
#include "common/vector/topk.h"

namespace tessera {
namespace {

namespace fs = std::filesystem;

constexpr int kDim = 32;

// n vectors around `clusters` random centres, unit length (so IP and L2 agree on order).
std::vector<float> clustered(int64_t n, int clusters, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> centres(static_cast<size_t>(clusters) * kDim);
  for (auto& v : centres) v = normal(rng);
  std::vector<float> x(static_cast<size_t>(n) * kDim);
  std::uniform_int_distribution<int> pick(0, clusters - 1);
  for (int64_t i = 0; i < n; ++i) {
    const int c = pick(rng);
    for (int j = 0; j < kDim; ++j) x[i * kDim + j] = centres[c * kDim + j] + 0.3f * normal(rng);
  }
  l2_normalize(x.data(), n, kDim);
  return x;
}

std::vector<int64_t> caller_ids(int64_t n) {
  std::vector<int64_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[i] = 1000 + 7 * i;
  return ids;
}

struct Results {
  std::vector<float> scores;
  std::vector<int64_t> ids;
};

Results run(const VectorIndex& index, const std::vector<float>& queries,
            const SearchOptions& options) {
  const int64_t nq = static_cast<int64_t>(queries.size()) / index.dim();
  Results r;
  r.scores.resize(static_cast<size_t>(nq * options.k));
  r.ids.resize(static_cast<size_t>(nq * options.k));
  index.search(queries.data(), nq, options, r.scores.data(), r.ids.data());
  return r;
}

// Exact best-first top k over the allowed vectors, ties by ascending id.
Results brute_force(const std::vector<float>& x, const std::vector<int64_t>& ids,
                    const std::vector<float>& queries, int k, Metric metric,
                    const IdFilter* filter = nullptr) {
  const int64_t n = static_cast<int64_t>(ids.size());
  const int64_t nq = static_cast<int64_t>(queries.size()) / kDim;
  const bool higher = metric == Metric::kInnerProduct;
  Results r;
  for (int64_t q = 0; q < nq; ++q) {
    std::vector<Neighbor> all;
    for (int64_t i = 0; i < n; ++i) {
      if (filter && !filter->allows(ids[i])) continue;
      double s = 0;
      for (int j = 0; j < kDim; ++j) {
        const double a = queries[q * kDim + j], b = x[i * kDim + j];
        s += higher ? a * b : (a - b) * (a - b);
      }
      all.push_back({static_cast<float>(s), ids[i]});
    }
    const auto best = merge_topk({all}, k, higher);
    for (int j = 0; j < k; ++j) {
      const bool have = j < static_cast<int>(best.size());
      r.scores.push_back(have ? best[j].score
                              : (higher ? -std::numeric_limits<float>::infinity()
                                        : std::numeric_limits<float>::infinity()));
      r.ids.push_back(have ? best[j].id : -1);
    }
  }
  return r;
}

double recall(const Results& got, const Results& truth) {
  size_t hits = 0, total = 0;
  const size_t k = 10;
  for (size_t q = 0; q * k < truth.ids.size(); ++q) {
    std::set<int64_t> want(truth.ids.begin() + q * k, truth.ids.begin() + (q + 1) * k);
    for (size_t j = 0; j < k; ++j) hits += want.count(got.ids[q * k + j]);
    total += k;
  }
  return static_cast<double>(hits) / static_cast<double>(total);
}

class ModuloFilter : public IdFilter {
 public:
  ModuloFilter(int64_t modulus, int64_t residue) : modulus_(modulus), residue_(residue) {}
  bool allows(int64_t id) const override { return id % modulus_ == residue_; }

 private:
  int64_t modulus_, residue_;
};

class SetFilter : public IdFilter {
 public:
  explicit SetFilter(std::set<int64_t> ids) : ids_(std::move(ids)) {}
  bool allows(int64_t id) const override { return ids_.count(id) > 0; }

 private:
  std::set<int64_t> ids_;
};

class TempDir {
 public:
  TempDir() : path_(fs::temp_directory_path() / ("vector_index_test." + std::to_string(getpid()))) {
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

VectorIndex built(const std::string& spec, const std::vector<float>& x,
                  const std::vector<int64_t>& ids, Metric metric = Metric::kInnerProduct) {
  auto index = VectorIndex::create(spec, kDim, metric);
  const int64_t n = static_cast<int64_t>(ids.size());
  if (!index.is_trained()) index.train(x.data(), n);
  index.add(x.data(), ids.data(), n);
  return index;
}

TEST(VectorMetric, ParsesAndNames) {
  EXPECT_EQ(parse_metric("ip"), Metric::kInnerProduct);
  EXPECT_EQ(parse_metric("l2"), Metric::kL2);
  EXPECT_EQ(metric_name(Metric::kL2), "l2");
  EXPECT_THROW(parse_metric("cosine"), InvalidInput);
}

TEST(VectorIndex, RefusesBadSpecsNamingThem) {
  try {
    VectorIndex::create("Bogus42", kDim, Metric::kL2);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("Bogus42"), std::string::npos);
  }
  EXPECT_THROW(VectorIndex::create("PQ7", kDim, Metric::kL2), InvalidInput);  // 7 does not divide 32
  EXPECT_THROW(VectorIndex::create("Flat", 0, Metric::kL2), InvalidInput);
}

TEST(VectorIndex, ReportsKinds) {
  auto flat = VectorIndex::create("Flat", kDim, Metric::kInnerProduct);
  EXPECT_EQ(flat.kind(), "flat");
  EXPECT_TRUE(flat.is_trained());
  EXPECT_TRUE(flat.higher_is_better());
  EXPECT_EQ(flat.nlist(), 0);
  EXPECT_EQ(flat.default_nprobe(), 0);
  auto ivf = VectorIndex::create("IVF8,Flat", kDim, Metric::kL2);
  EXPECT_EQ(ivf.kind(), "ivf");
  EXPECT_FALSE(ivf.is_trained());
  EXPECT_FALSE(ivf.higher_is_better());
  EXPECT_EQ(ivf.metric(), Metric::kL2);
  EXPECT_EQ(ivf.nlist(), 8);
  EXPECT_EQ(ivf.default_nprobe(), 8);
  EXPECT_EQ(VectorIndex::create("IVF1024,Flat", kDim, Metric::kL2).default_nprobe(), 64);
  EXPECT_EQ(VectorIndex::create("HNSW16", kDim, Metric::kL2).kind(), "hnsw");
  EXPECT_EQ(VectorIndex::create("PQ8", kDim, Metric::kL2).kind(), "other");
  EXPECT_EQ(flat.dim(), kDim);
}

TEST(VectorIndex, SaysHowManyTrainingVectorsItNeeds) {
  EXPECT_EQ(VectorIndex::create("Flat", kDim, Metric::kL2).training_rows_needed(), 0);
  EXPECT_EQ(VectorIndex::create("IVF4096,Flat", kDim, Metric::kL2).training_rows_needed(), 4096);
  EXPECT_EQ(VectorIndex::create("PQ4x8", kDim, Metric::kL2).training_rows_needed(), 256);
  EXPECT_EQ(VectorIndex::create("IVF16,PQ4x8", kDim, Metric::kL2).training_rows_needed(), 256);
}

TEST(VectorIndex, FlatEqualsBruteForceWithCallerIds) {
  const auto x = clustered(2000, 20, 1);
  const auto ids = caller_ids(2000);
  const auto queries = clustered(25, 20, 2);
  for (Metric metric : {Metric::kInnerProduct, Metric::kL2}) {
    auto index = built("Flat", x, ids, metric);
    EXPECT_EQ(index.size(), 2000);
    SearchOptions options;
    options.k = 10;
    const auto got = run(index, queries, options);
    const auto want = brute_force(x, ids, queries, 10, metric);
    EXPECT_EQ(got.ids, want.ids) << metric_name(metric);
    for (size_t i = 0; i < got.scores.size(); ++i) EXPECT_NEAR(got.scores[i], want.scores[i], 1e-4);
  }
}

TEST(VectorIndex, IvfTrainsAndRecalls) {
  const auto x = clustered(4000, 40, 3);
  const auto ids = caller_ids(4000);
  const auto queries = clustered(50, 40, 4);
  const auto truth = brute_force(x, ids, queries, 10, Metric::kInnerProduct);

  auto few = VectorIndex::create("IVF8,Flat", kDim, Metric::kInnerProduct);
  try {
    few.train(x.data(), 5);
    FAIL() << "expected InvalidInput";
  } catch (const InvalidInput& e) {
    EXPECT_NE(std::string(e.what()).find("at least 8"), std::string::npos) << e.what();
  }

  for (const char* spec : {"IVF8,Flat", "IVF64,Flat"}) {
    auto index = built(spec, x, ids);
    EXPECT_TRUE(index.is_trained());
    SearchOptions options;
    const auto got = run(index, queries, options);
    EXPECT_GE(recall(got, truth), 0.95) << spec;
    for (int64_t id : got.ids) EXPECT_EQ((id - 1000) % 7, 0) << "not a caller id: " << id;
  }
}

TEST(VectorIndex, WriteReadRoundTripGivesIdenticalResults) {
  TempDir dir;
  const auto x = clustered(3000, 30, 5);
  const auto ids = caller_ids(3000);
  const auto queries = clustered(20, 30, 6);
  for (const char* spec : {"Flat", "IVF8,Flat", "IVF8,SQ8", "HNSW16", "SQ8"}) {
    auto index = built(spec, x, ids);
    SearchOptions options;
    options.k = 7;
    options.nprobe = 3;
    const auto before = run(index, queries, options);
    const std::string path = dir.file("index.faiss");
    index.write(path);
    for (bool mmap : {false, true}) {
      auto back = VectorIndex::read(path, mmap);
      EXPECT_EQ(back.size(), index.size());
      EXPECT_EQ(back.kind(), index.kind());
      EXPECT_EQ(back.metric(), index.metric());
      const auto after = run(back, queries, options);
      EXPECT_EQ(after.ids, before.ids) << spec << " mmap=" << mmap;
      EXPECT_EQ(after.scores, before.scores) << spec << " mmap=" << mmap;
    }
  }
}

TEST(VectorIndex, ReadFailuresNameThePath) {
  TempDir dir;
  const std::string missing = dir.file("missing.faiss");
  try {
    VectorIndex::read(missing, false);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos);
  }
  const std::string garbage = dir.file("garbage.faiss");
  std::ofstream(garbage) << "this is not a faiss index at all";
  EXPECT_THROW(VectorIndex::read(garbage, false), IoError);
  EXPECT_THROW(VectorIndex::read(garbage, true), IoError);

  const auto x = clustered(500, 5, 7);
  built("IVF4,Flat", x, caller_ids(500)).write(dir.file("whole.faiss"));
  const auto size = fs::file_size(dir.file("whole.faiss"));
  fs::copy_file(dir.file("whole.faiss"), dir.file("cut.faiss"));
  fs::resize_file(dir.file("cut.faiss"), size / 2);
  EXPECT_THROW(VectorIndex::read(dir.file("cut.faiss"), false), IoError);
  EXPECT_THROW(VectorIndex::create("Flat", kDim, Metric::kL2).write(dir.file("no/such/dir/x")),
               IoError);
}

TEST(VectorIndex, EmptyCopySharesTrainingSoShardsMergeToTheWhole) {
  TempDir dir;
  const auto x = clustered(3000, 30, 8);
  const auto ids = caller_ids(3000);
  const auto queries = clustered(30, 30, 9);
  auto trained = VectorIndex::create("IVF16,Flat", kDim, Metric::kInnerProduct);
  trained.train(x.data(), 3000);
  trained.write(dir.file("trained.faiss"));

  for (bool mmap : {false, true}) {
    auto source = VectorIndex::read(dir.file("trained.faiss"), mmap);
    auto whole = source.empty_copy();
    auto shard_a = source.empty_copy();
    auto shard_b = source.empty_copy();
    EXPECT_TRUE(shard_a.is_trained());
    EXPECT_EQ(shard_a.size(), 0);
    EXPECT_EQ(shard_a.nlist(), 16);
    whole.add(x.data(), ids.data(), 3000);
    shard_a.add(x.data(), ids.data(), 1200);
    shard_b.add(x.data() + 1200 * kDim, ids.data() + 1200, 1800);

    SearchOptions options;
    options.k = 10;
    options.nprobe = 4;  // the same 4 lists in every shard only if the quantizer is shared
    const auto want = run(whole, queries, options);
    const auto a = run(shard_a, queries, options);
    const auto b = run(shard_b, queries, options);
    for (size_t q = 0; q < queries.size() / kDim; ++q) {
      std::vector<std::vector<Neighbor>> lists(2);
      for (int j = 0; j < 10; ++j) {
        lists[0].push_back({a.scores[q * 10 + j], a.ids[q * 10 + j]});
        lists[1].push_back({b.scores[q * 10 + j], b.ids[q * 10 + j]});
      }
      const auto merged = merge_topk(lists, 10, true);
      ASSERT_EQ(merged.size(), 10u);
      for (int j = 0; j < 10; ++j) EXPECT_EQ(merged[j].id, want.ids[q * 10 + j]);
    }
  }
}

// Issue 21, case 20: ingest builds every shard from an empty_copy() of its template, and an
// HNSW copy failed in FAISS's write_index ('h != 0'): clone_index gives a bare IndexHNSW that
// write_index does not know. Every kind ingest offers must round-trip through a copy.
TEST(VectorIndex, EmptyCopiesOfEveryKindWriteAndReadBack) {
  TempDir dir;
  const auto x = clustered(1000, 10, 12);
  const auto ids = caller_ids(1000);
  const auto queries = clustered(10, 10, 13);
  for (const char* spec : {"Flat", "HNSW16", "HNSW8,Flat", "IVF8,Flat", "SQ8", "PQ4np"}) {
    auto source = VectorIndex::create(spec, kDim, Metric::kL2);
    if (!source.is_trained()) source.train(x.data(), 1000);
    auto shard = source.empty_copy();
    EXPECT_EQ(shard.size(), 0) << spec;
    EXPECT_EQ(shard.kind(), source.kind()) << spec;
    shard.add(x.data(), ids.data(), 1000);
    const std::string path = dir.file("shard.faiss");
    ASSERT_NO_THROW(shard.write(path)) << spec;
    auto back = VectorIndex::read(path, false);
    SearchOptions options;
    options.k = 5;
    options.nprobe = 8;
    EXPECT_EQ(run(back, queries, options).ids, run(shard, queries, options).ids) << spec;
  }
}

TEST(VectorIndex, MmapIvfIsReadOnlyAndWritesItsFile) {
  TempDir dir;
  const auto x = clustered(1000, 10, 10);
  const auto ids = caller_ids(1000);
  built("IVF8,Flat", x, ids).write(dir.file("a.faiss"));
  auto mapped = VectorIndex::read(dir.file("a.faiss"), true);
  EXPECT_THROW(mapped.add(x.data(), ids.data(), 10), InvalidInput);
  mapped.write(dir.file("b.faiss"));
  auto again = VectorIndex::read(dir.file("b.faiss"), false);
  EXPECT_EQ(again.size(), 1000);
}

TEST(VectorIndex, MergedFlatShardsEqualUnshardedTopk) {
  const auto x = clustered(3000, 30, 11);
  const auto ids = caller_ids(3000);
  const auto queries = clustered(20, 30, 12);
  auto whole = built("Flat", x, ids, Metric::kL2);
  std::vector<VectorIndex> shards;
  for (int s = 0; s < 3; ++s) shards.push_back(VectorIndex::create("Flat", kDim, Metric::kL2));
  for (int64_t i = 0; i < 3000; ++i) shards[i % 3].add(x.data() + i * kDim, &ids[i], 1);
  SearchOptions options;
  options.k = 10;
  const auto want = run(whole, queries, options);
  std::vector<Results> parts;
  for (const auto& shard : shards) parts.push_back(run(shard, queries, options));
  for (size_t q = 0; q < queries.size() / kDim; ++q) {
    std::vector<std::vector<Neighbor>> lists(3);
    for (int s = 0; s < 3; ++s) {
      for (int j = 0; j < 10; ++j) {
        lists[s].push_back({parts[s].scores[q * 10 + j], parts[s].ids[q * 10 + j]});
      }
    }
    const auto merged = merge_topk(lists, 10, false);
    for (int j = 0; j < 10; ++j) EXPECT_EQ(merged[j].id, want.ids[q * 10 + j]);
  }
}

TEST(VectorIndex, FilteredSearchReturnsKAllowedIds) {
  const auto x = clustered(4000, 40, 13);
  const auto ids = caller_ids(4000);
  const auto queries = clustered(20, 40, 14);
  const ModuloFilter filter(20, 3);  // 5% of the caller ids (1000 + 7i)
  const auto truth = brute_force(x, ids, queries, 10, Metric::kInnerProduct, &filter);
  for (const char* spec : {"Flat", "IVF8,Flat", "HNSW16", "SQ8"}) {
    auto index = built(spec, x, ids);
    SearchOptions options;
    options.k = 10;
    options.filter = &filter;
    options.nprobe = 8;      // every list, so every allowed vector is reachable
    options.ef_search = 64;
    const auto got = run(index, queries, options);
    for (int64_t id : got.ids) {
      ASSERT_GE(id, 0) << spec << ": fewer than k results";
      EXPECT_TRUE(filter.allows(id)) << spec << " returned " << id;
    }
    const std::string kind = index.kind();
    if (kind == "flat" || kind == "ivf") {
      EXPECT_EQ(got.ids, truth.ids) << spec;
    } else {
      // HNSW's graph walk under a 5% filter is approximate (0.75-1.0 here); SQ8 is exact on
      // its quantized codes.
      EXPECT_GE(recall(got, truth), kind == "hnsw" ? 0.5 : 0.8) << spec;
    }
  }
}

TEST(VectorIndex, FilterWithFewerAllowedThanKPadsWithEmptySlots) {
  const auto x = clustered(1000, 10, 15);
  const auto ids = caller_ids(1000);
  const auto queries = clustered(2, 10, 16);
  const SetFilter filter({ids[3], ids[500], ids[999]});
  for (const char* spec : {"Flat", "IVF8,Flat", "HNSW16", "SQ8"}) {
    auto index = built(spec, x, ids);
    SearchOptions options;
    options.k = 5;
    options.filter = &filter;
    const auto got = run(index, queries, options);
    for (int q = 0; q < 2; ++q) {
      std::set<int64_t> found(got.ids.begin() + q * 5, got.ids.begin() + q * 5 + 3);
      EXPECT_EQ(found, (std::set<int64_t>{ids[3], ids[500], ids[999]})) << spec;
      EXPECT_EQ(got.ids[q * 5 + 3], -1);
      EXPECT_EQ(got.ids[q * 5 + 4], -1);
      EXPECT_EQ(got.scores[q * 5 + 4], -std::numeric_limits<float>::infinity());
    }
  }
}

TEST(VectorIndex, TiesAreBrokenByAscendingId) {
  // 40 copies of one vector under shuffled ids, among other vectors: the k best are the copies
  // with the smallest ids, whatever order they were added in.
  const auto others = clustered(500, 10, 17);
  std::vector<float> x(others);
  std::vector<int64_t> ids = caller_ids(500);
  std::vector<int64_t> copy_ids;
  for (int i = 0; i < 40; ++i) copy_ids.push_back(100 + 3 * i);
  std::shuffle(copy_ids.begin(), copy_ids.end(), std::mt19937(18));
  const std::vector<float> query(others.begin(), others.begin() + kDim);
  for (int64_t id : copy_ids) {
    x.insert(x.end(), query.begin(), query.end());
    ids.push_back(id);
  }
  for (Metric metric : {Metric::kInnerProduct, Metric::kL2}) {
    auto index = built("Flat", x, ids, metric);
    SearchOptions options;
    options.k = 5;
    const auto got = run(index, query, options);
    // ids[0] (vector 0 itself) ties with the copies too; it is larger than every copy id.
    EXPECT_EQ(got.ids, (std::vector<int64_t>{100, 103, 106, 109, 112})) << metric_name(metric);
  }
}

TEST(VectorIndex, EmptyIndexAndBadOptions) {
  auto index = VectorIndex::create("Flat", kDim, Metric::kL2);
  const std::vector<float> query(kDim, 0.5f);
  SearchOptions options;
  options.k = 3;
  const auto got = run(index, query, options);
  EXPECT_EQ(got.ids, (std::vector<int64_t>{-1, -1, -1}));
  EXPECT_EQ(got.scores[0], std::numeric_limits<float>::infinity());
  options.k = 0;
  EXPECT_THROW(run(index, query, options), InvalidInput);
}

TEST(VectorNormalize, MakesUnitRowsAndKeepsZeroRows) {
  std::vector<float> x = {3, 4, 0, 0, 0, 0};
  l2_normalize(x.data(), 3, 2);
  EXPECT_FLOAT_EQ(x[0], 0.6f);
  EXPECT_FLOAT_EQ(x[1], 0.8f);
  EXPECT_EQ(x[2], 0.0f);
  EXPECT_EQ(x[5], 0.0f);
  set_vector_threads(1);
  set_vector_threads(2);
}

}  // namespace
}  // namespace tessera
