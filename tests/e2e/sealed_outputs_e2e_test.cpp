// Sealed outputs end to end (issue 21's third hostile round): every file a stage writes is vouched
// for by a checksum (a rank marker's or _SUCCESS's "outputs", or catalog.json's seal in its last
// generation's _SUCCESS), damage to any of them is refused naming the file, and a slide-level
// index made from replaced embeddings is stale for query and for tessera-status.
#include <gtest/gtest.h>

#include <set>

#include <nlohmann/json.hpp>

#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "tests/e2e/cohort.h"
#include "tests/e2e/e2e_util.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {
namespace {

const std::string kPatchgen = TESSERA_PATCHGEN;
const std::string kEmbed = TESSERA_EMBED;
const std::string kAggregate = TESSERA_AGGREGATE;
const std::string kIngest = TESSERA_INGEST;
const std::string kQuery = TESSERA_QUERY;
const std::string kStatus = TESSERA_STATUS_EXE;

// OneRun: the one run directory every test of this program reads, made once for all of them.
// Three slides of three patients through every stage: patchgen, embed, ingest (patch index idx),
// aggregate (mean-vit-tiny) and its slide index (ingest --level slide).
class OneRun : public ::testing::Environment {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / fmt::format("tessera_sealed_e2e_{}", ::getpid());
  }
  static std::string run() { return (dir() / "run").string(); }
  void SetUp() override {
    fs::remove_all(dir());
    fs::create_directories(dir());
    const std::string manifest =
        write_cohort(dir(), {3, 1000, 100, 900, 70},
                     "slide_id,path,patient_id\na,s0.tif,p1\nb,s1.tif,p2\nc,s2.tif,p3\n");
    ASSERT_TRUE(patch_and_embed(kPatchgen, kEmbed, manifest, run(), 2, 1));
    for (const std::string& command :
         {mpirun(2) + kIngest + " --run " + run() + " --name idx --shards 2 --threads 1",
          mpirun(2) + kAggregate + " --run " + run(),
          kIngest + " --run " + run() + " --level slide --normalize"}) {
      std::string log;
      ASSERT_EQ(run_command(command, &log), 0) << command << "\n" << log;
    }
  }
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(dir());
  }
};

std::string patch_index() { return OneRun::run() + "/ingest/idx"; }
std::string slide_index() { return OneRun::run() + "/ingest/mean-vit-tiny"; }

std::string similar_slide(std::string* log) {
  const int code = run_command(kQuery + " --index " + slide_index() +
                                   " --similar-slide a -k 2 --format csv --log-level error",
                               log);
  return std::to_string(code);
}

std::string patch_query(std::string* log) {
  return std::to_string(run_command(kQuery + " --index " + patch_index() +
                                        " --patch 3 -k 3 --format csv --threads 1 --log-level error",
                                    log));
}

nlohmann::json status(int* code) {
  std::string out;
  *code = run_command("(" + kStatus + " " + OneRun::run() + " --json 2>/dev/null)", &out);
  return nlohmann::json::parse(out);
}

// Flips 8 bytes in the middle of `path`; returns its former content.
std::string flip_middle(const std::string& path) {
  const std::string before = read_file(path);
  std::string after = before;
  for (size_t i = after.size() / 2; i < std::min(after.size(), after.size() / 2 + 8); ++i) {
    after[i] = static_cast<char>(after[i] ^ 0xFF);
  }
  atomic_write_file(path, after);
  return before;
}

// The files of the skeleton (lineage, markers, logs) that vouch for the others.
bool skeleton_file(const std::string& relative) {
  static const std::set<std::string> kOwn = {"run.json",   "config.ini", "_SUCCESS", "_STALE",
                                             ".lock",      ".ranks.lock", "progress.jsonl"};
  return kOwn.count(relative) || relative.rfind("markers/", 0) == 0;
}

// Every file a stage writes is listed with its checksum by a rank marker or by _SUCCESS; ingest's
// catalog.json, written after the generation's _SUCCESS, by the seal in that _SUCCESS.
TEST(SealedOutputsE2E, EveryFileAStageWritesHasAChecksum) {
  std::vector<std::string> stage_dirs;
  for (const auto& e : fs::recursive_directory_iterator(OneRun::run())) {
    if (e.is_directory() && fs::exists(e.path() / "_SUCCESS")) stage_dirs.push_back(e.path());
  }
  ASSERT_EQ(stage_dirs.size(), 5u);
  for (const std::string& dir : stage_dirs) {
    std::set<std::string> sealed;
    auto add = [&](const nlohmann::json& j) {
      for (const auto& o : j.value("outputs", nlohmann::json::array())) {
        EXPECT_EQ(o.at("xxh3").get<std::string>().size(), 32u) << dir;
        sealed.insert(o.at("file").get<std::string>());
      }
    };
    add(read_json_file(dir + "/_SUCCESS").value());
    for (const auto& m : fs::directory_iterator(dir + "/markers")) {
      add(read_json_file(m.path().string()).value());
    }
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file()) continue;
      const std::string rel = fs::relative(e.path(), dir).string();
      if (skeleton_file(rel)) continue;
      EXPECT_TRUE(sealed.count(rel)) << "'" << dir << "/" << rel << "' has no checksum";
    }
  }
  const auto success = read_json_file(patch_index() + "/gen-00000/_SUCCESS").value();
  ASSERT_TRUE(success.contains("catalog")) << success.dump(2);
  EXPECT_EQ(success["catalog"].at("file"), "../catalog.json");
  EXPECT_EQ(success["catalog"].at("bytes").get<uint64_t>(),
            read_file(patch_index() + "/catalog.json").size());
}

// catalog.json changed into other valid JSON (the index's microns per pixel, which scales every
// point query) is refused naming it, status shows it, and a plain rerun of ingest rebuilds it.
TEST(SealedOutputsE2E, ChangedCatalogIsRefusedNamingItAndRebuiltByARerun) {
  std::string log;
  ASSERT_EQ(patch_query(&log), "0") << log;
  const std::string answer = log;
  const std::string path = patch_index() + "/catalog.json";
  const std::string original = read_file(path);
  nlohmann::json changed = nlohmann::json::parse(original);
  changed["mpp"] = changed["mpp"].get<double>() * 2;
  atomic_write_file(path, changed.dump(2) + "\n");

  EXPECT_EQ(patch_query(&log), "1") << log;
  EXPECT_NE(log.find("catalog.json"), std::string::npos) << log;
  EXPECT_NE(log.find("seal"), std::string::npos) << log;
  int code = 0;
  const nlohmann::json s = status(&code);
  EXPECT_EQ(code, 4) << s.dump(2);
  EXPECT_NE(s.dump().find("catalog.json"), std::string::npos) << s.dump(2);

  ASSERT_EQ(run_command(mpirun(2) + kIngest + " --run " + OneRun::run() +
                            " --name idx --shards 2 --threads 1",
                        &log),
            0)
      << log;
  EXPECT_EQ(patch_query(&log), "0") << log;
  EXPECT_EQ(log, answer);
  nlohmann::json rebuilt = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(rebuilt.at("mpp"), nlohmann::json::parse(original).at("mpp"));
  status(&code);
  EXPECT_EQ(code, 0);
}

// The slide index's files are checked when query loads them: 8 bytes flipped in vectors.faiss
// (which changed the scores, exit 0) and slide_catalog.json changed into other valid JSON are
// refused naming the file.
TEST(SealedOutputsE2E, DamagedSlideIndexIsRefusedNamingTheFile) {
  std::string log;
  ASSERT_EQ(similar_slide(&log), "0") << log;
  const std::string answer = log;
  {
    const std::string path = slide_index() + "/vectors.faiss";
    const std::string before = flip_middle(path);
    EXPECT_EQ(similar_slide(&log), "1") << log;
    EXPECT_NE(log.find("vectors.faiss"), std::string::npos) << log;
    atomic_write_file(path, before);
  }
  {
    const std::string path = slide_index() + "/slide_catalog.json";
    const std::string before = read_file(path);
    nlohmann::json changed = nlohmann::json::parse(before);
    changed["metric"] = "l2";
    atomic_write_file(path, changed.dump(2) + "\n");
    EXPECT_EQ(similar_slide(&log), "1") << log;
    EXPECT_NE(log.find("slide_catalog.json"), std::string::npos) << log;
    atomic_write_file(path, before);
  }
  EXPECT_EQ(similar_slide(&log), "0") << log;
  EXPECT_EQ(log, answer);
}

// Options a slide-level search does not apply are refused (--filter was dropped: exit 0 with
// hits the filter excludes).
TEST(SealedOutputsE2E, OptionsASlideSearchWouldIgnoreAreRefused) {
  for (const std::string& option : std::vector<std::string>{
           "--filter 'patient_id = p2'", "--exclude-same-slide", "--nprobe 4", "--ef-search 8",
           "--mosaic " + (OneRun::dir() / "m.png").string()}) {
    std::string log;
    EXPECT_EQ(run_command(kQuery + " --index " + slide_index() + " --similar-slide a -k 2 " +
                              option,
                          &log),
              2)
        << option << "\n" << log;
    EXPECT_NE(log.find("does not apply to --similar-slide"), std::string::npos) << log;
  }
}

// Damage to a stored embedding that HDF5's Fletcher32 does not see (two 16-bit words of patch 3's
// row changed by +21845 and -21845, three words apart: both sums unchanged mod 65535) gave query
// --patch a wrong query vector with exit 0; the embed shard's XXH3 in its marker refuses it.
TEST(SealedOutputsE2E, StoredEmbeddingDamageFletcherMissesIsRefused) {
  std::string log;
  ASSERT_EQ(patch_query(&log), "0") << log;
  const std::string answer = log;
  std::vector<float> row(64);
  {
    h5::File f = h5::File::open(OneRun::run() + "/embed/vit-tiny/embeddings.h5", h5::Mode::kRead);
    h5::Dataset values = f.open_dataset("embeddings");
    ASSERT_EQ(values.dims().at(1), 64u);
    int64_t id = -1;
    f.open_dataset("patch_id").read_rows(&id, 3, 1);
    ASSERT_EQ(id, 3);
    values.read_rows_as_floats(row.data(), 3, 1);
  }
  const std::string shard = OneRun::run() + "/embed/vit-tiny/shards/rank-00000.h5";
  const std::string before = read_file(shard);
  const std::string needle(reinterpret_cast<const char*>(row.data()), row.size() * sizeof(float));
  const size_t at = before.find(needle);
  ASSERT_NE(at, std::string::npos);
  std::string after = before;
  auto word = [&](size_t p) {
    return (static_cast<unsigned>(static_cast<uint8_t>(after[p])) << 8) |
           static_cast<uint8_t>(after[p + 1]);
  };
  auto set_word = [&](size_t p, unsigned w) {
    after[p] = static_cast<char>(w >> 8);
    after[p + 1] = static_cast<char>(w & 0xFF);
  };
  constexpr unsigned kStep = 21845;  // 65535 / 3
  bool done = false;
  for (size_t p = at; p + 8 <= at + needle.size() && !done; p += 2) {
    const unsigned a = word(p), b = word(p + 6);
    if (a + kStep <= 65534 && b >= kStep && b <= 65534) {
      set_word(p, a + kStep);
      set_word(p + 6, b - kStep);
      done = true;
    } else if (a >= kStep && a <= 65534 && b + kStep <= 65534) {
      set_word(p, a - kStep);
      set_word(p + 6, b + kStep);
      done = true;
    }
  }
  ASSERT_TRUE(done);
  atomic_write_file(shard, after);
  EXPECT_EQ(patch_query(&log), "1") << log;
  EXPECT_NE(log.find("rank-00000.h5"), std::string::npos) << log;
  atomic_write_file(shard, before);
  EXPECT_EQ(patch_query(&log), "0") << log;
  EXPECT_EQ(log, answer);
}

// Issue 21, case 2, through the point lookup: a slide's downsample in index.h5 changed in place
// (valid HDF5, checksums rewritten) placed query --slide's point elsewhere, exit 0; query and
// ingest now check index.h5 against patchgen's _SUCCESS.
TEST(SealedOutputsE2E, ChangedSlideTableOfThePatchIndexIsRefused) {
  auto point_query = [](std::string* log) {
    return run_command(kQuery + " --index " + patch_index() +
                           " --slide b --x 500 --y 400 -k 3 --format csv --threads 1 "
                           "--log-level error",
                       log);
  };
  std::string log;
  ASSERT_EQ(point_query(&log), 0) << log;
  const std::string answer = log;
  const std::string path = OneRun::run() + "/patchgen/index.h5";
  const std::string before = read_file(path);
  {
    h5::File f = h5::File::open(path, h5::Mode::kReadWrite);
    const double three = 3.0;
    f.open_dataset("slides/downsample").write_rows(&three, 1, 1);
    f.close();
  }
  ASSERT_NE(read_file(path), before);
  EXPECT_EQ(point_query(&log), 1) << log;
  EXPECT_NE(log.find("index.h5"), std::string::npos) << log;
  EXPECT_EQ(run_command(mpirun(2) + kIngest + " --run " + OneRun::run() +
                            " --name check2 --shards 2 --threads 1",
                        &log),
            1)
      << log;
  EXPECT_NE(log.find("index.h5"), std::string::npos) << log;
  atomic_write_file(path, before);
  fs::remove_all(OneRun::run() + "/ingest/check2");
  EXPECT_EQ(point_query(&log), 0) << log;
  EXPECT_EQ(log, answer);
}

// Damage to aggregate's cohort file (written by its finish) is found by the slide index built
// from it, naming the file.
TEST(SealedOutputsE2E, DamagedCohortFileIsRefusedByTheSlideIndex) {
  const std::string path = OneRun::run() + "/slides/mean-vit-tiny/slides.h5";
  const std::string before = flip_middle(path);
  std::string log;
  EXPECT_EQ(run_command(kIngest + " --run " + OneRun::run() +
                            " --level slide --normalize --name check --verify full",
                        &log),
            1)
      << log;
  EXPECT_NE(log.find("slides.h5"), std::string::npos) << log;
  atomic_write_file(path, before);
  fs::remove_all(OneRun::run() + "/ingest/check");
}

// A damaged QC image is found by patchgen --verify full and made again, byte for byte (in a copy
// of the run: the repair rewrites _SUCCESS, which makes the later stages stale).
TEST(SealedOutputsE2E, DamagedQcImageIsMadeAgainByVerifyFull) {
  const std::string copy = (OneRun::dir() / "qc-run").string();
  fs::remove_all(copy);
  fs::create_directories(copy);
  fs::copy(OneRun::run() + "/patchgen", copy + "/patchgen", fs::copy_options::recursive);
  const std::string path = copy + "/patchgen/qc/b.png";
  const std::string before = flip_middle(path);
  std::string log;
  ASSERT_EQ(run_command(mpirun(2) + kPatchgen + " --manifest " + (OneRun::dir() / "m.csv").string() +
                            " --out " + copy + " --patch-size 64 --verify full",
                        &log),
            0)
      << log;
  EXPECT_NE(log.find("qc/b.png"), std::string::npos) << log;
  EXPECT_EQ(read_file(path), before);
  fs::remove_all(copy);
}

// Issue 21, case 1 at slide level: embed --overwrite makes the slide vectors, and so the slide
// index, another run's. query --similar-slide refuses it (it answered from the old vectors with
// exit 0), and tessera-status lists the slide index as stale (it did not list it at all).
// Runs last: it replaces the embeddings.
TEST(SealedOutputsE2E, ZSlideIndexOfReplacedEmbeddingsIsStale) {
  std::string log;
  ASSERT_EQ(similar_slide(&log), "0") << log;
  ASSERT_EQ(run_command(mpirun(2) + kEmbed + " --run " + OneRun::run() +
                            " --model vit-tiny --batch-size 8 --torch-threads 1 --seed 1 "
                            "--overwrite",
                        &log),
            0)
      << log;
  EXPECT_TRUE(fs::exists(slide_index() + "/_STALE")) << log;
  EXPECT_EQ(similar_slide(&log), "2") << log;
  EXPECT_NE(log.find("no longer matches its inputs"), std::string::npos) << log;
  int code = 0;
  const nlohmann::json s = status(&code);
  EXPECT_EQ(code, 4) << s.dump(2);
  bool listed = false;
  for (const auto& row : s.at("stages")) {
    if (row.at("dir") == fs::absolute(slide_index()).lexically_normal().string()) {
      listed = true;
      EXPECT_EQ(row.at("state"), "stale") << row.dump(2);
    }
  }
  EXPECT_TRUE(listed) << s.dump(2);
}

}  // namespace
}  // namespace tessera::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tessera::e2e::OneRun);
  tessera::h5::init();
  return RUN_ALL_TESTS();
}
