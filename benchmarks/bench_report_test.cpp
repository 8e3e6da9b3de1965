#include "benchmarks/bench_report.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>

namespace tessera::bench {
namespace {

using nlohmann::json;

// A minimal report of the shape embed_bench writes: three repetitions of two modes.
json report(const std::vector<double>& model_only, const std::vector<double>& store) {
  json reps = json::array();
  for (size_t i = 0; i < model_only.size(); ++i) {
    reps.push_back({{"index", i},
                    {"modes",
                     {{"model-only", {{"tiles_per_s", model_only[i]}, {"seconds", 1.0}}},
                      {"store", {{"tiles_per_s", store[i]}, {"seconds", 1.0}}}}}});
  }
  return {{"benchmark", "embed"},
          {"parameters", {{"model", "vit-tiny"}, {"batch_size", 16}, {"patches", 64}}},
          {"machine", {{"cpu_model", "AMD EPYC"}, {"arch", "x86_64"}, {"logical_cores", 2},
                       {"host", "a"}, {"load_average", {1.0, 1.0, 1.0}}}},
          {"versions", {{"tessera", "0.1.0"}, {"git_revision", "abc"}, {"hdf5", "1.10.8"}}},
          {"measured", measured_field(Measured{})},
          {"cache_policy", "warm"},
          {"repetitions", reps},
          {"output", {{"embeddings_sha256", {{"store", json::array({"aa"})}}},
                      {"identical_across_repetitions", {{"store", true}}}}}};
}

TEST(Summarize, MeanAndSampleStddev) {
  const json s = summarize({2, 4, 4, 4, 5, 5, 7, 9});
  EXPECT_DOUBLE_EQ(s["mean"].get<double>(), 5.0);
  EXPECT_NEAR(s["stddev"].get<double>(), std::sqrt(32.0 / 7.0), 1e-12);
  EXPECT_DOUBLE_EQ(s["median"].get<double>(), 4.5);
  EXPECT_DOUBLE_EQ(s["min"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(s["max"].get<double>(), 9.0);
  EXPECT_EQ(s["n"].get<int>(), 8);
}

TEST(Summarize, StddevNullBelowTwoValues) {
  const json one = summarize({3});
  EXPECT_DOUBLE_EQ(one["mean"].get<double>(), 3.0);
  EXPECT_TRUE(one["stddev"].is_null());
  const json none = summarize({});
  EXPECT_TRUE(none["mean"].is_null());
  EXPECT_TRUE(none["stddev"].is_null());
  EXPECT_EQ(none["n"].get<int>(), 0);
}

TEST(Compare, RatioOfMediansWhenTheExperimentIsTheSame) {
  const json before = report({10, 12, 11}, {5, 6, 7});
  json after = report({20, 24, 22}, {5, 5, 5});
  after["versions"]["git_revision"] = "def";            // another revision may be compared
  after["machine"]["host"] = "b";                       // so may another host of the same model
  after["cache_policy"] = "drop";                       // and another cache policy
  const json c = compare_reports(before, after);
  ASSERT_TRUE(c["refused"].is_null()) << c.dump(2);
  EXPECT_EQ(c["metric"], "tiles_per_s");
  EXPECT_DOUBLE_EQ(c["modes"]["model-only"]["ratio_of_medians"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(c["modes"]["store"]["ratio_of_medians"].get<double>(), 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(c["modes"]["model-only"]["before"]["min"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(c["modes"]["model-only"]["after"]["max"].get<double>(), 24.0);
  EXPECT_DOUBLE_EQ(c["modes"]["store"]["after"]["stddev"].get<double>(), 0.0);
  EXPECT_EQ(c["cache_policy"]["after"], "drop");
  EXPECT_NE(format_comparison(c).find("model-only: ratio 2 "), std::string::npos)
      << format_comparison(c);
}

TEST(Compare, RefusesWhenAParameterDiffers) {
  const json before = report({10, 12, 11}, {5, 6, 7});
  json after = before;
  after["parameters"]["batch_size"] = 32;
  const json c = compare_reports(before, after);
  ASSERT_TRUE(c["refused"].is_string());
  ASSERT_EQ(c["differences"].size(), 1u);
  EXPECT_EQ(c["differences"][0]["field"], "/parameters/batch_size");
  EXPECT_EQ(c["differences"][0]["before"], 16);
  EXPECT_EQ(c["differences"][0]["after"], 32);
  EXPECT_FALSE(c.contains("modes"));
  EXPECT_NE(format_comparison(c).find("refused"), std::string::npos);
}

TEST(Compare, AllowedParameterDifferencesAreListedNotRefused) {
  const json before = report({10, 12, 11}, {5, 6, 7});
  json after = report({20, 24, 22}, {5, 6, 7});
  after["parameters"]["reader_threads"] = 2;  // an option the later revision added
  after["parameters"]["batch_size"] = 32;
  EXPECT_TRUE(compare_reports(before, after, {"/parameters/reader_threads"})["refused"].is_string());
  const json c =
      compare_reports(before, after, {"/parameters/reader_threads", "/parameters/batch_size"});
  ASSERT_TRUE(c["refused"].is_null()) << c.dump(2);
  EXPECT_EQ(c["allowed_differences"].size(), 2u);
  EXPECT_DOUBLE_EQ(c["modes"]["model-only"]["ratio_of_medians"].get<double>(), 2.0);
  EXPECT_NE(format_comparison(c).find("allowed to differ: /parameters/reader_threads"),
            std::string::npos);
  // Outputs and the environment cannot be allowed to differ.
  EXPECT_THROW(compare_reports(before, after, {"/output/embeddings_sha256"}),
               std::invalid_argument);
  EXPECT_THROW(compare_reports(before, after, {"/parameters/"}), std::invalid_argument);
  json changed_output = before;
  changed_output["output"]["embeddings_sha256"]["store"] = json::array({"bb"});
  EXPECT_TRUE(compare_reports(before, changed_output, {"/parameters/batch_size"})["refused"]
                  .is_string());
}

TEST(Compare, RefusesWhenAParameterIsMissingOnOneSide) {
  const json before = report({10}, {5});
  json after = before;
  after["parameters"]["prefetch"] = 2;
  EXPECT_TRUE(compare_reports(before, after)["refused"].is_string());
  after = before;
  after.erase("parameters");
  EXPECT_TRUE(compare_reports(before, after)["refused"].is_string());
}

TEST(Compare, RefusesWhenAnOutputHashDiffers) {
  const json before = report({10, 12, 11}, {5, 6, 7});
  json after = before;
  after["output"]["embeddings_sha256"]["store"][0] = "bb";
  const json c = compare_reports(before, after);
  ASSERT_TRUE(c["refused"].is_string());
  EXPECT_EQ(c["differences"][0]["field"], "/output/embeddings_sha256");
}

TEST(Compare, RefusesWhenTheEnvironmentDiffers) {
  const json before = report({10, 12, 11}, {5, 6, 7});
  for (const char* field : {"/machine/cpu_model", "/machine/logical_cores", "/versions/hdf5",
                            "/versions/libtorch"}) {
    json after = before;
    after[json::json_pointer(field)] = "other";
    const json c = compare_reports(before, after);
    ASSERT_TRUE(c["refused"].is_string()) << field;
    EXPECT_EQ(c["differences"][0]["field"], field);
  }
}

TEST(Compare, RefusesWithoutCommonMeasuredModes) {
  json before = report({10}, {5});
  json after = before;
  after["measured"]["metric"] = "seconds";
  EXPECT_TRUE(compare_reports(before, after)["refused"].is_string());
  before["measured"]["metric"] = after["measured"]["metric"] = "no_such_metric";
  EXPECT_TRUE(compare_reports(before, after)["refused"].is_string());
}

TEST(Compare, ModesAtTheRepetitionItself) {
  // patchgen_bench's shape: the measured objects sit directly in each repetition.
  const auto make = [](double rate) {
    return json{{"parameters", {{"ranks", 1}}},
                {"measured", measured_field(Measured{"", "patches_per_s", true})},
                {"repetitions",
                 json::array({{{"index", 0}, {"patchgen", {{"patches_per_s", rate}}}}})},
                {"output", {{"pixels_sha256", "x"}}}};
  };
  const json c = compare_reports(make(100), make(150));
  ASSERT_TRUE(c["refused"].is_null()) << c.dump(2);
  EXPECT_DOUBLE_EQ(c["modes"]["patchgen"]["ratio_of_medians"].get<double>(), 1.5);
}

class TempDir : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessera_bench_report_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string write(const std::string& name, const std::string& text) {
    const std::string path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }
  std::filesystem::path dir_;
};

TEST_F(TempDir, ReadPressure) {
  const json p = read_pressure(write("memory.pressure",
                                     "some avg10=1.50 avg60=0.00 avg300=0.00 total=1234\n"
                                     "full avg10=0.25 avg60=0.00 avg300=0.00 total=99\n"));
  EXPECT_DOUBLE_EQ(p["some"]["avg10"].get<double>(), 1.5);
  EXPECT_EQ(p["some"]["total_us"].get<int64_t>(), 1234);
  EXPECT_EQ(p["full"]["total_us"].get<int64_t>(), 99);
  const json some_only = read_pressure(write("cpu.pressure", "some avg10=0.00 total=5\n"));
  EXPECT_TRUE(some_only["full"].is_null());
  EXPECT_TRUE(read_pressure((dir_ / "missing").string()).is_null());
}

TEST(Pressure, DeltaOfTotals) {
  const json before = {{"host", {{"memory", {{"some", {{"avg10", 0.0}, {"total_us", 100}}},
                                             {"full", nullptr}}},
                                 {"io", nullptr}}},
                       {"cgroup", {{"dir", nullptr}, {"memory", nullptr}, {"io", nullptr}}}};
  json after = before;
  after["host"]["memory"]["some"] = {{"avg10", 2.0}, {"total_us", 350}};
  const json d = pressure_delta(before, after);
  EXPECT_EQ(d["host"]["memory"]["some"]["total_us"].get<int64_t>(), 250);
  EXPECT_DOUBLE_EQ(d["host"]["memory"]["some"]["avg10"].get<double>(), 2.0);
  EXPECT_TRUE(d["host"]["io"].is_null());
}

TEST(Pressure, ProbeGivesFaultsAndPressure) {
  const RepetitionProbe probe;
  std::vector<char> touched(16 << 20, 1);  // 4,096 fresh pages: faults the probe must see
  const json r = probe.finish();
  EXPECT_EQ(touched.back(), 1);
  EXPECT_GT(r["minor_page_faults"].get<int64_t>(), 100);
  EXPECT_TRUE(r["peak_rss_mb"].is_null() || r["peak_rss_mb"].get<double>() >= 16.0);
  EXPECT_TRUE(r["pressure"].contains("host"));
  EXPECT_TRUE(r["pressure"].contains("cgroup"));
}

TEST_F(TempDir, DropPageCache) {
  const std::string file = write("input.bin", std::string(1 << 20, 'x'));
  const json r = drop_page_cache({file, (dir_ / "missing").string()});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(r[0]["advice"], "done");
  EXPECT_EQ(r[0]["bytes"].get<int64_t>(), 1 << 20);
  EXPECT_TRUE(r[0]["resident_before"].is_number());
  EXPECT_NE(r[1]["advice"].get<std::string>().find("open failed"), std::string::npos);
}

TEST(CachePolicy, OnlyTheThreePolicies) {
  EXPECT_NO_THROW(check_cache_policy("warm"));
  EXPECT_NO_THROW(check_cache_policy("drop"));
  EXPECT_THROW(check_cache_policy("cold"), std::exception);
  EXPECT_NE(cache_policy_field("drop")["cache_note"].get<std::string>().find(
                "advice, not proof of a cold cache"),
            std::string::npos);
}

TEST_F(TempDir, LoadReport) {
  EXPECT_EQ(load_report(write("r.json", "{\"a\": 1}"))["a"], 1);
  EXPECT_THROW(load_report(write("bad.json", "{")), std::exception);
  EXPECT_THROW(load_report((dir_ / "missing.json").string()), std::exception);
}

}  // namespace
}  // namespace tessera::bench
