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
// Its parts: options.h, cohort.h (the synthetic cohort), run.h (the phases of a repetition);
// this file sets up, repeats and reports.
//
//   mpirun -np R scale_bench [--slides 4185] [--patches-total N] [--dim 1536] [--reps 3]
//                            [--warmup 0] [--scratch DIR] [--out FILE] [--keep]
#include <algorithm>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "benchmarks/bench_report.h"
#include "benchmarks/scale/cohort.h"
#include "benchmarks/scale/options.h"
#include "benchmarks/scale/run.h"
#include "benchmarks/synthetic_run.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/mpi/mpi_main.h"
#include "stages/embed/work.h"

namespace tessera::scale {
namespace {

namespace fs = std::filesystem;
using bench::Stopwatch;
using bench::synthetic_manifest;
using nlohmann::json;

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
