// The pure part of patchgen_bench: its options (modes, the DICOM twin, defaults and refusals) and
// patchgen's Config as the benchmark sets it.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "benchmarks/patchgen/options.h"
#include "common/core/error.h"

namespace tessera::patchgen::driver {
namespace {

po::variables_map parse(std::vector<const char*> args) {
  args.insert(args.begin(), "patchgen_bench");
  const auto desc = bench_options();
  po::variables_map v;
  po::store(po::parse_command_line(static_cast<int>(args.size()), args.data(), desc), v);
  po::notify(v);
  return v;
}

TEST(PatchgenBenchOptions, DefaultsAndTheDicomTwin) {
  BenchOptions o = bench_options_from(parse({"--work", "/tmp/pb", "--slide", "/tmp/s.tif"}), 3);
  EXPECT_EQ(o.modes, (std::vector<std::string>{"patchgen", "patchgen_openslide", "reference",
                                               "decode_limit"}));
  EXPECT_EQ(o.out, "/tmp/pb/patchgen_bench_np3.json");
  EXPECT_EQ(o.reps, 3);
  EXPECT_TRUE(o.dicom_dir.empty());
  o = bench_options_from(parse({"--work", "/tmp/pb", "--slide", "/tmp/s.tif", "--modes",
                                "reference,patchgen,reference", "--dicom", "j2k-sparse"}),
                         1);
  EXPECT_EQ(o.modes, (std::vector<std::string>{"reference", "patchgen", "patchgen_dicom"}));
  EXPECT_EQ(o.dicom_dir, "/tmp/s.tif.dicom-j2k-sparse");
}

TEST(PatchgenBenchOptions, RefusesWhatCannotBeMeasured) {
  auto refused = [](std::vector<const char*> args, const std::string& says) {
    args.insert(args.begin(), {"--work", "/tmp/pb"});
    try {
      bench_options_from(parse(args), 1);
      ADD_FAILURE() << "accepted; expected: " << says;
    } catch (const InvalidInput& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  };
  refused({"--modes", "patchgen,nosuch"}, "invalid --modes entry 'nosuch'");
  refused({"--modes", "patchgen_dicom"}, "needs --dicom");
  refused({"--dicom", "png"}, "invalid --dicom 'png'");
  refused({"--reps", "0"}, "--reps 0");
  refused({"--warmup", "-1"}, "--warmup -1");
}

TEST(PatchgenBenchOptions, PatchgenRunsWithWhatTheBenchmarkSets) {
  const Config c = patchgen_config(parse({"--work", "/tmp/pb", "--patch-size", "128"}),
                                   "/tmp/pb/manifest.csv", "/tmp/pb/run");
  EXPECT_EQ(c.patch_size, 128);
  EXPECT_EQ(c.manifest, "/tmp/pb/manifest.csv");
  EXPECT_EQ(c.out, "/tmp/pb/run");
  EXPECT_TRUE(c.stage.overwrite);
}

}  // namespace
}  // namespace tessera::patchgen::driver
