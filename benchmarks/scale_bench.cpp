// scale_bench: drives the cohort-scale coordination paths of patchgen and embed with synthetic
// plans and synthetic embeddings (no slides, no model), shaped like the paper's cohort (4,185
// slides, 170M patches; a smaller total keeps the per-slide count distribution, scaled down).
// Every phase calls the stages' own library code; only pixels and inference are left out:
//   plan_write        each rank writes the plans of slides k = rank mod R (write_plan)
//   plan_exchange     per-slide counts and failed flags, one allreduce (as PatchgenWork::setup)
//   extract           each rank walks its items (Partition::runs, PatchOrder::locate, read_plan
//                     per touched slide) into a real ShardWriter shard of tiny raw patches
//   seal              seal_output and the rank marker, as the stage skeleton writes them
//   consolidate       rank 0: check_marker for every rank, consolidate(), _SUCCESS
//   index_read        each rank reads its index rows batch by batch (IndexReader::read_rows)
//   embed_shard_write each rank appends synthetic embeddings of its rows (EmbeddingShardWriter)
//   embeddings_file   rank 0: write_embeddings_file (virtual datasets over the rank shards)
//   embeddings_open   each rank opens embeddings.h5's virtual datasets (HDF5 decodes the mappings)
//   slide_features    each rank: write_slide_features for its share of the slides
// Each phase runs between barriers with the peak-RSS mark reset; the report holds wall seconds,
// each rank's seconds and peak RSS, every repetition and median/min/max (docs/performance.md).
//
//   mpirun -np R scale_bench [--slides 4185] [--patches-total N] [--dim 1536] [--reps 3]
//                            [--warmup 0] [--scratch DIR] [--out FILE] [--keep]
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "benchmarks/bench_report.h"
#include "benchmarks/synthetic_run.h"
#include "common/store/files.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/mpi/mpi_main.h"
#include "common/stage/marker.h"
#include "common/stage/partition.h"
#include "common/stage/skeleton.h"
#include "common/store/embeddings.h"
#include "common/store/index.h"
#include "common/store/store.h"
#include "stages/embed/config.h"
#include "stages/embed/merge.h"
#include "stages/embed/work.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/consolidate.h"
#include "stages/patchgen/digest.h"
#include "stages/patchgen/extract.h"
#include "stages/patchgen/manifest.h"
#include "stages/patchgen/plan.h"

namespace tessera::scale {
namespace {

namespace fs = std::filesystem;
using bench::Stopwatch;
using bench::splitmix64;
using bench::synthetic_manifest;
using bench::synthetic_plan;
using bench::synthetic_uniform;
using nlohmann::json;

// The paper's cohort.
constexpr int64_t kCohortSlides = 4185;
constexpr int64_t kCohortPatches = 170'000'000;
constexpr double kPi = 3.14159265358979323846;
// Bytes per patch a rank holds while it walks one slide: read_plan's coords (16) and tissue (4)
// vectors and the GridPatch list (24, padded).
constexpr int64_t kPlanBytesPerPatch = 16 + 4 + sizeof(patchgen::GridPatch);

constexpr const char* kUsage =
    "mpirun -np R scale_bench [--slides N] [--patches-total N] [--dim D] [--reps N] [--warmup N] "
    "[--scratch DIR] [--out FILE] [--keep]";

struct BenchOptions {
  int slides = 0;
  int64_t patches_total = 0;
  double count_sigma = 0;
  uint64_t seed = 0;
  int dim = 0;
  std::string store_dtype;
  int batch_size = 0;
  int patch_size = 0;
  Partition::Spec partition;
  Partition::Spec embed_partition;
  int reps = 0;
  int warmup = 0;
  std::string scratch;
  std::string out;
  bool keep = false;
};

po::options_description bench_options() {
  po::options_description desc("scale_bench options");
  desc.add_options()
      ("slides", po::value<int>()->default_value(static_cast<int>(kCohortSlides)),
       "number of synthetic slides (the paper's cohort: 4185)")
      ("patches-total", po::value<int64_t>()->default_value(100'000),
       "patches over all slides; the per-slide distribution is the full cohort's scaled by "
       "patches-total / 170M")
      ("count-sigma", po::value<double>()->default_value(0.8),
       "sigma of the lognormal per-slide patch count")
      ("seed", po::value<uint64_t>()->default_value(1), "seed of the synthetic cohort")
      ("dim", po::value<int>()->default_value(1536), "embedding dimension D")
      ("store-dtype", po::value<std::string>()->default_value("fp16"),
       "embedding storage type: fp16 or fp32")
      ("batch-size", po::value<int>()->default_value(32), "embed batch size (index rows per read)")
      ("patch-size", po::value<int>()->default_value(8),
       "pixels per side of the (blank, raw) patches written to the patchgen shards")
      ("partition", po::value<std::string>()->default_value("cyclic"),
       "partition of patches over ranks: cyclic, block-cyclic:B or contiguous")
      ("embed-partition", po::value<std::string>()->default_value("contiguous"),
       "embed's partition of index rows over ranks. Not embed's default (cyclic): with HDF5 "
       "1.10 a (block-)cyclic embeddings.h5 stores and decodes one mapping block per row, and "
       "opening it takes time quadratic in the rows (docs/performance.md)")
      ("reps", po::value<int>()->default_value(3), "timed repetitions")
      ("warmup", po::value<int>()->default_value(0), "untimed warm-up repetitions (reported apart)")
      ("scratch", po::value<std::string>()->default_value("bench-out/scale"),
       "scratch folder; runs go to SCRATCH/npR and are removed at the end unless --keep")
      ("out", po::value<std::string>()->default_value(""),
       "JSON report (default SCRATCH/scale_bench_<patches>_npR.json)")
      ("keep", po::bool_switch(), "keep the last repetition's run directory");
  return desc;
}

BenchOptions bench_options_from(const po::variables_map& v, int world_size) {
  BenchOptions o;
  o.slides = v["slides"].as<int>();
  o.patches_total = v["patches-total"].as<int64_t>();
  o.count_sigma = v["count-sigma"].as<double>();
  o.seed = v["seed"].as<uint64_t>();
  o.dim = v["dim"].as<int>();
  o.store_dtype = v["store-dtype"].as<std::string>();
  o.batch_size = v["batch-size"].as<int>();
  o.patch_size = v["patch-size"].as<int>();
  o.partition = Partition::Spec::parse(v["partition"].as<std::string>(), "--partition");
  o.embed_partition =
      Partition::Spec::parse(v["embed-partition"].as<std::string>(), "--embed-partition");
  o.reps = v["reps"].as<int>();
  o.warmup = v["warmup"].as<int>();
  o.scratch = fs::absolute(v["scratch"].as<std::string>()).lexically_normal().string();
  o.out = v["out"].as<std::string>();
  o.keep = v["keep"].as<bool>();
  if (o.out.empty()) {
    o.out = (fs::path(o.scratch) /
             fmt::format("scale_bench_{}_np{}.json", o.patches_total, world_size))
                .string();
  }
  if (o.slides < 1) fail<InvalidInput>("invalid --slides {}: must be >= 1", o.slides);
  if (o.patches_total < o.slides) {
    fail<InvalidInput>("invalid --patches-total {}: must be >= --slides ({})", o.patches_total,
                       o.slides);
  }
  if (!(o.count_sigma >= 0)) fail<InvalidInput>("invalid --count-sigma {}", o.count_sigma);
  if (o.dim < 1) fail<InvalidInput>("invalid --dim {}: must be >= 1", o.dim);
  if (o.store_dtype != "fp16" && o.store_dtype != "fp32") {
    fail<InvalidInput>("invalid --store-dtype '{}': expected fp16 or fp32", o.store_dtype);
  }
  if (o.batch_size < 1) fail<InvalidInput>("invalid --batch-size {}", o.batch_size);
  if (o.patch_size < 1) fail<InvalidInput>("invalid --patch-size {}", o.patch_size);
  if (o.reps < 1) fail<InvalidInput>("invalid --reps {}: must be >= 1", o.reps);
  if (o.warmup < 0) fail<InvalidInput>("invalid --warmup {}: must be >= 0", o.warmup);
  return o;
}

// The synthetic cohort: per-slide patch counts drawn from a lognormal (the same draws at every
// scale), normalised so the full-scale counts sum to ~170M and the benchmark's to patches_total.
struct Cohort {
  std::vector<int64_t> counts;       // per slide, at the benchmark's scale (>= 1)
  std::vector<int64_t> full_counts;  // per slide, at the paper's scale
  int64_t total = 0;
  int64_t full_total = 0;
};

Cohort make_cohort(const BenchOptions& o) {
  std::vector<double> w(static_cast<size_t>(o.slides));
  for (int k = 0; k < o.slides; ++k) {
    const double z = std::sqrt(-2 * std::log(synthetic_uniform(o.seed, k, 0))) *
                     std::cos(2 * kPi * synthetic_uniform(o.seed, k, 1));
    w[k] = std::exp(o.count_sigma * z);
  }
  const double sum = std::accumulate(w.begin(), w.end(), 0.0);
  const double full_patches =
      static_cast<double>(kCohortPatches) * o.slides / static_cast<double>(kCohortSlides);
  Cohort c;
  for (double x : w) {
    c.counts.push_back(std::max<int64_t>(1, std::llround(x / sum * o.patches_total)));
    c.full_counts.push_back(std::max<int64_t>(1, std::llround(x / sum * full_patches)));
    c.total += c.counts.back();
    c.full_total += c.full_counts.back();
  }
  return c;
}

json count_stats(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  const auto at = [&](double q) { return v[static_cast<size_t>(q * (v.size() - 1))]; };
  const double sum = std::accumulate(v.begin(), v.end(), 0.0);
  return {{"total", static_cast<int64_t>(sum)}, {"mean", sum / v.size()}, {"min", v.front()},
          {"p50", at(0.5)}, {"p99", at(0.99)}, {"max", v.back()}};
}

// Bytes the run directory will hold, per kind of file (estimate; HDF5 overheads not counted).
json disk_estimate(const BenchOptions& o, int64_t patches) {
  const int64_t value_bytes = o.store_dtype == "fp16" ? 2 : 4;
  const int64_t pixels = int64_t{3} * o.patch_size * o.patch_size;
  const json per_patch = {{"plans", 20},
                          {"patchgen_shards", pixels + 32},
                          {"index", 44},
                          {"embed_shards", o.dim * value_bytes + 28},
                          {"features", int64_t{4} * o.dim + 16}};
  int64_t total = 0;
  for (const auto& [k, v] : per_patch.items()) total += v.get<int64_t>() * patches;
  return {{"bytes_per_patch", per_patch}, {"bytes", total}};
}

// Count and bytes of `path` when it is a file, else of every regular file under it.
json count_files(const std::string& path) {
  int64_t files = 0;
  uint64_t bytes = 0;
  if (fs::is_regular_file(path)) {
    files = 1;
    bytes = fs::file_size(path);
  } else if (fs::exists(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path)) {
      if (e.is_regular_file()) {
        ++files;
        bytes += e.file_size();
      }
    }
  }
  return {{"files", files}, {"bytes", bytes}};
}

// VmRSS of /proc/self/status in MiB (the resident set now), null when unreadable.
json current_rss_mb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  return nullptr;
}

double number_or(const json& j, double fallback) { return j.is_number() ? j.get<double>() : fallback; }

// Collective. Runs `body` on every rank between barriers, with the peak-RSS mark reset before it.
// On rank 0 returns the phase's record: wall seconds (barrier to barrier), each rank's own
// seconds, RSS at the start and peak RSS, and the fields its `body` returned; {} elsewhere.
template <typename Body>
json timed_phase(Comm& comm, const std::string& name, Body&& body) {
  bench::reset_peak_rss();
  const json rss_start = current_rss_mb();
  comm.barrier();
  Stopwatch watch;
  json fields = body();
  const double own = watch.seconds();
  comm.barrier();
  const double wall = watch.seconds();
  const json peak = bench::peak_rss_mb_since_reset();
  const json mine = {{"s", own}, {"rss_start_mb", rss_start}, {"peak_rss_mb", peak},
                     {"fields", fields}};
  const std::vector<std::string> all = comm.allgather(mine.dump());
  if (comm.rank() != 0) return {};
  json seconds = json::array(), rss = json::array(), growth = json::array(),
       per_rank = json::array();
  double seconds_max = 0, rss_max = 0, growth_max = 0;
  for (const auto& s : all) {
    const json r = json::parse(s);
    const double p = number_or(r["peak_rss_mb"], -1);
    const double g = p - number_or(r["rss_start_mb"], 0);
    seconds.push_back(r["s"]);
    rss.push_back(p);
    growth.push_back(g);
    seconds_max = std::max(seconds_max, r["s"].get<double>());
    rss_max = std::max(rss_max, p);
    growth_max = std::max(growth_max, g);
    per_rank.push_back(r["fields"]);
  }
  spdlog::info("{}: {:.3f} s, peak RSS max {:.1f} MiB", name, wall, rss_max);
  spdlog::default_logger()->flush();
  return {{"wall_s", wall},
          {"rank_s_max", seconds_max},
          {"rank0_s", seconds[0]},
          {"peak_rss_mb_max", rss_max},
          {"rank0_peak_rss_mb", rss[0]},
          {"rss_growth_mb_max", growth_max},
          {"rank_s", seconds},
          {"peak_rss_mb", rss},
          {"rss_growth_mb", growth},
          {"per_rank", per_rank}};
}

// What every repetition shares.
struct Setup {
  BenchOptions o;
  Cohort cohort;
  patchgen::Manifest manifest;
  patchgen::Config patchgen;
  embed::Config embed;
  std::string fingerprint;
  json model_fingerprint;
};

// Collective. One repetition in a fresh run directory `run_dir`; the record is complete on rank 0.
json repetition(int index, const Setup& s, const std::string& run_dir, Comm& comm,
                json* shard_hashes) {
  const int rank = comm.rank(), ranks = comm.size();
  const std::string stage_dir = (fs::path(run_dir) / "patchgen").string();
  const std::string embed_dir = (fs::path(run_dir) / "embed" / "synthetic").string();
  if (rank == 0) {
    remove_tree(run_dir);
    make_directories((fs::path(stage_dir) / kPlansDir).string());
    make_directories((fs::path(stage_dir) / kShardsDir).string());
    make_directories((fs::path(stage_dir) / "markers").string());
    make_directories((fs::path(embed_dir) / kShardsDir).string());
  }
  comm.barrier();
  const json load = bench::load_average();
  const std::string start_time = utc_timestamp();
  json phases;
  const size_t n = s.manifest.slides.size();

  phases["plan_write"] = timed_phase(comm, "plan_write", [&] {
    int64_t slides = 0, patches = 0;
    for (size_t k = static_cast<size_t>(rank); k < n; k += static_cast<size_t>(ranks)) {
      const patchgen::SlideEntry& entry = s.manifest.slides[k];
      const patchgen::SlidePlan plan =
          synthetic_plan(s.o.seed, static_cast<int>(k), s.cohort.counts[k]);
      write_plan(patchgen::plan_path(stage_dir, entry.slide_id), plan, entry, s.fingerprint);
      ++slides;
      patches += plan.patch_count;
    }
    return json{{"slides", slides}, {"patches", patches}};
  });

  // As PatchgenWork::setup: each rank fills the counts of the slides it planned, then the one
  // exchange of the planning step.
  patchgen::PartPlan part;
  for (const auto& e : s.manifest.slides) part.slides.push_back(e.index);
  phases["plan_exchange"] = timed_phase(comm, "plan_exchange", [&] {
    part.counts.assign(n, 0);
    part.failed.assign(n, 0);
    for (size_t k = static_cast<size_t>(rank); k < n; k += static_cast<size_t>(ranks)) {
      part.counts[k] = s.cohort.counts[k];
    }
    Stopwatch reduce;
    patchgen::share_plan_counts(comm, part);
    return json{{"allreduce_s", reduce.seconds()}, {"values", 2 * n}};
  });
  if (part.counts != s.cohort.counts) fail<Error>("the plan exchange lost counts");

  json marker_fields;  // this rank's "rows" and "stats", for its marker
  phases["extract"] = timed_phase(comm, "extract", [&] {
    const patchgen::PatchOrder order = part.order();
    const Partition partition(s.patchgen.partition, order.total(), ranks);
    patchgen::ExtractStats stats;
    stats.planned = partition.count(rank);
    const std::string shard =
        (fs::path(stage_dir) / patchgen::shard_file(rank)).string();
    ShardWriter writer(shard, s.patchgen.layout, rank, ranks);
    const std::vector<uint8_t> blank(static_cast<size_t>(3) * s.o.patch_size * s.o.patch_size);
    std::optional<patchgen::SlidePlan> plan;
    int open_position = -1;
    int64_t plans_read = 0;
    double plan_read_s = 0;
    Stopwatch total;
    // Item by item, as extract_rank walks them (no list of the rank's items).
    for (int64_t k = 0; k < partition.count(rank); ++k) {
      const int64_t item = partition.global_index(rank, k);
      const auto [position, ordinal] = order.locate(item);
      const int slide = part.slides[position];
      if (open_position != position) {
        const std::string path =
            patchgen::plan_path(stage_dir, s.manifest.slides[slide].slide_id);
        Stopwatch read;
        plan = patchgen::read_plan(path, s.fingerprint, /*with_patches=*/true);
        plan_read_s += read.seconds();
        ++plans_read;
        if (!plan || plan->patch_count != part.counts[position]) {
          fail<IoError>("the plan '{}' is missing or differs from the exchange", path);
        }
        open_position = position;
      }
      const patchgen::GridPatch& g = plan->patches[ordinal];
      writer.add(patchgen::make_patch_id(slide, ordinal), slide, g.x, g.y, g.tissue,
                 blank.data());
      ++stats.patches;
    }
    plan.reset();
    writer.close();
    stats.write_s = writer.write_seconds();
    stats.total_s = total.seconds();
    marker_fields = {{"rows", stats.patches}, {"stats", stats.to_json()}};
    return json{{"rows", stats.patches}, {"plans_read", plans_read}, {"plan_read_s", plan_read_s},
                {"shard_write_s", stats.write_s}};
  });

  // As run_stage after rank_work: make the shard durable, hash it, write the marker.
  phases["seal"] = timed_phase(comm, "seal", [&] {
    Stopwatch seal;
    json marker = marker_base("patchgen", rank, ranks, s.fingerprint);
    marker["outputs"] = json::array({seal_output(stage_dir, patchgen::shard_file(rank)).to_json()});
    marker["seal_s"] = seal.seconds();
    marker["start_time"] = start_time;
    marker["end_time"] = utc_timestamp();
    marker.update(marker_fields);
    marker.update(json{{"part", 0}, {"parts", 1}});
    atomic_write_file(marker_path(stage_dir, rank), marker.dump(2) + "\n");
    return json{{"shard_bytes", marker["outputs"][0]["bytes"]}};
  });

  json summary;
  phases["consolidate"] = timed_phase(comm, "consolidate", [&] {
    if (rank != 0) return json::object();
    Stopwatch check;
    std::vector<json> markers;
    for (int r = 0; r < ranks; ++r) {
      MarkerCheck c = check_marker(marker_path(stage_dir, r), stage_dir, s.fingerprint, ranks,
                                   VerifyLevel::kCheap);
      if (!c.valid) fail<IoError>("rank {} output is not complete: {}", r, c.reason);
      markers.push_back(std::move(c.marker));
    }
    const double check_s = check.seconds();
    *shard_hashes = json::array();
    for (const auto& m : markers) shard_hashes->push_back(m["outputs"][0]["xxh3"]);
    Stopwatch merge;
    const json fields = patchgen::consolidate(s.manifest, part, s.patchgen, stage_dir,
                                              s.fingerprint, markers);
    const double consolidate_s = merge.seconds();
    summary = summary_base("patchgen", ranks, s.fingerprint, start_time);
    summary["exit_code"] = 0;
    summary.update(fields);
    atomic_write_file((fs::path(stage_dir) / "_SUCCESS").string(), summary.dump(2) + "\n");
    return json{{"check_markers_s", check_s}, {"consolidate_s", consolidate_s}};
  });

  // embed's view of the finished patchgen stage: O(slides) on every rank.
  std::optional<IndexInfo> info;
  std::optional<IndexReader> reader;
  std::optional<Partition> rows_partition;
  phases["index_read"] = timed_phase(comm, "index_read", [&] {
    Stopwatch open;
    info.emplace(load_index_info(stage_dir));
    reader.emplace(info->path);
    rows_partition.emplace(s.embed.partition, info->rows, ranks);
    const double open_s = open.seconds();
    const int64_t batches = embed::batch_count(*rows_partition, rank, s.o.batch_size);
    int64_t rows = 0, id_sum = 0;
    for (int64_t b = 0; b < batches; ++b) {
      const IndexRows r =
          reader->read_rows(embed::batch_rows(*rows_partition, rank, s.o.batch_size, b));
      rows += static_cast<int64_t>(r.size());
      for (int64_t id : r.patch_id) id_sum += id;
    }
    if (rows != rows_partition->count(rank)) fail<Error>("index_read: rows lost");
    return json{{"open_s", open_s}, {"rows", rows}, {"batches", batches},
                {"patch_id_sum", id_sum}};
  });

  phases["embed_shard_write"] = timed_phase(comm, "embed_shard_write", [&] {
    const std::string path =
        (fs::path(embed_dir) / embedding_shard_file(rank)).string();
    EmbeddingShardWriter writer(path, s.o.dim, s.embed.store_dtype == "fp16", rank,
                                s.model_fingerprint.dump());
    const int64_t batches = embed::batch_count(*rows_partition, rank, s.o.batch_size);
    std::vector<float> values;
    double read_s = 0, fill_s = 0, append_s = 0;
    for (int64_t b = 0; b < batches; ++b) {
      Stopwatch read;
      const IndexRows r =
          reader->read_rows(embed::batch_rows(*rows_partition, rank, s.o.batch_size, b));
      read_s += read.seconds();
      Stopwatch fill;
      values.resize(r.size() * static_cast<size_t>(s.o.dim));
      for (size_t i = 0; i < r.size(); ++i) {  // a pure function of (patch id, component)
        const auto base = static_cast<uint32_t>(splitmix64(static_cast<uint64_t>(r.patch_id[i])));
        float* row = values.data() + i * s.o.dim;
        for (int j = 0; j < s.o.dim; ++j) {
          row[j] = static_cast<float>((base + 40503u * static_cast<uint32_t>(j)) >> 16) / 65536.f -
                   0.5f;
        }
      }
      fill_s += fill.seconds();
      Stopwatch append;
      writer.append(r.patch_id.data(), r.slide.data(), r.coords.data(), values.data(), r.size());
      append_s += append.seconds();
    }
    Stopwatch close;
    writer.close();
    append_s += close.seconds();
    return json{{"rows", writer.rows()}, {"index_read_s", read_s}, {"values_s", fill_s},
                {"append_s", append_s}};
  });

  phases["embeddings_file"] = timed_phase(comm, "embeddings_file", [&] {
    if (rank != 0) return json::object();
    embed::write_embeddings_file(*info, *rows_partition, s.o.dim, s.embed, s.model_fingerprint,
                                 embed_dir, s.fingerprint);
    return json{{"bytes", file_size((fs::path(embed_dir) / kEmbeddingsFile).string()).value_or(0)}};
  });

  // What write_slide_features does first: open embeddings.h5 and its virtual datasets, whose
  // mappings HDF5 decodes on open.
  phases["embeddings_open"] = timed_phase(comm, "embeddings_open", [&] {
    const EmbeddingsReader merged(embeddings_path(embed_dir));
    return json{{"rows", merged.rows()}};
  });

  phases["slide_features"] = timed_phase(comm, "slide_features", [&] {
    const int64_t files =
        embed::write_slide_features(*info, *reader, rank, ranks, s.model_fingerprint,
                                    embed::SlideFilesSpec{{}, "synthetic", 0}, embed_dir);
    return json{{"files", files}};
  });
  reader.reset();

  double total = 0;
  for (const auto& [name, p] : phases.items()) total += p.is_object() ? number_or(p["wall_s"], 0) : 0;
  if (rank != 0) return {};
  const double rank0_finish = number_or(phases["consolidate"]["rank0_s"], 0) +
                              number_or(phases["embeddings_file"]["rank0_s"], 0);
  spdlog::info("repetition {}: {:.1f} s over all phases; rank 0 alone {:.2f} s (consolidate + "
               "embeddings file)",
               index, total, rank0_finish);
  return {{"index", index},
          {"load_average_at_start", load},
          {"phases", phases},
          {"total_s", total},
          {"rank0_finish_s", rank0_finish},
          {"patches", summary["patches"]},
          {"files",
           {{"plans", count_files((fs::path(stage_dir) / kPlansDir).string())},
            {"patchgen_shards", count_files((fs::path(stage_dir) / kShardsDir).string())},
            {"index", count_files((fs::path(stage_dir) / kIndexFile).string())},
            {"embed_shards", count_files((fs::path(embed_dir) / kShardsDir).string())},
            {"embeddings_file", count_files((fs::path(embed_dir) / kEmbeddingsFile).string())},
            {"features", count_files(slide_features_dir(embed_dir))}}}};
}

// Rank 0: hashes of the last repetition's outputs. index_sha256 and pixels_sha256 (contents) do
// not depend on the number of ranks; features_xxh3 and embeddings_file_sha256 hash file bytes,
// which do.
json output_hashes(const Setup& s, const std::string& run_dir) {
  const std::string stage_dir = (fs::path(run_dir) / "patchgen").string();
  const std::string embed_dir = (fs::path(run_dir) / "embed" / "synthetic").string();
  const patchgen::RunDigest digest = patchgen::digest_run(stage_dir);
  std::string features;
  for (const auto& e : s.manifest.slides) {
    features += xxh3_file(slide_features_path(embed_dir, e.slide_id));
  }
  return {{"patches", digest.patches},
          {"index_sha256", digest.index_sha256},
          {"pixels_sha256", digest.pixels_sha256},
          {"features_xxh3", xxh3_hex(features)},
          {"embeddings_file_sha256", sha256_file((fs::path(embed_dir) / kEmbeddingsFile).string())}};
}

int bench_main(const po::variables_map& values, Comm& comm, const json& command) {
  Setup s;
  s.o = bench_options_from(values, comm.size());
  const BenchOptions& o = s.o;
  const std::string run_dir = (fs::path(o.scratch) / ("np" + std::to_string(comm.size()))).string();
  s.cohort = make_cohort(o);
  s.manifest = synthetic_manifest(o.slides, o.scratch);
  s.patchgen.patch_size = o.patch_size;
  s.patchgen.layout.patch_size = o.patch_size;
  s.patchgen.layout.encoding = "raw";
  s.patchgen.partition = o.partition;
  s.embed.store_dtype = o.store_dtype;
  s.embed.batch_size = o.batch_size;
  s.embed.partition = o.embed_partition;
  s.model_fingerprint = {{"name", "synthetic"}, {"output_dim", o.dim}};
  s.fingerprint = sha256_hex(fmt::format("scale_bench seed={} slides={} patches={} sigma={}",
                                         o.seed, o.slides, o.patches_total, o.count_sigma));
  const json estimate = disk_estimate(o, s.cohort.total);

  std::string refusal;
  if (comm.rank() == 0) {
    make_directories(o.scratch);
    const auto available = fs::space(o.scratch).available;
    if (static_cast<double>(estimate["bytes"].get<int64_t>()) > 0.8 * available) {
      refusal = fmt::format("a repetition needs about {:.1f} GB under '{}', {:.1f} GB are free; "
                            "lower --patches-total or --dim",
                            estimate["bytes"].get<int64_t>() / 1e9, o.scratch, available / 1e9);
    }
  }
  refusal = comm.broadcast(refusal, 0);
  if (!refusal.empty()) fail<InvalidInput>("{}", refusal);
  if (comm.rank() == 0) {
    spdlog::info("{} slides, {} patches (scale {:.5f} of the cohort's {}), D = {} {}, {} ranks, "
                 "about {:.1f} GB per repetition under '{}'",
                 o.slides, s.cohort.total, s.cohort.total / static_cast<double>(kCohortPatches),
                 kCohortPatches, o.dim, o.store_dtype, comm.size(),
                 estimate["bytes"].get<int64_t>() / 1e9, run_dir);
  }

  const json load_start = bench::load_average();
  const json rss_start = current_rss_mb();
  json warmups = json::array(), reps = json::array(), hashes = json::array();
  for (int w = 0; w < o.warmup; ++w) {
    json shards;
    warmups.push_back(repetition(w, s, run_dir, comm, &shards));
  }
  for (int r = 0; r < o.reps; ++r) {
    json shards;
    reps.push_back(repetition(r, s, run_dir, comm, &shards));
    hashes.push_back(shards);
  }
  json usage = json::array();
  json mine = bench::resource_usage();
  mine["rss_at_start_mb"] = rss_start;
  for (const auto& u : comm.allgather(mine.dump())) usage.push_back(json::parse(u));
  if (comm.rank() != 0) return kExitOk;

  const json output = output_hashes(s, run_dir);
  if (!o.keep) remove_tree(run_dir);
  bool identical = true;
  for (const auto& h : hashes) identical &= h == hashes.front();
  double peak_rss = 0;
  for (const auto& u : usage) peak_rss = std::max(peak_rss, u["peak_rss_mb"].get<double>());
  const int64_t largest_full = *std::max_element(s.cohort.full_counts.begin(),
                                                 s.cohort.full_counts.end());
  json report = {
      {"benchmark", "scale"},
      {"date", utc_timestamp()},
      {"command_line", command},
      {"machine", bench::machine_info()},
      {"versions", bench::versions()},
      {"load_average", {{"start", load_start}, {"end", bench::load_average()}}},
      {"parameters",
       {{"ranks", comm.size()},
        {"reps", o.reps},
        {"warmup", o.warmup},
        {"slides", o.slides},
        {"patches_total_requested", o.patches_total},
        {"patches_total", s.cohort.total},
        {"cohort", {{"slides", kCohortSlides}, {"patches", kCohortPatches}}},
        {"scale_factor", s.cohort.total / static_cast<double>(kCohortPatches)},
        {"slide_scale_factor", o.slides / static_cast<double>(kCohortSlides)},
        {"count_distribution",
         {{"kind", "lognormal, normalised to the total"},
          {"sigma", o.count_sigma},
          {"seed", o.seed},
          {"scaled", count_stats(s.cohort.counts)},
          {"full_scale", count_stats(s.cohort.full_counts)}}},
        {"dim", o.dim},
        {"store_dtype", o.store_dtype},
        {"batch_size", o.batch_size},
        {"partition", o.partition.to_string()},
        {"embed_partition", o.embed_partition.to_string()},
        {"patchgen_shard",
         {{"writer", "ShardWriter (the stage's own), blank patches"},
          {"patch_size", o.patch_size},
          {"encoding", "raw"},
          {"chunk_patches", s.patchgen.layout.chunk_patches}}},
        {"disk_estimate", estimate},
        {"scratch", o.scratch}}},
      {"full_scale_per_rank_bounds",
       {{"largest_slide_patches", largest_full},
        {"largest_plan_in_memory_mb", largest_full * kPlanBytesPerPatch / 1048576.0},
        {"patch_order_mb", (o.slides + 1) * 8 / 1048576.0},
        {"note", "O(slides) state a rank holds while walking one slide's plan at 170M patches"}}},
      {"warmup", warmups},
      {"repetitions", reps},
      {"summary", bench::summarize_repetitions(reps)},
      {"output",
       {{"hashes_of_last_repetition", output},
        {"patchgen_shard_xxh3", hashes.back()},
        {"shards_identical_across_repetitions", identical}}},
      {"resources", {{"peak_rss_mb_max", peak_rss}, {"per_rank", usage}}}};
  bench::write_report(o.out, report);
  spdlog::info("report '{}'", o.out);
  return kExitOk;
}

}  // namespace
}  // namespace tessera::scale

int main(int argc, char** argv) {
  namespace sc = tessera::scale;
  const nlohmann::json command = tessera::bench::command_line(argc, argv);
  return tessera::mpi_main(argc, argv, sc::kUsage, sc::bench_options(),
                           [&](const tessera::po::variables_map& values, tessera::Comm& comm) {
                             return sc::bench_main(values, comm, command);
                           });
}
