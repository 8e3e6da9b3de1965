// The pure parts of scale_bench: its options, the synthetic cohort's counts and their statistics,
// and the disk estimate.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "benchmarks/scale/cohort.h"
#include "benchmarks/scale/options.h"
#include "common/core/error.h"

namespace tessera::scale {
namespace {

using nlohmann::json;

BenchOptions parse(std::vector<const char*> args) {
  args.insert(args.begin(), "scale_bench");
  const auto desc = bench_options();
  po::variables_map v;
  po::store(po::parse_command_line(static_cast<int>(args.size()), args.data(), desc), v);
  po::notify(v);
  return bench_options_from(v, 2);
}

TEST(ScaleBenchOptions, DefaultsAndRefusals) {
  const BenchOptions o = parse({"--patches-total", "10000", "--scratch", "/tmp/sb"});
  EXPECT_EQ(o.slides, kCohortSlides);
  EXPECT_EQ(o.out, "/tmp/sb/scale_bench_10000_np2.json");
  auto refused = [](std::vector<const char*> args, const std::string& says) {
    try {
      parse(args);
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused({"--slides", "10", "--patches-total", "9"}, "must be >= --slides (10)");
  refused({"--slides", "0"}, "--slides 0");
  refused({"--store-dtype", "bf16"}, "--store-dtype 'bf16'");
  refused({"--reps", "0"}, "--reps 0");
}

TEST(ScaleBenchCohort, CountsAreDeterministicAtLeastOneAndSumNearTheTotal) {
  const BenchOptions o = parse({"--slides", "50", "--patches-total", "5000"});
  const Cohort a = make_cohort(o), b = make_cohort(o);
  EXPECT_EQ(a.counts, b.counts);
  ASSERT_EQ(a.counts.size(), 50u);
  int64_t sum = 0;
  for (const int64_t c : a.counts) {
    EXPECT_GE(c, 1);
    sum += c;
  }
  EXPECT_EQ(sum, a.total);
  EXPECT_LE(std::abs(a.total - 5000), 50) << "each count rounded, at least 1";
  // The full-scale counts: the paper's patches per slide, the same shape.
  EXPECT_NEAR(static_cast<double>(a.full_total), kCohortPatches * 50.0 / kCohortSlides,
              0.001 * a.full_total);
}

TEST(ScaleBenchCohort, StatisticsAndDiskEstimate) {
  const json s = count_stats({5, 1, 3, 2, 4});
  EXPECT_EQ(s.at("total"), 15);
  EXPECT_DOUBLE_EQ(s.at("mean").get<double>(), 3.0);
  EXPECT_EQ(s.at("min"), 1);
  EXPECT_EQ(s.at("p50"), 3);
  EXPECT_EQ(s.at("max"), 5);
  const BenchOptions o = parse({"--dim", "8", "--store-dtype", "fp16", "--patch-size", "2"});
  const json d = disk_estimate(o, 10);
  EXPECT_EQ(d.at("bytes_per_patch").at("embed_shards"), 8 * 2 + 28);
  EXPECT_EQ(d.at("bytes_per_patch").at("patchgen_shards"), 3 * 2 * 2 + 32);
  EXPECT_EQ(d.at("bytes"), 10 * (20 + 44 + 44 + 44 + 48));
}

}  // namespace
}  // namespace tessera::scale
