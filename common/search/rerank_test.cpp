// Exact re-ranking over a real (tiny) PQ index of 3 shards, built by ingest with --normalize:
// with re-ranking the hits are those of an exact search over the stored vectors where the PQ
// scores alone are not; query (R = 1, 2) and serve's search round (RankShards, R = 1..3) answer
// the same; a patch the stored vectors lack is refused naming the file.
#include "common/search/rerank.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/search/rank_shards.h"
#include "common/search/round.h"
#include "common/store/embeddings.h"
#include "common/vector/vector_index.h"
#include "stages/query/config.h"
#include "stages/query/query.h"
#include "tests/inprocess/pipeline.h"
#include "tests/inprocess/support.h"

namespace tessera::search {
namespace {

using inprocess::ScratchDir;
using Ids = std::vector<std::vector<int64_t>>;

constexpr int kK = 5;

class Rerank : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    inprocess::log_with_rank_tags();
    dir_ = new ScratchDir("search_rerank");
    const std::string run = *dir_ / "run";
    inprocess::make_upstream(dir_->path().string(), run, false);
    SerialComm comm;
    // 16 sub-quantizers of 4 bits over 64 dimensions: codes coarse enough to misorder neighbours.
    ASSERT_EQ(ingest::run(inprocess::ingest_config(run, "pq", {"--shards", "3", "--index",
                                                               "PQ16x4", "--normalize"}),
                          comm),
              0);
    // The same codes over the vectors as stored, by squared L2.
    ASSERT_EQ(ingest::run(inprocess::ingest_config(run, "pq-l2", {"--shards", "3", "--index",
                                                                  "PQ16x4", "--metric", "l2"}),
                          comm),
              0);
    // Every stored vector, normalised as ingest added it: the queries and the ground truth.
    const h5::File f = h5::File::open(embeddings_path(run + "/embed/vit-tiny"), h5::Mode::kRead);
    ids_ = new std::vector<int64_t>(f.open_dataset(embedding_names::kPatchId).read_all<int64_t>());
    const h5::Dataset values = f.open_dataset(embedding_names::kEmbeddings);
    dim_ = static_cast<int>(values.dims().at(1));
    vectors_ = new std::vector<float>(ids_->size() * dim_);
    values.read_rows_as_floats(vectors_->data(), 0, ids_->size());
    raw_ = new std::vector<float>(*vectors_);
    l2_normalize(vectors_->data(), static_cast<int64_t>(ids_->size()), dim_);
  }
  static void TearDownTestSuite() {
    delete raw_;
    delete vectors_;
    delete ids_;
    delete dir_;
  }
  static std::string index_dir() { return *dir_ / "run/ingest/pq"; }
  static int64_t rows() { return static_cast<int64_t>(ids_->size()); }

  // The exact top k of every stored vector as a query, by brute force in double (ties by id).
  static Ids exact() {
    Ids out;
    for (int64_t q = 0; q < rows(); ++q) {
      std::vector<std::pair<double, int64_t>> scored;
      for (int64_t i = 0; i < rows(); ++i) {
        double dot = 0;
        for (int d = 0; d < dim_; ++d) {
          dot += double{(*vectors_)[q * dim_ + d]} * (*vectors_)[i * dim_ + d];
        }
        scored.emplace_back(-dot, (*ids_)[i]);
      }
      std::sort(scored.begin(), scored.end());
      auto& list = out.emplace_back();
      for (int j = 0; j < kK; ++j) list.push_back(scored[j].second);
    }
    return out;
  }
  static Ids ids_of(const std::vector<std::vector<Hit>>& hits) {
    Ids out;
    for (const auto& list : hits) {
      auto& ids = out.emplace_back();
      for (const Hit& h : list) ids.push_back(h.patch_id);
    }
    return out;
  }
  // The share of the exact top k found (recall@k over every query).
  static double recall(const Ids& found, const Ids& truth) {
    int64_t hit = 0, all = 0;
    for (size_t q = 0; q < truth.size(); ++q) {
      const std::set<int64_t> want(truth[q].begin(), truth[q].end());
      for (int64_t id : found[q]) hit += want.count(id);
      all += static_cast<int64_t>(truth[q].size());
    }
    return static_cast<double>(hit) / static_cast<double>(all);
  }
  static std::vector<std::vector<Hit>> search_all(int rerank) {
    const Catalog catalog = load_catalog(index_dir());
    const ShardSet set(catalog, {0, 1, 2}, true, VerifyLevel::kFull, std::nullopt, rerank);
    SearchParams params;
    params.k = kK;
    return set.search(vectors_->data(), rows(), {}, params);
  }

  static ScratchDir* dir_;
  static std::vector<int64_t>* ids_;
  static std::vector<float>* vectors_;
  static std::vector<float>* raw_;  // as stored, not normalised
  static int dim_;
};

ScratchDir* Rerank::dir_ = nullptr;
std::vector<int64_t>* Rerank::ids_ = nullptr;
std::vector<float>* Rerank::vectors_ = nullptr;
std::vector<float>* Rerank::raw_ = nullptr;
int Rerank::dim_ = 0;

TEST_F(Rerank, RerankedHitsAreTheExactOnesWhereThePqScoresAloneAreNot) {
  ASSERT_GT(rows(), 40);
  const Ids truth = exact();
  const std::vector<std::vector<Hit>> reranked = search_all(8);
  EXPECT_EQ(ids_of(reranked), truth);
  // The scores are the exact inner products of the normalised vectors.
  for (int64_t q = 0; q < rows(); ++q) {
    for (const Hit& h : reranked[q]) {
      const int64_t i = std::find(ids_->begin(), ids_->end(), h.patch_id) - ids_->begin();
      const float want = exact_score(vectors_->data() + q * dim_, vectors_->data() + i * dim_,
                                     dim_, true);
      EXPECT_FLOAT_EQ(h.score, want) << "query " << q << " patch " << h.patch_id;
    }
  }
  const Ids approximate = ids_of(search_all(0));
  EXPECT_LT(recall(approximate, truth), 1.0) << "the PQ codes alone order these rows exactly: the "
                                                "test shows nothing";
  EXPECT_EQ(recall(ids_of(reranked), truth), 1.0);
}

// Without --normalize and by squared L2: the stored vectors as they are, the smallest first.
TEST_F(Rerank, RerankedL2HitsAreTheExactOnes) {
  Ids truth;
  for (int64_t q = 0; q < rows(); ++q) {
    std::vector<std::pair<double, int64_t>> scored;
    for (int64_t i = 0; i < rows(); ++i) {
      double d2 = 0;
      for (int d = 0; d < dim_; ++d) {
        const double e = double{(*raw_)[q * dim_ + d]} - (*raw_)[i * dim_ + d];
        d2 += e * e;
      }
      scored.emplace_back(d2, (*ids_)[i]);
    }
    std::sort(scored.begin(), scored.end());
    auto& list = truth.emplace_back();
    for (int j = 0; j < kK; ++j) list.push_back(scored[j].second);
  }
  const Catalog catalog = load_catalog(*dir_ / "run/ingest/pq-l2");
  SearchParams params;
  params.k = kK;
  const auto search = [&](int rerank) {
    const ShardSet set(catalog, {0, 1, 2}, true, VerifyLevel::kCheap, std::nullopt, rerank);
    return ids_of(set.search(raw_->data(), rows(), {}, params));
  };
  EXPECT_EQ(search(8), truth);
  EXPECT_LT(recall(search(0), truth), 1.0);
}

TEST_F(Rerank, ReadsEachStoredVectorOnceAsStoredAndCountsIt) {
  const Catalog catalog = load_catalog(index_dir());
  const ShardSet set(catalog, {0, 1, 2}, true, VerifyLevel::kCheap, std::nullopt, 2);
  EXPECT_EQ(set.rerank(), 2);
  SearchParams params;
  params.k = kK;
  set.search(vectors_->data(), 1, {}, params);
  const RerankCounters c = set.rerank_counters();
  EXPECT_GT(c.rows, 0);
  EXPECT_LE(c.rows, 3 * 2 * kK);  // rerank x k candidates per shard, at most
  const EmbeddingsReader file(embeddings_path(*dir_ / "run/embed/vit-tiny"));
  EXPECT_EQ(c.bytes, c.rows * file.row_bytes());
  EXPECT_EQ(ShardSet(catalog, {0}, true, VerifyLevel::kCheap, std::nullopt, 0).rerank(), 0);
}

TEST_F(Rerank, APatchTheStoredVectorsLackIsRefusedNamingTheFile) {
  const StoredVectors stored(load_catalog(index_dir()), VerifyLevel::kCheap);
  std::vector<float> v(dim_);
  try {
    stored.read({int64_t{77} << 32}, v.data());
    FAIL() << "a patch of no slide was read";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("embeddings.h5"), std::string::npos) << e.what();
  }
  // Any order, repeats: each id gets its own stored vector.
  std::vector<float> three(3 * dim_);
  stored.read({(*ids_)[3], (*ids_)[1], (*ids_)[3]}, three.data());
  for (int j : {0, 2}) {
    EXPECT_TRUE(std::equal(three.begin() + j * dim_, three.begin() + (j + 1) * dim_,
                           vectors_->begin() + 3 * dim_));
  }
  EXPECT_TRUE(std::equal(three.begin() + dim_, three.begin() + 2 * dim_,
                         vectors_->begin() + 1 * dim_));
}

// query at R = 1 and 2, and serve's collective round over RankShards at R = 1..3, with the
// default --rerank: the same hits and scores.
TEST_F(Rerank, QueryAndServeAnswerTheSame) {
  const std::vector<int64_t> patches = {(*ids_)[0], (*ids_)[rows() / 2], (*ids_)[rows() - 1]};
  std::vector<std::vector<std::pair<int64_t, float>>> from_query;
  for (int ranks = 1; ranks <= 2; ++ranks) {
    for (size_t p = 0; p < patches.size(); ++p) {
      const std::string report = *dir_ / fmt::format("q{}-r{}.json", p, ranks);
      const query::Config config = inprocess::stage_config(
          query::option_table(),
          {"--index", index_dir(), "--format", "json", "--output", report, "--threads", "1",
           "--patch", std::to_string(patches[p]), "-k", std::to_string(kK)},
          query::config_from);
      const auto outcomes = inprocess::run_stage_ranks(ranks, query::run, config);
      ASSERT_EQ(inprocess::exit_codes(outcomes), std::vector<int>(ranks, 0))
          << inprocess::describe(outcomes);
      const nlohmann::json j = nlohmann::json::parse(inprocess::file_bytes(report));
      EXPECT_EQ(j.at("search").at("rerank").get<int>(), kDefaultRerank);
      std::vector<std::pair<int64_t, float>> hits;
      for (const auto& h : j.at("queries").at(0).at("hits")) {
        hits.emplace_back(h.at("patch_id").get<int64_t>(), h.at("score").get<float>());
      }
      if (ranks == 1) {
        from_query.push_back(hits);
      } else {
        EXPECT_EQ(hits, from_query[p]) << "patch " << patches[p];
      }
    }
  }
  for (int ranks = 1; ranks <= 3; ++ranks) {
    std::vector<std::vector<Hit>> served;
    const auto outcomes = run_rank_outcomes(ranks, [&](Comm& comm) {
      RankShards shards(index_dir(), comm.rank(), comm.size(), true, VerifyLevel::kCheap,
                        kDefaultRerank);
      std::vector<SearchJob> jobs;
      for (int64_t patch : patches) {
        const int64_t i = std::find(ids_->begin(), ids_->end(), patch) - ids_->begin();
        jobs.push_back({std::vector<float>(vectors_->begin() + i * dim_,
                                           vectors_->begin() + (i + 1) * dim_),
                        kK});
      }
      auto hits = search_round(comm, shards, jobs, 1);
      if (comm.rank() == 0) served = std::move(hits);
      return 0;
    });
    ASSERT_EQ(inprocess::exit_codes(outcomes), std::vector<int>(ranks, 0))
        << inprocess::describe(outcomes);
    ASSERT_EQ(served.size(), patches.size());
    for (size_t p = 0; p < patches.size(); ++p) {
      ASSERT_EQ(served[p].size(), from_query[p].size()) << "R = " << ranks;
      for (size_t h = 0; h < served[p].size(); ++h) {
        EXPECT_EQ(served[p][h].patch_id, from_query[p][h].first) << "R = " << ranks;
        // The report writes 6 significant digits.
        EXPECT_NEAR(served[p][h].score, from_query[p][h].second, 1e-5) << "R = " << ranks;
      }
    }
  }
}

}  // namespace
}  // namespace tessera::search
