// Issue 21 (part A): the hostile round's wrong answers, crashes and unbounded memory in query and
// ingest, each reproduced on a small generated run and run as a user runs the executables. Each
// test names its case.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <nlohmann/json.hpp>

#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/slide/png_io.h"
#include "common/store/index.h"
#include "tests/e2e/cohort.h"
#include "tests/e2e/e2e_util.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::e2e {
namespace {

const std::string kPatchgen = TESSERA_PATCHGEN;
const std::string kEmbed = TESSERA_EMBED;
const std::string kIngest = TESSERA_INGEST;
const std::string kQuery = TESSERA_QUERY;

// Two slides of two patients, patch-extracted and embedded once for every test.
class Run : public ::testing::Environment {
 public:
  static fs::path dir() {
    return fs::temp_directory_path() / fmt::format("tessera_query_hostile_e2e_{}", ::getpid());
  }
  static std::string run() { return (dir() / "run").string(); }
  void SetUp() override {
    fs::remove_all(dir());
    fs::create_directories(dir());
    const std::string manifest = write_cohort(dir(), {2, 2000, 200, 1600, 90},
                                              "slide_id,path,patient_id,site\n"
                                              "a,s0.tif,P1,lung\n"
                                              "b,s1.tif,P2,colon\n");
    ASSERT_TRUE(patch_and_embed(kPatchgen, kEmbed, manifest, run(), 2, 1));
    std::string log;
    ASSERT_EQ(run_command(ingest("base", "--shards 2"), &log), 0) << log;
  }
  void TearDown() override {
    if (!::testing::UnitTest::GetInstance()->Failed()) fs::remove_all(dir());
  }
  static std::string ingest(const std::string& name, const std::string& extra) {
    return mpirun(1) + kIngest + " --run " + run() + " --tag vit-tiny --name " + name +
           " --threads 1 " + extra;
  }
};

std::string index_dir(const std::string& name) { return Run::run() + "/ingest/" + name; }

std::string query(const std::string& name, const std::string& extra) {
  return kQuery + " --index " + index_dir(name) + " --threads 1 " + extra;
}

int64_t some_patch() {
  const IndexInfo info = load_index_info(Run::run() + "/patchgen");
  return IndexReader(info.path).read_range(0, 1).patch_id.at(0);
}

nlohmann::json catalog_of(const std::string& name) {
  return read_json_file(index_dir(name) + "/catalog.json").value_or(nlohmann::json());
}

// Runs `command` in a shell that execs it, capturing its output; returns its exit status and
// sets `max_rss_kb` to its peak resident memory (wait4's rusage of the process).
int run_measured(const std::string& command, long* max_rss_kb, std::string* output) {
  const std::string log = (Run::dir() / fmt::format("measured_{}.log", std::rand())).string();
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::string line = "exec " + command + " > " + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  struct rusage usage {};
  ::wait4(pid, &status, 0, &usage);
  *max_rss_kb = usage.ru_maxrss;
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  *output = text.str();
  fs::remove(log);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A .npy file of `rows` x `cols` float32 values.
void write_npy(const std::string& path, int64_t rows, int cols) {
  std::string header =
      fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}, {}), }}", rows, cols);
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::string bytes("\x93NUMPY\x01\x00", 8);
  bytes += static_cast<char>(header.size() & 0xff);
  bytes += static_cast<char>(header.size() >> 8);
  bytes += header;
  std::vector<float> values(static_cast<size_t>(rows) * cols);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>((i * 7919) % 1000) / 1000;
  bytes.append(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float));
  std::ofstream(path, std::ios::binary) << bytes;
}

// Case 3: 8 bytes changed in the middle of index.faiss gave wrong hits with exit 0 under the
// default verification.
TEST(QueryHostile, Case3DamageInsideAShardIsRefusedByDefault) {
  std::string log;
  ASSERT_EQ(run_command(Run::ingest("damaged", "--shards 1"), &log), 0) << log;
  const std::string victim = index_dir("damaged") + "/gen-00000/shards/shard-00000/index.faiss";
  std::string bytes = read_file(victim);
  // The middle of the file lies beyond the ends that cheap verification hashes (64 KiB each).
  ASSERT_GT(bytes.size(), 2u * 65536 + 64);
  for (size_t i = 0; i < 8; ++i) bytes[bytes.size() / 2 + i] ^= 0x5a;
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes;
  const std::string q = fmt::format("--patch {} -k 5", some_patch());
  EXPECT_EQ(run_command(query("damaged", q), &log), 1) << log;
  EXPECT_NE(log.find("shard-00000/index.faiss"), std::string::npos) << log;
  EXPECT_EQ(run_command(query("damaged", q + " --verify full"), &log), 1) << log;
  EXPECT_EQ(run_command(query("damaged", q + " --verify cheap"), &log), 0) << log;  // documented
  // ingest --verify full repairs it.
  ASSERT_EQ(run_command(Run::ingest("damaged", "--shards 1 --verify full"), &log), 0) << log;
  EXPECT_EQ(run_command(query("damaged", q), &log), 0) << log;
}

// Case 5: `site > 3` on a string column matched every row by byte order.
TEST(QueryHostile, Case5NumberOrderingAStringColumnIsRefused) {
  std::string log;
  const std::string q = fmt::format("--patch {} -k 5 --filter \"site > 3\"", some_patch());
  EXPECT_EQ(run_command(query("base", q), &log), 2) << log;
  EXPECT_NE(log.find("column 'site' is string but 3 is a number"), std::string::npos) << log;
}

// Case 7: a point far outside the slide silently returned the nearest patch.
TEST(QueryHostile, Case7PointsOutsideTheSlideAreRefusedBeyondOnePatch) {
  std::string log;
  EXPECT_EQ(run_command(query("base", "--slide a --x 999999 --y -999999 -k 3"), &log), 2) << log;
  EXPECT_NE(log.find("outside slide 'a'"), std::string::npos) << log;
  EXPECT_EQ(run_command(query("base", "--slide a --x 2100 --y 600 -k 3"), &log), 2) << log;
  EXPECT_EQ(run_command(query("base", "--slide a --x 600 --y -65 -k 3"), &log), 2) << log;
  // Within one patch (64 px at level 0 here) of the edge (slide a is 2000 x 1600): the nearest
  // patch.
  EXPECT_EQ(run_command(query("base", "--slide a --x -60 --y 1650 -k 3"), &log), 0) << log;
  EXPECT_EQ(run_command(query("base", "--slide a --x 2000 --y 0 -k 3"), &log), 0) << log;
}

// Case 8: 20,000 parentheses crashed query (SIGSEGV), alone, under mpirun and from --config.
TEST(QueryHostile, Case8DeepFiltersAreRefusedNamingTheLimit) {
  const std::string deep = std::string(20000, '(') + "site = lung" + std::string(20000, ')');
  const std::string q = fmt::format("--patch {} -k 3", some_patch());
  std::string log;
  EXPECT_EQ(run_command(query("base", q + " --filter \"" + deep + "\""), &log), 2) << log;
  EXPECT_NE(log.find("deeper than 64 levels"), std::string::npos) << log.substr(0, 2000);
  EXPECT_EQ(run_command(mpirun(2) + query("base", q + " --filter \"" + deep + "\""), &log), 2)
      << log.substr(0, 2000);
  const std::string ini = (Run::dir() / "deep.ini").string();
  write_text(ini, "filter = " + deep + "\n");
  EXPECT_EQ(run_command(query("base", q + " --config " + ini), &log), 2) << log.substr(0, 2000);
  EXPECT_NE(log.find("deeper than 64 levels"), std::string::npos) << log.substr(0, 2000);
}

// Case 9 and case 22 (first bullet): a PNG header claiming 60000 x 60000 pixels, a truncated
// PNG and a missing file are bad input (exit 2), refused before any pixel is allocated.
TEST(QueryHostile, Case9And22BadImagesExit2WithoutAllocating) {
  const std::string ok = (Run::dir() / "ok.png").string();
  Image8 image{4, 4, 3, std::vector<uint8_t>(48, 200)};
  write_png(ok, image);
  std::string png = read_file(ok);
  // IHDR: width at byte 16, height at 20, CRC over bytes 12..28 at 29.
  auto put = [&](size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) png[at + i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
  };
  put(16, 60000);
  put(20, 60000);
  uint32_t crc = 0xffffffffu;
  for (size_t i = 12; i < 29; ++i) {
    crc ^= static_cast<unsigned char>(png[i]);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  put(29, crc ^ 0xffffffffu);
  const std::string bomb = (Run::dir() / "bomb.png").string();
  write_text(bomb, png);
  std::string log;
  long rss_kb = 0;
  EXPECT_EQ(run_measured(query("base", "--image " + bomb + " -k 3"), &rss_kb, &log), 2) << log;
  EXPECT_NE(log.find("60000x60000"), std::string::npos) << log;
  EXPECT_LT(rss_kb, 2L * 1024 * 1024) << "KiB";  // 10.7 GB before

  const std::string cut = (Run::dir() / "cut.png").string();
  write_text(cut, read_file(ok).substr(0, 40));
  EXPECT_EQ(run_command(query("base", "--image " + cut + " -k 3"), &log), 2) << log;
  EXPECT_NE(log.find("not a valid PNG"), std::string::npos) << log;
  EXPECT_EQ(run_command(query("base", "--image /nonexistent/p.png -k 3"), &log), 2) << log;
  EXPECT_NE(log.find("does not exist"), std::string::npos) << log;
}

// Case 10: query's memory grew with queries x k (850 bytes a hit); results are now written per
// batch, so 1000 queries cost what 10 do.
TEST(QueryHostile, Case10MemoryDoesNotGrowWithQueriesTimesK) {
  const nlohmann::json catalog = catalog_of("base");
  const int64_t rows = catalog.at("rows").get<int64_t>();
  const int dim = catalog.at("dim").get<int>();
  ASSERT_GE(rows, 200);
  const int k = static_cast<int>(std::min<int64_t>(rows, 400));
  const int64_t many = 400000 / k;  // 400,000 hits
  write_npy((Run::dir() / "few.npy").string(), 10, dim);
  write_npy((Run::dir() / "many.npy").string(), many, dim);
  const std::string out = (Run::dir() / "hits.csv").string();
  std::string log;
  long few_kb = 0, many_kb = 0;
  const std::string common = fmt::format(" -k {} --format csv --output {}", k, out);
  ASSERT_EQ(run_measured(query("base", "--vectors " + (Run::dir() / "few.npy").string() + common),
                         &few_kb, &log),
            0)
      << log;
  ASSERT_EQ(run_measured(query("base", "--vectors " + (Run::dir() / "many.npy").string() + common),
                         &many_kb, &log),
            0)
      << log;
  // Every hit is in the file: a header and one line per hit.
  const std::string csv = read_file(out);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + many * k);
  // 400,000 hits held at once took about 200 MB more; one batch is a few MB.
  EXPECT_LT(many_kb - few_kb, 64L * 1024) << "KiB: " << few_kb << " for 10 queries, " << many_kb
                                          << " for " << many;
}

// Case 11: ingest's memory grew with the shard count (0.63 MB a shard per rank), and
// --shards 65536 was accepted on any run.
TEST(QueryHostile, Case11IngestMemoryDoesNotGrowWithEmptyShards) {
  const int64_t rows = catalog_of("base").at("rows").get<int64_t>();
  std::string log;
  ASSERT_EQ(run_command(Run::ingest("one", "--shards 1"), &log), 0) << log;
  const int many = static_cast<int>(std::min<int64_t>(rows, 400));
  ASSERT_EQ(run_command(Run::ingest("many", fmt::format("--shards {}", many)), &log), 0) << log;
  auto rss = [](const std::string& name) {
    const auto marker = read_json_file(index_dir(name) + "/gen-00000/markers/rank-00000.json");
    return marker.value().at("stats").at("max_rss_bytes").get<int64_t>();
  };
  EXPECT_LT(rss("many") - rss("one"), int64_t{64} << 20)
      << rss("one") << " bytes for 1 shard, " << rss("many") << " for " << many;
  EXPECT_EQ(catalog_of("many").at("rows"), rows);
  const std::string q = fmt::format("--patch {} -k 5 --format json", some_patch());
  std::string one, all;
  ASSERT_EQ(run_command(query("one", q + " --log-level error"), &one), 0) << one;
  ASSERT_EQ(run_command(query("many", q + " --log-level error"), &all), 0) << all;
  auto ids = [](const std::string& text) {
    std::vector<int64_t> out;
    for (const auto& h : nlohmann::json::parse(text.substr(text.find('{')))["queries"][0]["hits"])
      out.push_back(h.at("patch_id").get<int64_t>());
    return out;
  };
  EXPECT_EQ(ids(all), ids(one));
  // More shards than vectors: refused with the reason, nothing written.
  EXPECT_EQ(run_command(Run::ingest("toomany", fmt::format("--shards {}", rows + 1)), &log), 2)
      << log;
  EXPECT_NE(log.find(fmt::format("more than the {} embedding(s)", rows)), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(index_dir("toomany") + "/catalog.json"));
}

// Case 19 and case 22 (third bullet): --output and --mosaic could overwrite the index's own
// files, and --mosaic made missing directories.
TEST(QueryHostile, Case19And22OutputsStayOutOfStageFoldersAndMakeNoDirectories) {
  const std::string q = fmt::format("--patch {} -k 3 ", some_patch());
  const std::string catalog = index_dir("base") + "/catalog.json";
  const std::string before = read_file(catalog);
  std::string log;
  for (const std::string& target :
       {catalog, index_dir("base") + "/gen-00000/shards/shard-00000/index.faiss",
        index_dir("base") + "/hits.csv", Run::run() + "/patchgen/hits.csv",
        Run::run() + "/embed/hits.csv", Run::run() + "/ingest/hits.csv"}) {
    EXPECT_EQ(run_command(query("base", q + "--output " + target), &log), 2) << target << log;
    EXPECT_NE(log.find("stage folder"), std::string::npos) << log;
    EXPECT_EQ(run_command(query("base", q + "--mosaic " + target), &log), 2) << target << log;
  }
  EXPECT_EQ(read_file(catalog), before);
  EXPECT_EQ(run_command(query("base", q + "--verify full"), &log), 0) << log;
  // Beside the stage folders, in the run directory itself, is fine.
  EXPECT_EQ(run_command(query("base", q + "--output " + Run::run() + "/hits.txt --mosaic " +
                                          Run::run() + "/hits.png"),
                        &log),
            0)
      << log;
  EXPECT_TRUE(fs::exists(Run::run() + "/hits.txt"));
  EXPECT_TRUE(fs::exists(Run::run() + "/hits.png"));

  // A pipe or a link under the name was replaced by a regular file (as root, --output /dev/full
  // replaced the device, exit 0): refused, and left as it was.
  const std::string fifo = (Run::dir() / "pipe").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string link = (Run::dir() / "link.csv").string();
  fs::create_symlink(Run::run() + "/hits.txt", link);
  for (const std::string& target : {fifo, link}) {
    EXPECT_EQ(run_command(query("base", q + "--output " + target), &log), 2) << target << log;
    EXPECT_EQ(run_command(query("base", q + "--mosaic " + target), &log), 2) << target << log;
  }
  EXPECT_TRUE(fs::is_fifo(fifo));
  EXPECT_TRUE(fs::is_symlink(link));

  const std::string missing = (Run::dir() / "nonexistent").string();
  EXPECT_EQ(run_command(query("base", q + "--mosaic " + missing + "/dir/m.png"), &log), 2) << log;
  EXPECT_NE(log.find("does not exist"), std::string::npos) << log;
  EXPECT_EQ(run_command(query("base", q + "--output " + missing + "/dir/r.txt"), &log), 2) << log;
  EXPECT_FALSE(fs::exists(missing));
}

// Case 20: HNSW indexes failed in FAISS's write_index after every vector was added.
TEST(QueryHostile, Case20HnswIndexesAreWrittenAndServed) {
  std::string log;
  ASSERT_EQ(run_command(Run::ingest("hnsw", "--shards 2 --index HNSW16"), &log), 0) << log;
  const nlohmann::json catalog = catalog_of("hnsw");
  EXPECT_EQ(catalog.at("index"), "HNSW16");
  const int64_t patch = some_patch();
  std::string out;
  ASSERT_EQ(run_command(query("hnsw", fmt::format("--patch {} -k 3 --format json --log-level "
                                                  "error",
                                                  patch)),
                        &out),
            0)
      << out;
  const auto j = nlohmann::json::parse(out.substr(out.find('{')));
  ASSERT_EQ(j["queries"][0]["hits"].size(), 3u);
  EXPECT_EQ(j["queries"][0]["hits"][0]["patch_id"], patch);  // a patch is its own top hit
}

}  // namespace
}  // namespace tessera::e2e

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new tessera::e2e::Run);
  tessera::h5::init();
  return RUN_ALL_TESTS();
}
