// patchgen end to end: the executable under mpirun with 1..3 ranks on generated slides and the
// real openslide-python fixtures; outputs, exit codes, reruns and a killed rank.
#include <openslide/openslide.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>
#include <tuple>
#include <utility>

#include "common/core/fs.h"
#include "common/slide/png_io.h"
#include "common/h5/h5.h"
#include "common/stage/marker.h"
#include "stages/patchgen/digest.h"
#include "common/store/store.h"
#include "tests/synthslide/synthslide.h"
#include "tests/e2e/e2e_util.h"

namespace tessera::e2e {
namespace {

const std::string kPatchgen = TESSERA_PATCHGEN;
const std::string kFixtures = std::string(TESSERA_FIXTURES_DIR) + "/openslide-python/";

// OneRun: the one run directory every test of this program reads, made once for all of them.
// Three small synthetic slides, generated once for the whole test program.
class OneRun : public ::testing::Environment {
 public:
  static fs::path dir() { return fs::temp_directory_path() / fmt::format("tessera_cohort_{}", ::getpid()); }
  void SetUp() override {
    fs::create_directories(dir());
    const int sizes[3][2] = {{3000, 2200}, {2400, 2600}, {2000, 1500}};
    for (int i = 0; i < 3; ++i) {
      synth::SlideSpec spec;
      spec.path = (dir() / fmt::format("s{}.tif", i)).string();
      spec.width = sizes[i][0];
      spec.height = sizes[i][1];
      spec.seed = 100 + i;
      spec.mpp = i == 1 ? 0.25 : 0.5;  // slide 1 is read at level 1 (0.5 um/px)
      synth::write_slide(spec);
    }
    write_text((dir() / "manifest.csv").string(),
               "slide_id,path,patient_id,site\n"
               "A,s0.tif,P1,lyon\nB,s1.tif,P1,lyon\nC,s2.tif,P2,\"nice, fr\"\n");
  }
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(dir());
  }
};

const std::string kSmallGrid = " --patch-size 128 --chunk-patches 16";

std::string patchgen(int ranks, const std::string& manifest, const std::string& out,
                     const std::string& extra = "") {
  return mpirun(ranks) + kPatchgen + " --manifest " + manifest + " --out " + out + kSmallGrid +
         " --progress-interval 0.5 " + extra;
}

std::string manifest() { return (OneRun::dir() / "manifest.csv").string(); }

TEST(PatchgenE2E, IndexAndPixelsIdenticalForOneTwoThreeRanks) {
  TempDir tmp("pg_ranks");
  std::vector<patchgen::RunDigest> digests;
  for (int ranks = 1; ranks <= 3; ++ranks) {
    const std::string out = tmp / fmt::format("run{}", ranks);
    std::string log;
    ASSERT_EQ(run_command(patchgen(ranks, manifest(), out), &log), 0) << log;
    digests.push_back(patchgen::digest_run(out + "/patchgen"));
    for (int r = 0; r < ranks; ++r) {
      EXPECT_TRUE(fs::exists(fmt::format("{}/patchgen/shards/rank-{:05d}.h5", out, r)));
      EXPECT_TRUE(fs::exists(fmt::format("{}/patchgen/markers/rank-{:05d}.json", out, r)));
    }
    for (const char* id : {"A", "B", "C"}) {
      EXPECT_TRUE(fs::exists(fmt::format("{}/patchgen/qc/{}.png", out, id)));
    }
  }
  // The runs above read with the direct tile reader (--reader auto on tiled JPEG TIFF, slide B
  // at level 1); OpenSlide must give the same bytes.
  int64_t direct_slides = 0, tiles = 0;
  for (int r = 0; r < 3; ++r) {
    const auto marker = read_json_file(fmt::format("{}/patchgen/markers/rank-{:05d}.json",
                                                   tmp / "run3", r)).value();
    direct_slides += marker["stats"]["direct_slides"].get<int64_t>();
    tiles += marker["stats"]["tiles_decoded"].get<int64_t>();
    EXPECT_EQ(marker["stats"]["openslide_fallbacks"].get<int64_t>(), 0);
  }
  EXPECT_GE(direct_slides, 3);
  EXPECT_GT(tiles, 0);
  const std::string openslide = tmp / "openslide";
  std::string log;
  ASSERT_EQ(run_command(patchgen(2, manifest(), openslide, "--reader openslide"), &log), 0) << log;
  digests.push_back(patchgen::digest_run(openslide + "/patchgen"));
  EXPECT_GT(digests[0].patches, 100);
  for (size_t r = 1; r < digests.size(); ++r) {
    EXPECT_EQ(digests[r].patches, digests[0].patches);
    EXPECT_EQ(digests[r].index_sha256, digests[0].index_sha256) << "run " << r;
    EXPECT_EQ(digests[r].pixels_sha256, digests[0].pixels_sha256) << "run " << r;
  }
}

TEST(PatchgenE2E, ForcedDirectReaderFailsASlideItCannotReadNamingIt) {
  // boxes.tiff is deflate-compressed: --reader direct refuses it, the slide fails with the
  // reason, the others are read.
  TempDir tmp("pg_direct");
  write_text(tmp / "manifest.csv", fmt::format("slide_id,path,mpp\nA,{},0.5\nboxes,{}boxes.tiff,0.5\n",
                                               (OneRun::dir() / "s0.tif").string(), kFixtures));
  const std::string out = tmp / "run";
  std::string log;
  EXPECT_EQ(run_command(patchgen(1, tmp / "manifest.csv", out, "--reader direct"),
                        &log),
            3)
      << log;
  EXPECT_NE(log.find("boxes.tiff"), std::string::npos) << log;
  EXPECT_NE(log.find("--reader direct"), std::string::npos) << log;
  EXPECT_NE(log.find("not JPEG"), std::string::npos) << log;
}

TEST(PatchgenE2E, IndexLayoutAndPixelsMatchOpenSlide) {
  TempDir tmp("pg_layout");
  const std::string out = tmp / "run";
  std::string log;
  ASSERT_EQ(run_command(patchgen(2, manifest(), out, "--partition block-cyclic:5"), &log), 0) << log;
  h5::File index = h5::File::open(out + "/patchgen/index.h5", h5::Mode::kRead);
  auto ids = index.open_dataset("patch_id").read_all<int64_t>();
  auto slide = index.open_dataset("slide").read_all<int32_t>();
  auto coords = index.open_dataset("coords").read_all<int64_t>();
  auto shard = index.open_dataset("shard").read_all<int32_t>();
  auto row = index.open_dataset("row").read_all<int64_t>();
  ASSERT_FALSE(ids.empty());
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(ids[i] >> 32, slide[i]);
  h5::Group slides = index.open_group("slides");
  EXPECT_EQ(slides.open_dataset("slide_id").read_strings(), (std::vector<std::string>{"A", "B", "C"}));
  EXPECT_EQ(slides.open_dataset("status").read_strings(), (std::vector<std::string>{"ok", "ok", "ok"}));
  EXPECT_EQ(slides.open_group("metadata").open_dataset("site").read_strings(),
            (std::vector<std::string>{"lyon", "lyon", "nice, fr"}));
  EXPECT_EQ(slides.open_dataset("level").read_all<int32_t>(), (std::vector<int32_t>{0, 1, 0}));
  auto counts = slides.open_dataset("patch_count").read_all<int64_t>();
  EXPECT_EQ(counts[0] + counts[1] + counts[2], static_cast<int64_t>(ids.size()));

  // Every 7th patch: the stored pixels are openslide_read_region's, byte for byte.
  const char* paths[3] = {"s0.tif", "s1.tif", "s2.tif"};
  const int levels[3] = {0, 1, 0};
  std::vector<uint32_t> argb(128 * 128);
  std::vector<uint8_t> stored(128 * 128 * 3);
  int checked = 0;
  for (size_t i = 0; i < ids.size(); i += 7) {
    ShardReader reader(fmt::format("{}/patchgen/shards/rank-{:05d}.h5", out, shard[i]));
    reader.read_patches({static_cast<uint64_t>(row[i])}, stored.data());
    openslide_t* osr = openslide_open((OneRun::dir() / paths[slide[i]]).c_str());
    ASSERT_NE(osr, nullptr);
    openslide_read_region(osr, argb.data(), coords[2 * i], coords[2 * i + 1], levels[slide[i]], 128, 128);
    ASSERT_EQ(openslide_get_error(osr), nullptr);
    openslide_close(osr);
    for (size_t p = 0; p < argb.size(); ++p) {
      ASSERT_EQ(argb[p] >> 24, 255u);
      ASSERT_EQ(stored[3 * p], static_cast<uint8_t>(argb[p] >> 16)) << "patch " << ids[i];
      ASSERT_EQ(stored[3 * p + 1], static_cast<uint8_t>(argb[p] >> 8));
      ASSERT_EQ(stored[3 * p + 2], static_cast<uint8_t>(argb[p]));
    }
    ++checked;
  }
  EXPECT_GT(checked, 10);
}

TEST(PatchgenE2E, KilledRankThenRerunEqualsUninterruptedRun) {
  TempDir tmp("pg_kill");
  std::string log;
  ASSERT_EQ(run_command(patchgen(2, manifest(), tmp / "clean"), &log), 0) << log;
  const std::string out = tmp / "killed";
  int code = run_command(patchgen(2, manifest(), out, "--debug-kill-rank 1 --debug-kill-after 25"), &log);
  EXPECT_NE(code, 0) << log;
  EXPECT_FALSE(fs::exists(out + "/patchgen/_SUCCESS"));
  EXPECT_FALSE(fs::exists(out + "/patchgen/markers/rank-00001.json"));
  ASSERT_EQ(run_command(patchgen(2, manifest(), out), &log), 0) << log;
  EXPECT_NE(log.find("resuming"), std::string::npos) << log;
  auto clean = patchgen::digest_run(tmp / "clean/patchgen");
  auto rerun = patchgen::digest_run(out + "/patchgen");
  EXPECT_EQ(rerun.index_sha256, clean.index_sha256);
  EXPECT_EQ(rerun.pixels_sha256, clean.pixels_sha256);
  // A third run finds the stage complete and changes nothing.
  ASSERT_EQ(run_command(patchgen(2, manifest(), out), &log), 0) << log;
  EXPECT_NE(log.find("already complete"), std::string::npos) << log;
}

// A shard write that fails as on a full disk (one rank, where the job ends without MPI_Abort's
// help from other ranks): exit code 1 with the shard named, nothing taken for complete, and a
// rerun completes the run with the same outputs as an uninterrupted one.
TEST(PatchgenE2E, FullDiskFailsTheJobAndARerunCompletesIt) {
  TempDir tmp("pg_full");
  std::string log;
  ASSERT_EQ(run_command(patchgen(1, manifest(), tmp / "clean"), &log), 0) << log;
  const std::string out = tmp / "full";
  EXPECT_EQ(run_command(patchgen(1, manifest(), out, "--debug-file-size-limit 300000"), &log), 1)
      << log;
  EXPECT_NE(log.find("rank-00000.h5"), std::string::npos) << log;
  EXPECT_NE(log.find("File too large"), std::string::npos) << log;
  EXPECT_EQ(log.find("Segmentation fault"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out + "/patchgen/markers/rank-00000.json"));
  EXPECT_FALSE(fs::exists(out + "/patchgen/index.h5"));
  EXPECT_FALSE(fs::exists(out + "/patchgen/_SUCCESS"));
  ASSERT_EQ(run_command(patchgen(1, manifest(), out), &log), 0) << log;
  auto clean = patchgen::digest_run(tmp / "clean/patchgen");
  auto rerun = patchgen::digest_run(out + "/patchgen");
  EXPECT_EQ(rerun.index_sha256, clean.index_sha256);
  EXPECT_EQ(rerun.pixels_sha256, clean.pixels_sha256);
}

TEST(PatchgenE2E, ChangedConfigOrWorldSizeRefusedUnlessOverwrite) {
  TempDir tmp("pg_refuse");
  const std::string out = tmp / "run";
  std::string log;
  ASSERT_EQ(run_command(patchgen(1, manifest(), out), &log), 0) << log;
  EXPECT_EQ(run_command(patchgen(1, manifest(), out, "--min-tissue 0.9"), &log), 2) << log;
  EXPECT_NE(log.find("this run differs in --min-tissue 0.9 (was 0.25)"), std::string::npos) << log;
  EXPECT_EQ(run_command(patchgen(2, manifest(), out), &log), 2) << log;
  EXPECT_NE(log.find("is complete already, made with 1 ranks"), std::string::npos) << log;
  ASSERT_EQ(run_command(patchgen(2, manifest(), out, "--min-tissue 0.9 --overwrite"), &log), 0) << log;
  EXPECT_TRUE(fs::exists(out + "/patchgen/_SUCCESS"));
}

// kill -9 of mpirun and rank 0 leaves rank 1 running: a rerun meanwhile is refused (exit 2)
// naming the orphans, the orphan writes neither its shard nor its marker, and once it is gone a
// rerun completes with the outputs of an uninterrupted run.
TEST(PatchgenE2E, OrphanedRanksCannotWriteAndARerunWaitsForThem) {
  TempDir tmp("pg_orphan");
  std::string log;
  ASSERT_EQ(run_command(patchgen(2, manifest(), tmp / "clean"), &log), 0) << log;
  const std::string out = tmp / "run";
  const std::string job_log = tmp / "job.log";
  const std::string pid_file = tmp / "mpirun.pid";
  // Each rank runs in its own session (setsid), so that stopping it below does not make the kernel
  // hang up on it when mpirun, its session's link, dies.
  std::string paused = patchgen(2, manifest(), out, "--debug-pause-before-marker 6");
  paused.insert(paused.find(kPatchgen), "setsid --wait ");
  ASSERT_EQ(std::system(("(" + paused +
                         " > " + job_log + " 2>&1 & echo $! > " + pid_file + ")")
                            .c_str()),
            0);
  // Wait until both ranks pause after their work, then kill mpirun and rank 0.
  std::string rank0_pid, rank1_pid;
  for (int i = 0; i < 600 && (rank0_pid.empty() || rank1_pid.empty()); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    std::ifstream in(job_log);
    std::string line, text;
    int pausing = 0;
    std::string pid0, pid1;
    while (std::getline(in, line)) {
      const auto at = line.find("pausing");
      if (at == std::string::npos) continue;
      ++pausing;
      for (auto [tag, pid] : {std::pair{"rank 0 (pid ", &pid0}, std::pair{"rank 1 (pid ", &pid1}}) {
        const auto p = line.find(tag);
        if (p != std::string::npos) *pid = line.substr(p + 12, line.find(')', p) - p - 12);
      }
    }
    if (pausing == 2) std::tie(rank0_pid, rank1_pid) = std::pair{pid0, pid1};
  }
  ASSERT_FALSE(rank0_pid.empty() || rank1_pid.empty()) << "the ranks did not reach the pause";
  std::string mpirun_pid;
  std::ifstream(pid_file) >> mpirun_pid;
  // Open MPI ends a rank about a second after it loses mpirun (a cluster's remote ranks can
  // outlive it for good); rank 1 is stopped first so that it outlives its job for as long as the
  // rerun needs to start, however loaded the machine.
  ASSERT_EQ(std::system(("kill -STOP " + rank1_pid).c_str()), 0);
  ASSERT_EQ(std::system(("kill -9 " + mpirun_pid + " " + rank0_pid).c_str()), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(run_command(patchgen(2, manifest(), out), &log), 2) << log;
  EXPECT_NE(log.find("ranks of an earlier job"), std::string::npos) << log;
  // The orphan resumes, finds its job gone (or is ended by Open MPI), and stops without writing.
  ASSERT_EQ(std::system(("kill -CONT " + rank1_pid).c_str()), 0);
  const auto running = [](const std::string& pid) {  // a zombie nobody reaps has stopped too
    std::ifstream stat("/proc/" + pid + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const auto paren = text.rfind(')');
    return paren != std::string::npos && paren + 2 < text.size() && text[paren + 2] != 'Z';
  };
  for (int i = 0; i < 1200 && running(rank1_pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_FALSE(running(rank1_pid)) << "the orphaned rank 1 did not stop";
  EXPECT_FALSE(fs::exists(out + "/patchgen/markers/rank-00001.json"));
  EXPECT_FALSE(fs::exists(out + "/patchgen/shards/rank-00001.h5"));
  ASSERT_EQ(run_command(patchgen(2, manifest(), out), &log), 0) << log;
  auto clean = patchgen::digest_run(tmp / "clean/patchgen");
  auto rerun = patchgen::digest_run(out + "/patchgen");
  EXPECT_EQ(rerun.index_sha256, clean.index_sha256);
  EXPECT_EQ(rerun.pixels_sha256, clean.pixels_sha256);
}

TEST(PatchgenE2E, ConcurrentRunFailsFastOnTheLock) {
  TempDir tmp("pg_lock");
  const std::string out = tmp / "run";
  fs::create_directories(out + "/patchgen");
  auto lock = FileLock::try_acquire(out + "/patchgen/.lock");
  ASSERT_TRUE(lock.has_value());
  std::string log;
  EXPECT_EQ(run_command(patchgen(1, manifest(), out), &log), 2) << log;
  EXPECT_NE(log.find("locked"), std::string::npos) << log;
}

TEST(PatchgenE2E, InvalidManifestListsEveryProblemAndWritesNothing) {
  TempDir tmp("pg_manifest");
  write_text(tmp / "m.csv",
             "slide_id,path\nA," + (OneRun::dir() / "s0.tif").string() +
                 "\nA,x.tif\nbad id,y.tif\n");
  std::string log;
  EXPECT_EQ(run_command(patchgen(2, tmp / "m.csv", tmp / "run"), &log), 2) << log;
  EXPECT_NE(log.find("duplicate slide_id 'A'"), std::string::npos) << log;
  EXPECT_NE(log.find("'bad id' is not a safe file name"), std::string::npos) << log;
  EXPECT_NE(log.find("x.tif' does not exist"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(tmp / "run"));
  EXPECT_EQ(run_command(mpirun(1) + kPatchgen + " --manifest " + manifest() + " --out " +
                        (tmp / "run") + " --patch-sise 3", &log), 2) << log;
  EXPECT_NE(log.find("patch-sise"), std::string::npos) << log;
  EXPECT_EQ(run_command(mpirun(1) + kPatchgen + " --help", &log), 0) << log;
  EXPECT_NE(log.find("--min-tissue arg (=0.25)"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(tmp / "run"));
}

TEST(PatchgenE2E, BadSlidesAreRecordedWithReasonsAndExitCodeThree) {
  TempDir tmp("pg_bad");
  // Corrupt TIFF (garbage), truncated TIFF, zero tissue, missing mpp, and the real fixtures.
  write_text(tmp / "corrupt.tif", "II*\0garbage that is not a TIFF directory");
  {
    const std::string full = tmp / "full.tif";
    synth::SlideSpec spec;
    spec.path = full;
    spec.width = 2000;
    spec.height = 1500;
    spec.seed = 7;
    synth::write_slide(spec);
    std::string bytes = read_file(full);
    write_text(tmp / "truncated.tif", bytes.substr(0, bytes.size() / 2));
    spec.path = tmp / "blank.tif";
    spec.tissue_fraction = 0;
    synth::write_slide(spec);
    spec.path = tmp / "nompp.tif";
    spec.tissue_fraction = 0.35;
    spec.write_resolution = false;
    synth::write_slide(spec);
  }
  for (const char* f : {"unreadable.svs", "unopenable.tiff", "boxes_0.dcm", "small.svs", "boxes.tiff"}) {
    fs::copy_file(kFixtures + f, tmp / f);
  }
  write_text(tmp / "m.csv",
             "slide_id,path\ngood,full.tif\ncorrupt,corrupt.tif\ntruncated,truncated.tif\n"
             "blank,blank.tif\nnompp,nompp.tif\nunreadable,unreadable.svs\n"
             "unopenable,unopenable.tiff\ndicom,boxes_0.dcm\nsmall,small.svs\nboxes,boxes.tiff\n");
  std::string log;
  ASSERT_EQ(run_command(patchgen(2, tmp / "m.csv", tmp / "run"), &log), 3) << log;
  auto summary = read_json_file(tmp / "run/patchgen/_SUCCESS");
  ASSERT_TRUE(summary.has_value());
  EXPECT_EQ((*summary)["slides_ok"], 1);
  EXPECT_EQ((*summary)["exit_code"], 3);
  h5::File index = h5::File::open(tmp / "run/patchgen/index.h5", h5::Mode::kRead);
  h5::Group slides = index.open_group("slides");
  auto status = slides.open_dataset("status").read_strings();
  auto reason = slides.open_dataset("reason").read_strings();
  auto counts = slides.open_dataset("patch_count").read_all<int64_t>();
  EXPECT_EQ(status[0], "ok");
  EXPECT_GT(counts[0], 0);
  auto expect_failed = [&](int i, const std::string& why) {
    EXPECT_EQ(status[i], "failed") << i;
    EXPECT_EQ(counts[i], 0) << i;
    EXPECT_NE(reason[i].find(why), std::string::npos) << i << ": " << reason[i];
  };
  expect_failed(1, "cannot open slide");
  expect_failed(2, "truncated.tif");
  expect_failed(3, "no tissue detected");
  expect_failed(4, "has no resolution");
  expect_failed(5, "unreadable.svs");
  expect_failed(6, "cannot open slide");
  expect_failed(7, "no tissue");  // boxes_0.dcm (DICOM, read directly): 16 x 16 px like small.svs
  expect_failed(8, "no tissue");  // 16 x 16 px: too small for any patch
  expect_failed(9, "refusing to upsample");  // 300 x 250 px boxes tagged 72 dpi (352 um/px)
  auto ids = index.open_dataset("slide").read_all<int32_t>();
  EXPECT_TRUE(std::all_of(ids.begin(), ids.end(), [](int32_t s) { return s == 0; }));

  // --fail-fast stops with exit code 3 and leaves no _SUCCESS.
  EXPECT_EQ(run_command(patchgen(2, tmp / "m.csv", tmp / "ff", "--fail-fast"), &log), 3) << log;
  EXPECT_FALSE(fs::exists(tmp / "ff/patchgen/_SUCCESS"));
}

// QuPath's GeoJSON and the cohort overview beside the QC PNGs; --mag 20 is --mpp 0.5 exactly.
TEST(PatchgenE2E, QcGeoJsonAndOverviewAndMagEqualsMpp) {
  TempDir tmp("pg_qc");
  std::string log;
  ASSERT_EQ(run_command(patchgen(2, manifest(), tmp / "mpp", "--mpp 0.5"), &log), 0) << log;
  ASSERT_EQ(run_command(patchgen(2, manifest(), tmp / "mag", "--mag 20"), &log), 0) << log;
  const auto mpp = patchgen::digest_run(tmp / "mpp/patchgen");
  const auto mag = patchgen::digest_run(tmp / "mag/patchgen");
  EXPECT_EQ(mag.index_sha256, mpp.index_sha256);
  EXPECT_EQ(mag.pixels_sha256, mpp.pixels_sha256);
  EXPECT_EQ(read_file(tmp / "mag/patchgen/config.ini").find("mag = 0\n") != std::string::npos, true);
  EXPECT_EQ((*read_json_file(tmp / "mag/patchgen/run.json"))["config_fingerprint"],
            (*read_json_file(tmp / "mpp/patchgen/run.json"))["config_fingerprint"]);

  const std::string qc = tmp / "mag/patchgen/qc/";
  h5::File index = h5::File::open(tmp / "mag/patchgen/index.h5", h5::Mode::kRead);
  const auto counts = index.open_group("slides").open_dataset("patch_count").read_all<int64_t>();
  const char* ids[] = {"A", "B", "C"};
  for (int i = 0; i < 3; ++i) {
    const auto fc = nlohmann::json::parse(read_file(qc + ids[i] + ".geojson"));
    ASSERT_EQ(fc["type"], "FeatureCollection") << ids[i];
    int64_t tissue = 0, patches = 0;
    for (const auto& f : fc["features"]) {
      const std::string name = f["properties"]["classification"]["name"];
      (name == "Tissue" ? tissue : patches) += 1;
    }
    EXPECT_GE(tissue, 1) << ids[i];
    EXPECT_EQ(patches, counts[i]) << ids[i];
    EXPECT_EQ(read_file(qc + ids[i] + ".geojson"),
              read_file(tmp / "mpp/patchgen/qc/" + ids[i] + ".geojson"));
  }
  // The QC image's size follows kQcLongSide (2048) and a legend band, not --seg-downsample.
  const Image8 a = read_png(qc + "A.png");
  EXPECT_EQ(a.width, 2048);
  EXPECT_GT(a.height, 1502);
  EXPECT_EQ(read_png(qc + "C.png").width, 2000);  // smaller slides are not enlarged
  const Image8 overview = read_png(qc + "_overview.png");
  EXPECT_EQ(overview.width, 512);  // 2 x 2 cells of 256 px
  EXPECT_EQ(overview.height, 512);
  EXPECT_EQ(read_file(qc + "_overview.png"), read_file(tmp / "mpp/patchgen/qc/_overview.png"));
}

TEST(PatchgenE2E, SlidesDirectoryModeWritesTheManifest) {
  TempDir tmp("pg_dir");
  fs::create_directories(tmp / "wsi");
  fs::copy_file(OneRun::dir() / "s0.tif", tmp / "wsi/x.tif");
  fs::copy_file(OneRun::dir() / "s2.tif", tmp / "wsi/Y.TIF");
  write_text(tmp / "wsi/notes.txt", "not a slide");
  const std::string command = mpirun(2) + kPatchgen + " --slides " + tmp / "wsi" +
                              " --ext .tif --out " + tmp / "run" + kSmallGrid;
  std::string log;
  ASSERT_EQ(run_command(command, &log), 0) << log;
  const std::string wsi = fs::path(tmp / "wsi").lexically_normal().string();
  EXPECT_EQ(read_file(tmp / "run/patchgen/manifest.csv"),
            "slide_id,path\nY," + wsi + "/Y.TIF\nx," + wsi + "/x.tif\n");
  h5::File index = h5::File::open(tmp / "run/patchgen/index.h5", h5::Mode::kRead);
  h5::Group slides = index.open_group("slides");
  EXPECT_EQ(slides.open_dataset("slide_id").read_strings(), (std::vector<std::string>{"Y", "x"}));
  EXPECT_EQ(slides.open_dataset("status").read_strings(), (std::vector<std::string>{"ok", "ok"}));
  EXPECT_TRUE(fs::exists(tmp / "run/patchgen/qc/x.geojson"));
  // The same command again finds the run complete; an empty directory is bad input.
  EXPECT_EQ(run_command(command, &log), 0) << log;
  fs::create_directories(tmp / "empty");
  EXPECT_EQ(run_command(mpirun(1) + kPatchgen + " --slides " + tmp / "empty" + " --out " +
                            tmp / "run2", &log), 2) << log;
  EXPECT_NE(log.find("holds no file ending in .svs"), std::string::npos) << log;
}

TEST(PatchgenE2E, ManifestMppColumnOverridesSlideMetadata) {
  TempDir tmp("pg_mppcol");
  synth::SlideSpec spec;
  spec.path = tmp / "nompp.tif";
  spec.width = 2000;
  spec.height = 1500;
  spec.seed = 7;
  spec.write_resolution = false;
  synth::write_slide(spec);
  fs::copy_file(OneRun::dir() / "s1.tif", tmp / "quarter.tif");  // tagged 0.25 um/px
  write_text(tmp / "m.csv", "slide_id,path,mpp\nset,nompp.tif,0.5\nunset,nompp.tif,\n"
                            "tagged,quarter.tif,\nforced,quarter.tif,0.5\n");
  std::string log;
  ASSERT_EQ(run_command(patchgen(2, tmp / "m.csv", tmp / "run"), &log), 3) << log;
  h5::File index = h5::File::open(tmp / "run/patchgen/index.h5", h5::Mode::kRead);
  h5::Group slides = index.open_group("slides");
  const auto status = slides.open_dataset("status").read_strings();
  const auto source = slides.open_dataset("mpp_source").read_strings();
  const auto mpp_x = slides.open_dataset("mpp_x").read_all<double>();
  const auto level = slides.open_dataset("level").read_all<int32_t>();
  EXPECT_EQ(status, (std::vector<std::string>{"ok", "failed", "ok", "ok"}));
  EXPECT_EQ(source[0], "manifest");
  EXPECT_DOUBLE_EQ(mpp_x[0], 0.5);
  EXPECT_NE(source[2], "manifest");
  EXPECT_EQ(level[2], 1);  // 0.25 um/px: read at level 1
  EXPECT_EQ(source[3], "manifest");
  EXPECT_EQ(level[3], 0);  // declared 0.5 um/px: level 0
  EXPECT_FALSE(slides.open_group("metadata").exists("mpp"));
}

}  // namespace
}  // namespace tessera::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tessera::e2e::OneRun);
  tessera::h5::init();
  return RUN_ALL_TESTS();
}
