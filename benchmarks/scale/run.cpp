#include "benchmarks/scale/run.h"

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
#include "common/stage/layout.h"
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

namespace fs = std::filesystem;
using bench::Stopwatch;
using bench::splitmix64;
using bench::synthetic_manifest;
using bench::synthetic_plan;
using bench::synthetic_uniform;
using nlohmann::json;

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
    make_directories(stage_file(stage_dir, kMarkerDir));
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
    atomic_write_file(stage_file(stage_dir, kSuccessFile), summary.dump(2) + "\n");
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

}  // namespace tessera::scale
