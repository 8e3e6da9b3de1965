// Recovery end to end (issue 21's hostile round): interrupted and damaged ingest outputs are
// finished by a rerun, every `next` command tessera-status prints is run as printed and
// succeeds, corrupt slide data fails the slide naming the tile, and slide ids are as long as the
// files the stages write allow.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <regex>

#include <nlohmann/json.hpp>

#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/slide/slide.h"
#include "common/slide/tile_reader.h"
#include "stages/patchgen/manifest.h"
#include "tests/e2e/cohort.h"
#include "tests/e2e/e2e_util.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {
namespace {

const std::string kPatchgen = TESSERA_PATCHGEN;
const std::string kEmbed = TESSERA_EMBED;
const std::string kIngest = TESSERA_INGEST;
const std::string kQuery = TESSERA_QUERY;
const std::string kStatus = TESSERA_STATUS_EXE;

// OneRun: the one run directory every test of this program reads, made once for all of them.
// Two slides in two cohort parts, patch-extracted and embedded once (one rank each).
class OneRun : public ::testing::Environment {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / fmt::format("tessera_recovery_e2e_{}", ::getpid());
  }
  static std::string run() { return (dir() / "run").string(); }
  void SetUp() override {
    fs::remove_all(dir());
    fs::create_directories(dir());
    const std::string manifest = write_cohort(dir(), {2, 1200, 100, 1000, 90},
                                              "slide_id,path,site\n"
                                              "a,s0.tif,lung\n"
                                              "b,s1.tif,colon\n");
    ASSERT_TRUE(patch_and_embed(kPatchgen, kEmbed, manifest, run(), 1, 2));
  }
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(dir());
  }
};

std::string ingest(int ranks, const std::string& extra) {
  return mpirun(ranks) + kIngest + " --run " + OneRun::run() + " --name idx --shards 2 --threads 1 " +
         extra;
}

std::string index_dir() { return OneRun::run() + "/ingest/idx"; }

nlohmann::json catalog() {
  return read_json_file(index_dir() + "/catalog.json").value_or(nlohmann::json());
}

// A catalog without its times.
nlohmann::json timeless(nlohmann::json c) {
  c.erase("created");
  c.erase("updated");
  for (auto& g : c["generations"]) g.erase("completed");
  return c;
}

// tessera-status --json of the run, with its exit code.
nlohmann::json status(int* code) {
  std::string out;
  *code = run_command("(" + kStatus + " " + OneRun::run() + " --json 2>/dev/null)", &out);
  return nlohmann::json::parse(out);
}

// A command as tessera-status prints it ("mpirun -np N /abs/build/stages/<stage>/<stage> ..."),
// runnable here: the program by its absolute path, this build's (tessera-status finds it beside
// itself), with this test's mpirun options.
std::string as_run_here(const std::string& next) {
  static const std::regex kCommand("mpirun -np ([0-9]+) (/[^ ]+) (.*)");
  std::smatch m;
  if (!std::regex_match(next, m, kCommand)) {
    ADD_FAILURE() << "unexpected next command: " << next;
    return "false";
  }
  const std::string program = m[2];
  if (program != kPatchgen && program != kEmbed && program != kIngest) {
    ADD_FAILURE() << "the command names '" << program << "', not this build's stage: " << next;
  }
  return mpirun(std::stoi(m[1])) + program + " " + m[3].str();
}

// Runs every `next` command tessera-status prints, as printed; each must succeed, and the run is
// complete afterwards. Returns how many there were.
size_t run_every_next_command() {
  int code = 0;
  const nlohmann::json before = status(&code);
  EXPECT_EQ(code, 4) << before.dump(2);
  size_t n = 0;
  for (const auto& next : before.at("next")) {
    std::string log;
    EXPECT_EQ(run_command(as_run_here(next.get<std::string>()), &log), 0) << next << "\n" << log;
    ++n;
  }
  const nlohmann::json after = status(&code);
  EXPECT_EQ(code, 0) << after.dump(2);
  EXPECT_TRUE(after.at("next").empty()) << after.dump(2);
  return n;
}

// Files under `dir` named like a temporary (.tmp, .tmp.<token>, .tmp.<host>.<pid>).
std::vector<std::string> temporaries(const std::string& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp") != std::string::npos) {
      found.push_back(e.path().string());
    }
  }
  return found;
}

// Issue 21, cases 12, 13, 14 and 21: one index grown by an append that is killed, then
// damaged in the ways the hostile round found; each state is finished by what status suggests
// or by a plain rerun, to the same catalog.
TEST(RecoveryE2E, InterruptedAndDamagedIngestOutputsAreFinishedByReruns) {
  std::string log;
  ASSERT_EQ(run_command(ingest(2, "--embed-parts 0"), &log), 0) << log;
  const nlohmann::json first = catalog();
  ASSERT_EQ(first.at("generations").size(), 1u);

  // Case 14: the append is killed (slide b, part 1's only slide, goes to shard 1, rank 1's);
  // status's next command spells the default tag and name out, and must resume it (it failed
  // with "another configuration").
  EXPECT_NE(run_command(ingest(2, "--append --debug-kill-rank 1 --debug-kill-after 1"), &log), 0)
      << log;
  ASSERT_FALSE(fs::exists(index_dir() + "/gen-00001/_SUCCESS"));
  // The killed rank holds its shards in memory until the end (ingest's memory per shard), so
  // what a job killed later leaves staged is put there by hand: a dead job's temporary.
  fs::create_directories(index_dir() + "/gen-00001/shards/shard-00001");
  write_text(index_dir() + "/gen-00001/shards/shard-00001/index.faiss.tmp.deadbeefdeadbeef",
             std::string(4096, 'x'));
  EXPECT_FALSE(temporaries(index_dir() + "/gen-00001").empty());
  EXPECT_EQ(run_every_next_command(), 1u);
  const nlohmann::json grown = catalog();
  ASSERT_EQ(grown.at("generations").size(), 2u);
  EXPECT_EQ(grown.at("parts_in"), nlohmann::json({0, 1}));
  // Case 21: the resumed append removed what the killed one left staged.
  EXPECT_EQ(temporaries(index_dir()), std::vector<std::string>{});

  // Case 13: the catalog lists the generation but its _SUCCESS is missing (the order of older
  // builds: catalog first); an --append finishes it instead of reporting nothing to add.
  fs::remove(index_dir() + "/gen-00001/_SUCCESS");
  ASSERT_EQ(run_command(ingest(2, "--append"), &log), 0) << log;
  EXPECT_TRUE(fs::exists(index_dir() + "/gen-00001/_SUCCESS")) << log;
  EXPECT_EQ(timeless(catalog()), timeless(grown));
  // ... and killed between the generation's _SUCCESS and the catalog (this build's order): the
  // catalog does not list the generation yet.
  atomic_write_file(index_dir() + "/catalog.json", first.dump(2));
  ASSERT_EQ(run_command(ingest(2, "--append"), &log), 0) << log;
  EXPECT_EQ(timeless(catalog()), timeless(grown)) << log;

  // Case 12: a deleted catalog.json is not complete for status, and the first ingest's command
  // rebuilds it with every generation; so does --verify full.
  for (const std::string extra : {"", "--verify full"}) {
    fs::remove(index_dir() + "/catalog.json");
    int code = 0;
    const nlohmann::json s = status(&code);
    EXPECT_EQ(code, 4) << s.dump(2);
    ASSERT_EQ(run_command(ingest(2, "--embed-parts 0 " + extra), &log), 0) << log;
    EXPECT_EQ(timeless(catalog()), timeless(grown)) << extra << "\n" << log;
  }
  // ... and status's own next commands rebuild it as well.
  fs::remove(index_dir() + "/catalog.json");
  EXPECT_GE(run_every_next_command(), 1u);
  EXPECT_EQ(timeless(catalog()), timeless(grown));

  // The rebuilt index answers from both generations: a patch is its own nearest neighbour.
  for (const std::string slide : {"a", "b"}) {
    ASSERT_EQ(run_command(kQuery + " --index " + index_dir() +
                              " --threads 1 --format json --log-level error --slide " + slide +
                              " --x 300 --y 300 -k 3",
                          &log),
              0)
        << log;
    const nlohmann::json hits =
        nlohmann::json::parse(log.substr(log.find('{'))).at("queries").at(0).at("hits");
    ASSERT_EQ(hits.size(), 3u) << log;
    EXPECT_EQ(hits[0].at("slide_id"), slide) << log;
  }
}

// Issue 21, case 6: 64 bytes flipped inside one tile fail that slide, naming the tile, and the
// slide counts as failed in the marker and _SUCCESS (exit 3); the other slide is extracted.
TEST(RecoveryE2E, CorruptTileDataFailsTheSlideNamingTheTile) {
  const fs::path dir = OneRun::dir() / "corrupt";
  fs::create_directories(dir);
  for (int i = 0; i < 2; ++i) {
    synth::SlideSpec spec;
    spec.path = (dir / fmt::format("c{}.tif", i)).string();
    spec.width = 1000;
    spec.height = 800;
    spec.seed = 7 + i;
    spec.mpp = 0.5;
    spec.tissue_fraction = 0.9;
    synth::write_slide(spec);
  }
  const std::string victim = (dir / "c1.tif").string();
  std::vector<uint8_t> stream;
  {
    Slide s = Slide::open(victim, SlideReader::kDirect);
    stream = s.direct_reader()->jpeg_stream(0, 1, 1);
  }
  std::vector<char> bytes(fs::file_size(victim));
  std::FILE* f = std::fopen(victim.c_str(), "rb+");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(std::fread(bytes.data(), 1, bytes.size(), f), bytes.size());
  const size_t at = stream.size() / 2;
  const std::vector<char> needle(stream.begin() + at, stream.begin() + at + 64);
  const auto hit = std::search(bytes.begin(), bytes.end(), needle.begin(), needle.end());
  ASSERT_NE(hit, bytes.end());
  for (auto it = hit; it != hit + 64; ++it) {
    const auto b = static_cast<uint8_t>(*it);
    *it = static_cast<char>(b == 0x00 ? 0x01 : ~b);  // never 0xFF: no marker
  }
  std::fseek(f, hit - bytes.begin(), SEEK_SET);
  ASSERT_EQ(std::fwrite(&*hit, 1, 64, f), 64u);
  std::fclose(f);
  write_text((dir / "m.csv").string(), "slide_id,path\ngood,c0.tif\nbad,c1.tif\n");
  const std::string out = (dir / "run").string();
  std::string log;
  EXPECT_EQ(run_command(mpirun(1) + kPatchgen + " --manifest " + (dir / "m.csv").string() +
                            " --out " + out + " --patch-size 64 --reader direct",
                        &log),
            3)
      << log;
  const auto success = read_json_file(out + "/patchgen/_SUCCESS");
  ASSERT_TRUE(success) << log;
  EXPECT_EQ(success->at("slides_failed"), 1) << success->dump(2);
  const std::string failed = success->at("failed").dump();
  EXPECT_NE(failed.find("bad"), std::string::npos) << failed;
  EXPECT_NE(failed.find("tile (1, 1)"), std::string::npos) << failed;
  EXPECT_NE(failed.find("corrupt JPEG data"), std::string::npos) << failed;
}

// Issue 21, case 17: the longest id validation accepts goes through patchgen; a longer one is
// refused at validation (exit 2), before anything is written.
TEST(RecoveryE2E, SlideIdsAsLongAsValidationAllowsAreExtracted) {
  const fs::path dir = OneRun::dir() / "long";
  fs::create_directories(dir);
  synth::SlideSpec spec;
  spec.path = (dir / "s.tif").string();
  spec.width = 600;
  spec.height = 500;
  spec.mpp = 0.5;
  synth::write_slide(spec);
  const std::string longest(patchgen::kMaxSlideIdLength, 'L');
  write_text((dir / "ok.csv").string(), "slide_id,path\n" + longest + ",s.tif\n");
  write_text((dir / "long.csv").string(), "slide_id,path\n" + longest + "L,s.tif\n");
  std::string log;
  EXPECT_EQ(run_command(mpirun(1) + kPatchgen + " --manifest " + (dir / "long.csv").string() +
                            " --out " + (dir / "refused").string() + " --patch-size 64",
                        &log),
            2)
      << log;
  EXPECT_NE(log.find("is too long"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(dir / "refused" / "patchgen"));
  ASSERT_EQ(run_command(mpirun(1) + kPatchgen + " --manifest " + (dir / "ok.csv").string() +
                            " --out " + (dir / "run").string() + " --patch-size 64",
                        &log),
            0)
      << log;
  EXPECT_TRUE(fs::exists(dir / "run/patchgen/qc" / (longest + ".geojson")));
}

}  // namespace
}  // namespace tessera::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tessera::e2e::OneRun);
  tessera::h5::init();
  return RUN_ALL_TESTS();
}
