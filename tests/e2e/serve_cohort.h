// The cohort of serve's end-to-end program (serve_e2e_test.cpp, serve_load_e2e_test.cpp), made once
// per run of the program (a gtest environment), and what its tests share.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/core/fs.h"
#include "common/store/index.h"
#include "tests/e2e/cohort.h"
#include "tests/e2e/e2e_util.h"

namespace tessera::e2e {
namespace {

using nlohmann::json;
const std::string kPatchgen = TESSERA_PATCHGEN;
const std::string kEmbed = TESSERA_EMBED;
const std::string kIngest = TESSERA_INGEST;
const std::string kQuery = TESSERA_QUERY;
const std::string kServe = TESSERA_SERVE;
const std::string kAggregate = TESSERA_AGGREGATE;

// OneRun: the one run directory every test of this program reads, made once for all of them.
// Four slides of three patients over two sites in two cohort parts, embedded and ingested into
// "flat" (both parts, 3 shards) and "grown" (part 0 only; the reload test appends part 1); slide
// and patient vectors (aggregate, mean) ingested into the slide-level index "mean-vit-tiny" and
// the patient-level "mean-vit-tiny-patient", which serve finds beside "flat" (--slide-index auto).
class OneRun : public ::testing::Environment {
 public:
  static constexpr const char* kSlideIndex = "mean-vit-tiny";
  static constexpr const char* kPatientIndex = "mean-vit-tiny-patient";
  static fs::path dir() { return fs::temp_directory_path() / fmt::format("tessera_serve_e2e_{}", ::getpid()); }
  static std::string run() { return (dir() / "run").string(); }
  static std::string index(const std::string& name) { return run() + "/ingest/" + name; }
  void SetUp() override {
    fs::remove_all(dir());
    fs::create_directories(dir());
    const std::string manifest = write_cohort(dir(), {4, 1400, 100, 1200, 70},
                                              "slide_id,path,patient_id,site,age\n"
                                              "a,s0.tif,P1,lung,61\n"
                                              "b,s1.tif,P1,colon,61\n"
                                              "c,s2.tif,P2,lung,48\n"
                                              "d,s3.tif,P3,colon,70\n");
    ASSERT_TRUE(patch_and_embed(kPatchgen, kEmbed, manifest, run(), 2, 2));
    std::string log;
    ASSERT_EQ(run_command(mpirun(2) + kIngest + " --run " + run() +
                              " --tag vit-tiny --name flat --threads 1 --shards 3 --normalize",
                          &log), 0) << log;
    ASSERT_EQ(run_command(mpirun(1) + kIngest + " --run " + run() +
                              " --tag vit-tiny --name grown --threads 1 --shards 3 --normalize "
                              "--embed-parts 0",
                          &log), 0) << log;
    for (const char* level : {"slide", "patient"}) {
      ASSERT_EQ(run_command(mpirun(2) + kAggregate + " --run " + run() + " --tag vit-tiny --level " +
                                level, &log), 0) << log;
      ASSERT_EQ(run_command(mpirun(1) + kIngest + " --run " + run() + " --level " + level +
                                " --slides " + (std::string(level) == "slide" ? kSlideIndex : kPatientIndex) +
                                " --normalize", &log), 0) << log;
    }
  }
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(dir());
  }
};

// Some patch ids of every slide.
std::vector<int64_t> some_patches() {
  std::vector<int64_t> ids;
  for (int part = 0; part < 2; ++part) {
    const IndexInfo info = load_index_info(OneRun::run() + fmt::format("/patchgen/part-{:05d}-of-00002", part));
    const IndexRows rows = IndexReader(info.path).read_range(0, info.rows);
    for (size_t i = 0; i < rows.size(); i += std::max<size_t>(1, rows.size() / 4)) ids.push_back(rows.patch_id[i]);
  }
  return ids;
}

}  // namespace
}  // namespace tessera::e2e
