// verify_bench: what query's verification of a shard costs next to loading it. Builds one
// synthetic ingest shard (a Flat index.faiss of N x D float32 vectors under caller ids, and its
// meta.h5 of N rows), seals both as ingest does (XXH3-128 of every byte, XXH3 of the ends), then
// times per repetition, in this order:
//   cheap        check_output at kCheap (size, first and last 64 KiB) of both files
//   full         check_output at kFull (XXH3-128 of every byte) of both files
//   load         VectorIndex::read + read_vector_meta (FAISS's reader; meta.h5's per-chunk XXH3)
//   full_load    full then load: what `query` does by default (--verify full)
// and reports each as seconds and seconds per GB (1e9 bytes) of the two files. With --cache drop
// the files' pages are dropped (posix_fadvise) before every mode, so each mode reads from the
// device; with warm they stay cached (the files were just written).
//
//   verify_bench --vectors 1000000 --dim 256 --reps 5 --cache drop --dir /tmp/vb --out verify.json
#include <mpi.h>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "benchmarks/bench_report.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/mpi/mpi_main.h"
#include "common/stage/marker.h"
#include "common/store/vector_meta.h"
#include "common/vector/catalog.h"
#include "common/vector/vector_index.h"

using nlohmann::json;
using namespace tessera;
namespace fs = std::filesystem;

namespace {

struct Shard {
  std::string dir;
  OutputRecord index, meta;
  uint64_t bytes() const { return index.bytes + meta.bytes; }
};

Shard make_shard(const std::string& dir, int64_t n, int dim) {
  make_directories(dir);
  std::mt19937_64 rng(7);
  std::normal_distribution<float> normal;
  VectorIndex index = VectorIndex::create("Flat", dim, Metric::kInnerProduct);
  VectorMetaWriter meta((fs::path(dir) / kShardMetaFile).string(), 0, 224, 0.5);
  const int64_t chunk = 65536;
  std::vector<float> x;
  VectorRows rows;
  for (int64_t first = 0; first < n; first += chunk) {
    const int64_t m = std::min(chunk, n - first);
    x.resize(static_cast<size_t>(m) * dim);
    for (float& v : x) v = normal(rng);
    rows.clear();
    for (int64_t i = first; i < first + m; ++i) {
      rows.patch_id.push_back(i);
      rows.slide.push_back(0);
      rows.coords.push_back(224 * (i % 1000));
      rows.coords.push_back(224 * (i / 1000));
      rows.tissue.push_back(0.75f);
    }
    index.add(x.data(), rows.patch_id.data(), m);
    meta.append(rows, 0, rows.size());
  }
  index.write((fs::path(dir) / kShardIndexFile).string());
  VectorSlideTable slides;
  slides.slide_id = {"s0"};
  slides.patient_id = {"p0"};
  slides.path = {"/data/s0.svs"};
  slides.level = {0};
  slides.read_size = {224};
  slides.slide_mpp = {0.5};
  slides.downsample = {1};
  meta.close(slides);
  return {dir, seal_output(dir, kShardIndexFile), seal_output(dir, kShardMetaFile)};
}

void check(const Shard& s, VerifyLevel level) {
  for (const OutputRecord* r : {&s.index, &s.meta}) {
    const std::string why = check_output(s.dir, *r, level);
    if (!why.empty()) fail<IoError>("verify_bench: {}", why);
  }
}

int64_t load(const Shard& s) {
  const VectorIndex index = VectorIndex::read((fs::path(s.dir) / kShardIndexFile).string(), false);
  const VectorMeta meta = read_vector_meta((fs::path(s.dir) / kShardMetaFile).string());
  return index.size() + static_cast<int64_t>(meta.rows.size());
}

}  // namespace

int main(int argc, char** argv) {
  MpiSession session(&argc, &argv);
  int64_t vectors = 1000000;
  int dim = 256;
  int reps = 5;
  std::string cache = bench::kCacheDrop;
  std::string dir = (fs::temp_directory_path() / "tessera_verify_bench").string();
  std::string out = "verify_bench.json";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i];
    if (key == "--vectors") vectors = std::stoll(argv[i + 1]);
    if (key == "--dim") dim = std::stoi(argv[i + 1]);
    if (key == "--reps") reps = std::stoi(argv[i + 1]);
    if (key == "--cache") cache = argv[i + 1];
    if (key == "--dir") dir = argv[i + 1];
    if (key == "--out") out = argv[i + 1];
  }
  try {
    bench::check_cache_policy(cache);
    if (cache == bench::kCacheFresh) cache = bench::kCacheWarm;  // nothing is held open anyway
    fs::remove_all(dir);
    bench::Stopwatch build;
    const Shard shard = make_shard(dir, vectors, dim);
    const double build_s = build.seconds();
    const double gb = static_cast<double>(shard.bytes()) / 1e9;
    const std::vector<std::string> files = {(fs::path(dir) / kShardIndexFile).string(),
                                            (fs::path(dir) / kShardMetaFile).string()};
    const std::vector<std::string> modes = {"cheap", "full", "load", "full_load"};
    json repetitions = json::array();
    std::map<std::string, std::vector<double>> seconds;
    int64_t loaded = 0;
    for (int rep = 0; rep < reps; ++rep) {
      json entry = {{"index", rep}, {"modes", json::object()}};
      for (const std::string& mode : modes) {
        json dropped;
        if (cache == bench::kCacheDrop) dropped = bench::drop_page_cache(files);
        bench::RepetitionProbe probe;
        bench::Stopwatch watch;
        if (mode == "cheap") check(shard, VerifyLevel::kCheap);
        if (mode == "full" || mode == "full_load") check(shard, VerifyLevel::kFull);
        if (mode == "load" || mode == "full_load") loaded = load(shard);
        const double s = watch.seconds();
        seconds[mode].push_back(s);
        entry["modes"][mode] = {{"seconds", s}, {"s_per_gb", s / gb}, {"probe", probe.finish()}};
        if (!dropped.is_null()) entry["modes"][mode]["cache_drop"] = dropped;
      }
      repetitions.push_back(entry);
    }
    json summary = json::object();
    for (const std::string& mode : modes) {
      std::vector<double> per_gb;
      for (double s : seconds[mode]) per_gb.push_back(s / gb);
      summary[mode] = {{"seconds", bench::summarize(seconds[mode])},
                       {"s_per_gb", bench::summarize(per_gb)}};
    }
    json report = {{"benchmark", "verify_bench"},
                   {"parameters",
                    {{"vectors", vectors}, {"dim", dim}, {"reps", reps}, {"index", "Flat"}}},
                   {"machine", bench::machine_info()},
                   {"versions", bench::versions()},
                   {"command", bench::command_line(argc, argv)},
                   {"measured", bench::measured_field({"/modes", "s_per_gb", false})},
                   {"build_s", build_s},
                   {"files",
                    {{"index_bytes", shard.index.bytes}, {"meta_bytes", shard.meta.bytes},
                     {"gb", gb}}},
                   {"repetitions", repetitions},
                   {"summary", summary},
                   {"output",
                    {{"index_xxh3", shard.index.xxh3}, {"meta_xxh3", shard.meta.xxh3},
                     {"rows_loaded", loaded}}}};
    report.update(bench::cache_policy_field(cache));
    bench::write_report(out, report);
    json medians = json::object();
    for (const std::string& mode : modes) medians[mode] = summary[mode]["s_per_gb"]["median"];
    std::cout << "s per GB (median of " << reps << ", " << gb << " GB, cache " << cache
              << "): " << medians.dump() << "\n";
    fs::remove_all(dir);
  } catch (const Error& e) {
    std::cerr << "verify_bench: " << e.what() << "\n";
    return e.exit_code();
  }
  return 0;
}
