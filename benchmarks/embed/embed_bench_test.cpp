// The pure parts of embed_bench: its options (defaults, the report's name, refusals), the embed
// Config it runs, and the efficiencies of its report.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "benchmarks/embed/options.h"
#include "benchmarks/embed/report.h"
#include "common/core/error.h"

namespace tessera::embed::driver {
namespace {

using nlohmann::json;

po::variables_map parse(std::vector<const char*> args) {
  args.insert(args.begin(), "embed_bench");
  const auto desc = bench_options();
  po::variables_map v;
  po::store(po::parse_command_line(static_cast<int>(args.size()), args.data(), desc), v);
  po::notify(v);
  return v;
}

TEST(EmbedBenchOptions, DefaultsNameTheReportAfterTheRun) {
  const po::variables_map v = parse({"--model", "vit-tiny", "--run", "/tmp/eb/run",
                                     "--batch-size", "8"});
  const Config config = embed_config(v, "/tmp/eb/run");
  EXPECT_EQ(config.run, "/tmp/eb/run");
  EXPECT_EQ(config.batch_size, 8);
  EXPECT_EQ(config.source, "store");
  const BenchOptions o = bench_options_from(v, config, 2);
  EXPECT_EQ(o.slide, "/tmp/eb/synth-10000x8000-seed1.tif");
  EXPECT_EQ(o.out, "/tmp/eb/embed_bench_vit-tiny_fp32_cpu_bs8_np2.json");
  EXPECT_DOUBLE_EQ(o.target, 0.85);  // cpu
  EXPECT_EQ(o.patches, 256);
}

TEST(EmbedBenchOptions, RefusesWhatCannotBeMeasured) {
  auto refused = [](std::vector<const char*> args, const std::string& says) {
    args.insert(args.begin(), {"--model", "vit-tiny"});
    const po::variables_map v = parse(args);
    try {
      bench_options_from(v, embed_config(v, "/tmp/eb/run"), 1);
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused({"--patches", "0"}, "--patches 0");
  refused({"--reps", "0"}, "--reps 0");
  refused({"--warmup", "-1"}, "--warmup -1");
  refused({"--cache", "cold"}, "--cache 'cold'");
}

TEST(EmbedBenchReport, EfficienciesAreAgainstModelOnly) {
  const json modes = {{"model-only", {{"rate", 100.0}, {"cpu", 10.0}}},
                      {"cached", {{"rate", 80.0}, {"cpu", 12.5}}},
                      {"store", {{"rate", 50.0}, {"cpu", 20.0}}},
                      {"wsi", {{"rate", 25.0}, {"cpu", 40.0}}}};
  const json e = efficiencies(modes, "/rate"_json_pointer, "/cpu"_json_pointer);
  EXPECT_DOUBLE_EQ(e.at("cached").get<double>(), 0.8);
  EXPECT_DOUBLE_EQ(e.at("store").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(e.at("wsi").get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(e.at("by_cpu_time").at("store").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(e.at("by_cpu_time").at("cached").get<double>(), 0.8);
}

}  // namespace
}  // namespace tessera::embed::driver
