// The pure parts of ingest_bench: options, the synthetic vectors, recall@k and the .npy writer.
#include <boost/program_options.hpp>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "benchmarks/ingest/mixture.h"
#include "benchmarks/ingest/npy.h"
#include "benchmarks/ingest/options.h"
#include "benchmarks/ingest/recall.h"
#include "common/core/error.h"

namespace tessera::ingest_bench {
namespace {

Options parse(std::vector<const char*> args) {
  args.insert(args.begin(), "ingest_bench");
  const auto desc = bench_options();
  po::variables_map v;
  po::store(po::parse_command_line(static_cast<int>(args.size()), args.data(), desc), v);
  po::notify(v);
  return options_from(v);
}

TEST(IngestBenchOptions, ListsAndDefaults) {
  const Options o = parse({"--sizes", "8:400,16:800", "--ranks", "1,3", "--indexes",
                           "Flat;IVF4,Flat", "--threads", "2", "--scratch", "/tmp/ib"});
  ASSERT_EQ(o.sizes.size(), 2u);
  EXPECT_EQ(o.sizes[1].dim, 16);
  EXPECT_EQ(o.sizes[1].rows, 800);
  EXPECT_EQ(o.ranks, (std::vector<int>{1, 3}));
  EXPECT_EQ(o.indexes, (std::vector<std::string>{"Flat", "IVF4,Flat"}));
  EXPECT_EQ(o.query_shards, (std::vector<int>{1, 4, 8}));
  EXPECT_EQ(o.threads, 2);
  EXPECT_EQ(o.out, "/tmp/ib/ingest_bench_400.json");
  EXPECT_EQ(o.single_queries, 100);
  EXPECT_EQ(parse({"--sizes", "8:400", "--queries", "5"}).single_queries, 5);
}

TEST(IngestBenchOptions, RefusesWhatCannotRun) {
  EXPECT_THROW(parse({"--sizes", "8"}), InvalidInput);
  EXPECT_THROW(parse({"--sizes", ""}), InvalidInput);
  EXPECT_THROW(parse({"--sizes", "8:10", "--slides", "20"}), InvalidInput);
  EXPECT_THROW(parse({"--sizes", "8:400", "--ranks", ""}), InvalidInput);
  EXPECT_THROW(parse({"--sizes", "8:400", "--k", "0"}), InvalidInput);
}

float norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return static_cast<float>(std::sqrt(s));
}

TEST(IngestBenchMixture, RowsAreUnitLengthAndAPureFunctionOfSeedAndId) {
  const Mixture a(7, 5, 16, 0.6), b(7, 5, 16, 0.6), c(8, 5, 16, 0.6);
  std::vector<float> ra(16), rb(16), rc(16), q(16);
  std::set<int> clusters;
  for (int64_t id : {int64_t{0}, int64_t{1}, int64_t{12345}, int64_t{1} << 40}) {
    a.row(id, ra.data());
    b.row(id, rb.data());
    c.row(id, rc.data());
    EXPECT_EQ(ra, rb);
    EXPECT_NE(ra, rc);
    EXPECT_NEAR(norm(ra), 1.0f, 1e-5);
    EXPECT_EQ(a.cluster_of(id), b.cluster_of(id));
    a.row(id, q.data(), 0.1, 3);
    EXPECT_NE(q, ra);
    EXPECT_NEAR(norm(q), 1.0f, 1e-5);
  }
  for (int64_t id = 0; id < 200; ++id) clusters.insert(a.cluster_of(id));
  EXPECT_EQ(clusters.size(), 5u);
  EXPECT_EQ(*clusters.begin(), 0);
}

TEST(IngestBenchRecall, CountsExactIdsAmongTheHits) {
  const std::vector<int64_t> exact = {1, 2, 3, 4};  // two queries, k = 2
  const nlohmann::json answers = nlohmann::json::parse(
      R"([{"hits": [{"patch_id": 2}, {"patch_id": 9}]},
          {"hits": [{"patch_id": 4}, {"patch_id": 3}]}])");
  EXPECT_DOUBLE_EQ(recall_at_k(answers, exact, 2, 2), 0.75);
  EXPECT_DOUBLE_EQ(recall_at_k(answers, exact, 1, 2), 0.5);
}

TEST(IngestBenchNpy, HeaderAlignedAndValuesInOrder) {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("ingest_bench_npy_" + std::to_string(::getpid()) + ".npy"))
                               .string();
  const std::vector<float> values = {1.5f, -2.0f, 0.25f, 4.0f, 5.0f, 6.0f};
  write_npy(path, values.data(), 3, 2);
  std::ifstream in(path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  ASSERT_GT(bytes.size(), 10u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  const size_t header = static_cast<unsigned char>(bytes[8]) |
                        (static_cast<size_t>(static_cast<unsigned char>(bytes[9])) << 8);
  EXPECT_EQ((10 + header) % 64, 0u);
  EXPECT_NE(bytes.find("'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }"),
            std::string::npos);
  EXPECT_EQ(bytes[10 + header - 1], '\n');
  ASSERT_EQ(bytes.size(), 10 + header + sizeof(float) * values.size());
  std::vector<float> back(values.size());
  std::memcpy(back.data(), bytes.data() + 10 + header, sizeof(float) * values.size());
  EXPECT_EQ(back, values);
  EXPECT_THROW(write_npy("/nonexistent-dir/x.npy", values.data(), 3, 2), IoError);
}

}  // namespace
}  // namespace tessera::ingest_bench
