// ingest and query end to end: generated slides through patchgen and embed (two cohort parts),
// then ingest under mpirun with 1..3 ranks into 1, 3 and 4 shards, and query alone and under
// mpirun, as a user runs them.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/slide/png_io.h"
#include "common/store/index.h"
#include "common/store/store.h"
#include "tests/e2e/cohort.h"
#include "tests/e2e/e2e_util.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {
namespace {

const std::string kPatchgen = TESSERA_PATCHGEN;
const std::string kEmbed = TESSERA_EMBED;
const std::string kIngest = TESSERA_INGEST;
const std::string kQuery = TESSERA_QUERY;

// OneRun: the one run directory every test of this program reads, made once for all of them.
// Four slides of three patients over two sites, in two cohort parts (slide j in part j mod 2),
// patch-extracted and embedded once for every test.
class OneRun : public ::testing::Environment {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / fmt::format("tessera_ingest_e2e_{}", ::getpid());
  }
  static std::string run() { return (dir() / "run").string(); }
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
  }
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(dir());
  }
};

std::string ingest(int ranks, const std::string& name, const std::string& extra) {
  return mpirun(ranks) + kIngest + " --run " + OneRun::run() + " --tag vit-tiny --name " + name +
         " --threads 1 " + extra;
}

std::string index_dir(const std::string& name) { return OneRun::run() + "/ingest/" + name; }

std::string query(int ranks, const std::string& name, const std::string& extra) {
  return (ranks > 0 ? mpirun(ranks) : std::string()) + kQuery + " --index " + index_dir(name) +
         " --threads 1 --format json " + extra;
}

nlohmann::json run_json(const std::string& command) {
  std::string log;
  const int code = run_command(command + " --log-level error", &log);
  EXPECT_EQ(code, 0) << command << "\n" << log;
  const size_t start = log.find('{');
  if (code != 0 || start == std::string::npos) return {};
  return nlohmann::json::parse(log.substr(start));
}

// A catalog without its times.
nlohmann::json timeless(nlohmann::json catalog) {
  catalog.erase("created");
  catalog.erase("updated");
  for (auto& g : catalog["generations"]) g.erase("completed");
  return catalog;
}

nlohmann::json catalog_of(const std::string& name) {
  return read_json_file(index_dir(name) + "/catalog.json").value_or(nlohmann::json());
}

// (patch_id, score) per hit of every query.
std::vector<std::vector<std::pair<int64_t, float>>> hits_of(const nlohmann::json& result) {
  std::vector<std::vector<std::pair<int64_t, float>>> out;
  for (const auto& q : result.at("queries")) {
    auto& list = out.emplace_back();
    for (const auto& h : q.at("hits")) {
      list.emplace_back(h.at("patch_id").get<int64_t>(), h.at("score").get<float>());
    }
  }
  return out;
}

// Some patch ids of the run, from part 0's and part 1's indexes.
std::vector<int64_t> some_patches() {
  std::vector<int64_t> ids;
  for (int part = 0; part < 2; ++part) {
    const IndexInfo info = load_index_info(
        OneRun::run() + fmt::format("/patchgen/part-{:05d}-of-00002", part));
    const IndexRows rows = IndexReader(info.path).read_range(0, info.rows);
    for (size_t i = 0; i < rows.size(); i += std::max<size_t>(1, rows.size() / 3)) {
      ids.push_back(rows.patch_id[i]);
    }
  }
  return ids;
}

TEST(IngestE2E, CatalogsAndResultsDoNotDependOnRanksAndShardsGiveTheUnshardedTopK) {
  std::vector<int64_t> patches = some_patches();
  ASSERT_GE(patches.size(), 4u);
  patches.resize(3);
  std::vector<std::vector<std::pair<int64_t, float>>> unsharded;
  for (int K : {1, 3, 4}) {
    nlohmann::json first_catalog;
    std::vector<std::vector<std::vector<std::pair<int64_t, float>>>> results;
    for (int R = 1; R <= 3; ++R) {
      const std::string name = fmt::format("flat-k{}-r{}", K, R);
      std::string log;
      ASSERT_EQ(run_command(ingest(R, name, fmt::format("--shards {}", K)), &log), 0) << log;
      const nlohmann::json catalog = catalog_of(name);
      ASSERT_EQ(catalog.at("shards").size(), static_cast<size_t>(K));
      if (R == 1) {
        first_catalog = timeless(catalog);
      } else {
        // Same shards, rows and file hashes; only the run's name and times differ.
        nlohmann::json c = timeless(catalog);
        EXPECT_EQ(c.at("shards"), first_catalog.at("shards")) << "K=" << K << " R=" << R;
        EXPECT_EQ(c.at("rows"), first_catalog.at("rows"));
      }
      std::vector<std::vector<std::pair<int64_t, float>>> per_query;
      for (int64_t id : patches) {
        const nlohmann::json r = run_json(query(0, name, fmt::format("--patch {} -k 7", id)));
        ASSERT_FALSE(r.is_null());
        auto h = hits_of(r);
        ASSERT_EQ(h.size(), 1u);
        ASSERT_EQ(h[0].size(), 7u);
        per_query.push_back(h[0]);
      }
      results.push_back(per_query);
    }
    for (int R = 1; R < 3; ++R) EXPECT_EQ(results[R], results[0]) << "K=" << K;
    if (K == 1) {
      unsharded = results[0];
    } else {
      EXPECT_EQ(results[0], unsharded) << "K=" << K << " shards differ from one Flat index";
    }
  }
  // Each shard balanced by rows within the largest slide (by-slide assignment).
  const nlohmann::json c = catalog_of("flat-k3-r1");
  EXPECT_EQ(c.at("rows"), catalog_of("flat-k1-r1").at("rows"));
}

TEST(IngestE2E, QueryUnderMpiEqualsOneProcess) {
  std::string log;
  ASSERT_EQ(run_command(ingest(2, "mpi", "--shards 3"), &log), 0) << log;
  const std::vector<int64_t> patches = some_patches();
  for (const std::string extra : {"", "--filter \"site = lung\"", "--exclude-same-patient"}) {
    const std::string q = fmt::format("--patch {} -k 5 {}", patches[1], extra);
    const auto alone = hits_of(run_json(query(0, "mpi", q)));
    for (int ranks : {2, 3}) {
      EXPECT_EQ(hits_of(run_json(query(ranks, "mpi", q))), alone) << ranks << " " << extra;
    }
  }
}

TEST(IngestE2E, FiltersReturnOnlyMatchingRowsAndKOfThemWhenKExist) {
  std::string log;
  ASSERT_EQ(run_command(ingest(1, "filters", "--shards 2"), &log), 0) << log;
  const int64_t patch = some_patches()[0];  // slide a (P1, lung)
  struct Case {
    std::string filter;
    std::function<bool(const nlohmann::json&)> holds;
  };
  const std::vector<Case> cases = {
      {"site = lung", [](const auto& h) { return h.at("site") == "lung"; }},
      {"patient_id != P1", [](const auto& h) { return h.at("patient_id") != "P1"; }},
      {"slide_id in (c, d) and age >= 50",
       [](const auto& h) { return h.at("slide_id") == "d"; }},
      {"not (x < 640) and tissue > 0.5",
       [](const auto& h) { return h.at("x").template get<int64_t>() >= 640 && h.at("tissue") > 0.5; }}};
  for (const Case& c : cases) {
    const nlohmann::json r =
        run_json(query(0, "filters", fmt::format("--patch {} -k 40 --filter \"{}\"", patch, c.filter)));
    ASSERT_FALSE(r.is_null()) << c.filter;
    const auto& hits = r.at("queries").at(0).at("hits");
    const int64_t matching = r.at("search").at("matching_rows").get<int64_t>();
    EXPECT_EQ(static_cast<int64_t>(hits.size()), std::min<int64_t>(40, matching)) << c.filter;
    EXPECT_GE(matching, 40) << c.filter << ": the cohort should have 40 matching patches";
    for (const auto& h : hits) EXPECT_TRUE(c.holds(h)) << c.filter << ": " << h.dump();
  }
  // Exclusions: no hit of the query's slide, or of its patient (P1 holds slides a and b).
  for (const auto& [flag, banned] : std::vector<std::pair<std::string, std::set<std::string>>>{
           {"--exclude-same-slide", {"a"}}, {"--exclude-same-patient", {"a", "b"}}}) {
    const nlohmann::json r = run_json(query(0, "filters", fmt::format("--patch {} -k 30 {}", patch, flag)));
    const auto& hits = r.at("queries").at(0).at("hits");
    EXPECT_EQ(hits.size(), 30u);
    for (const auto& h : hits) EXPECT_FALSE(banned.count(h.at("slide_id").get<std::string>())) << flag;
  }
}

TEST(IngestE2E, AppendingPartOneEqualsIngestingBoth) {
  std::string log;
  ASSERT_EQ(run_command(ingest(2, "both", "--shards 3"), &log), 0) << log;
  ASSERT_EQ(run_command(ingest(2, "grown", "--shards 3 --embed-parts 0"), &log), 0) << log;
  EXPECT_EQ(catalog_of("grown").at("parts_in"), nlohmann::json::array({0}));
  ASSERT_EQ(run_command(ingest(3, "grown", "--shards 3 --append"), &log), 0) << log;
  const nlohmann::json grown = catalog_of("grown"), both = catalog_of("both");
  EXPECT_EQ(grown.at("parts_in"), nlohmann::json::array({0, 1}));
  EXPECT_EQ(grown.at("rows"), both.at("rows"));
  ASSERT_EQ(grown.at("generations").size(), 2u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(grown.at("shards")[k].at("rows"), both.at("shards")[k].at("rows")) << k;
  }
  for (int64_t id : some_patches()) {
    const std::string q = fmt::format("--patch {} -k 9", id);
    EXPECT_EQ(hits_of(run_json(query(0, "grown", q))), hits_of(run_json(query(0, "both", q))));
  }
  // Nothing new: a further --append adds nothing and changes nothing.
  ASSERT_EQ(run_command(ingest(1, "grown", "--shards 3 --append"), &log), 0) << log;
  EXPECT_NE(log.find("already in"), std::string::npos) << log;
  EXPECT_EQ(catalog_of("grown").at("generations").size(), 2u);
  // An append with other settings is refused.
  EXPECT_EQ(run_command(ingest(1, "grown", "--shards 4 --append"), &log), 2) << log;
  EXPECT_NE(log.find("--shards 4"), std::string::npos) << log;
}

TEST(IngestE2E, AKilledRankThenARerunGivesTheUninterruptedResult) {
  std::string log;
  ASSERT_EQ(run_command(ingest(2, "steady", "--shards 4"), &log), 0) << log;
  EXPECT_NE(run_command(ingest(2, "killed", "--shards 4 --debug-kill-rank 1 --debug-kill-after 1"),
                        &log),
            0)
      << log;
  EXPECT_FALSE(fs::exists(index_dir("killed") + "/catalog.json"));
  ASSERT_EQ(run_command(ingest(2, "killed", "--shards 4"), &log), 0) << log;
  nlohmann::json a = timeless(catalog_of("killed")), b = timeless(catalog_of("steady"));
  EXPECT_EQ(a.at("shards"), b.at("shards"));
}

TEST(IngestE2E, IvfIndexesTrainOnceAndAnImageQueryFindsItsOwnPatch) {
  std::string log;
  ASSERT_EQ(run_command(ingest(2, "ivf", "--shards 2 --index IVF4,Flat --normalize --train-size 300"),
                        &log),
            0)
      << log;
  const nlohmann::json c = catalog_of("ivf");
  ASSERT_EQ(c.at("trained").size(), 1u);
  EXPECT_GT(c.at("default_nprobe").get<int>(), 0);
  // A stored patch written as PNG and embedded again comes back as its own nearest neighbour.
  const IndexInfo info = load_index_info(OneRun::run() + "/patchgen/part-00001-of-00002");
  const IndexRows rows = IndexReader(info.path).read_range(5, 1);
  ShardReader shard(info.shard_path(rows.shard[0]));
  Image8 image{64, 64, 3, std::vector<uint8_t>(64 * 64 * 3)};
  shard.read_patches({static_cast<uint64_t>(rows.row[0])}, image.pixels.data());
  const std::string png = (OneRun::dir() / "patch.png").string();
  write_png(png, image);
  const std::string mosaic = (OneRun::dir() / "mosaic.png").string();
  const nlohmann::json r =
      run_json(query(0, "ivf", "--image " + png + " -k 3 --nprobe 4 --mosaic " + mosaic));
  ASSERT_FALSE(r.is_null());
  const auto& hits = r.at("queries").at(0).at("hits");
  ASSERT_EQ(hits.size(), 3u);
  EXPECT_EQ(hits[0].at("patch_id").get<int64_t>(), rows.patch_id[0]);
  EXPECT_NEAR(hits[0].at("score").get<double>(), 1.0, 1e-4);  // cosine with itself
  const Image8 picture = read_png(mosaic);
  EXPECT_GT(picture.width, 3 * 64);
}

TEST(IngestE2E, ClearErrors) {
  std::string log;
  ASSERT_EQ(run_command(ingest(1, "errors", "--shards 2"), &log), 0) << log;
  const int64_t patch = some_patches()[0];
  struct Case {
    std::string extra;
    int code;
    std::string says;
  };
  const std::vector<Case> cases = {
      {fmt::format("--patch {} --filter \"sitee = lung\"", patch), 2, "unknown column 'sitee'"},
      {fmt::format("--patch {} --filter \"site = = lung\"", patch), 2, "at position 8"},
      {"--patch 12345", 2, "unknown patch id 12345"},
      {"--slide nope --x 0 --y 0", 2, "unknown slide 'nope'"}};
  for (const Case& c : cases) {
    EXPECT_EQ(run_command(query(0, "errors", c.extra), &log), c.code) << c.extra << "\n" << log;
    EXPECT_NE(log.find(c.says), std::string::npos) << c.extra << "\n" << log;
  }
  // Vectors of another dimension.
  const std::string npy = (OneRun::dir() / "q.npy").string();
  {
    std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3), }";
    header.resize(117, ' ');
    header += '\n';
    std::string bytes = std::string("\x93NUMPY\x01\x00", 8) + std::string("\x76\x00", 2) + header;
    bytes += std::string(12, '\0');
    write_text(npy, bytes);
  }
  EXPECT_EQ(run_command(query(0, "errors", "--vectors " + npy), &log), 2) << log;
  EXPECT_NE(log.find("dimension 3"), std::string::npos) << log;
  // A damaged shard is named.
  const std::string victim = index_dir("errors") + "/gen-00000/shards/shard-00001/index.faiss";
  fs::resize_file(victim, fs::file_size(victim) - 10);
  EXPECT_EQ(run_command(query(0, "errors", fmt::format("--patch {}", patch)), &log), 1) << log;
  EXPECT_NE(log.find("shard-00001/index.faiss"), std::string::npos) << log;
  // An embed part that is not complete is named, with what to run.
  fs::rename(OneRun::run() + "/embed/vit-tiny/part-00001-of-00002/_SUCCESS",
             OneRun::dir() / "_SUCCESS.saved");
  EXPECT_EQ(run_command(ingest(1, "incomplete", ""), &log), 2) << log;
  EXPECT_NE(log.find("part-00001-of-00002"), std::string::npos) << log;
  fs::rename(OneRun::dir() / "_SUCCESS.saved",
             OneRun::run() + "/embed/vit-tiny/part-00001-of-00002/_SUCCESS");
}

// Outputs built on replaced inputs are never served (issue: a wrong answer with exit 0). The run
// is copied first, which also shows that a moved run keeps its lineage.
TEST(IngestE2E, AnIndexBuiltOnReplacedInputsIsRefusedUntilRebuilt) {
  const std::string run = (OneRun::dir() / "moved_run").string();
  fs::remove_all(run);
  fs::copy(OneRun::run(), run, fs::copy_options::recursive);
  fs::remove_all(run + "/ingest");
  std::string log;
  const std::string ingest_cmd =
      mpirun(2) + kIngest + " --run " + run + " --tag vit-tiny --name idx --threads 1 --shards 3";
  const std::string query_cmd = kQuery + " --index " + run + "/ingest/idx --threads 1 " +
                                fmt::format("--format json --patch {} -k 3", some_patches()[0]);
  ASSERT_EQ(run_command(ingest_cmd, &log), 0) << log;
  ASSERT_EQ(run_command(query_cmd, &log), 0) << log;

  // embed --overwrite with another seed: the index made from the old embeddings is stale.
  ASSERT_EQ(run_command(mpirun(2) + kEmbed + " --run " + run +
                            " --model vit-tiny --seed 1 --batch-size 8 --torch-threads 1 "
                            "--part 0 --parts 2 --overwrite",
                            &log),
            0)
      << log;
  EXPECT_TRUE(fs::exists(run + "/ingest/idx/gen-00000/_STALE"));
  EXPECT_EQ(run_command(query_cmd, &log), 2) << log;
  EXPECT_NE(log.find("no longer matches its inputs"), std::string::npos) << log;
  EXPECT_EQ(run_command(query_cmd + " --verify full", &log), 2) << log;
  // --append does not extend it either.
  EXPECT_EQ(run_command(ingest_cmd + " --append", &log), 2) << log;
  EXPECT_NE(log.find("cannot append"), std::string::npos) << log;
  // Rebuilt (part 1 embedded with the same model first: one index holds one model), it answers.
  ASSERT_EQ(run_command(mpirun(2) + kEmbed + " --run " + run +
                            " --model vit-tiny --seed 1 --batch-size 8 --torch-threads 1 "
                            "--part 1 --parts 2 --overwrite",
                            &log),
            0)
      << log;
  ASSERT_EQ(run_command(ingest_cmd + " --overwrite", &log), 0) << log;
  ASSERT_EQ(run_command(query_cmd, &log), 0) << log;

  // patchgen --overwrite of part 1 with other settings: its embeddings and the index are stale,
  // through the embed stage (every stage downstream, not only the next one).
  ASSERT_EQ(run_command(mpirun(2) + kPatchgen + " --manifest " +
                            (OneRun::dir() / "m.csv").string() + " --out " + run +
                            " --patch-size 64 --min-tissue 0.5 --part 1 --parts 2 --overwrite",
                            &log),
            0)
      << log;
  EXPECT_TRUE(fs::exists(run + "/embed/vit-tiny/part-00001-of-00002/_STALE"));
  EXPECT_TRUE(fs::exists(run + "/ingest/idx/gen-00000/_STALE"));
  EXPECT_FALSE(fs::exists(run + "/embed/vit-tiny/part-00000-of-00002/_STALE"));
  EXPECT_EQ(run_command(query_cmd, &log), 2) << log;
  EXPECT_EQ(run_command(ingest_cmd + " --append", &log), 2) << log;
  fs::remove_all(run);
}

}  // namespace
}  // namespace tessera::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tessera::e2e::OneRun);
  tessera::h5::init();
  return RUN_ALL_TESTS();
}
