// patchgen_bench: measures, in one job on the same patches of one slide, interleaved (the order
// rotates every repetition):
//   patchgen            patchgen with --reader as given (default auto: direct on tiled JPEG TIFF)
//   patchgen_openslide  patchgen with --reader openslide
//   reference           a loop that only calls openslide_read_region (Slide::read_argb, no
//                       conversion, no store) over each rank's share of the patches
//   decode_limit        TurboJPEG decoding, from memory, of the tiles each rank's patches touch
//                       (tjbench-style: the ceiling of any reader that decodes each tile once)
//   patchgen_dicom      with --dicom VARIANT: patchgen (same options) on the slide's DICOM twin
//                       (synthslide's writer, generated beside the slide when missing), whose
//                       pixels equal the TIFF's: DICOM direct against TIFF direct
// Writes one JSON report; see docs/performance.md for the method and the numbers. Its parts:
// options.h (the options), run.h (the slide and the repetitions); this file sets up and reports.
//
//   mpirun -np R patchgen_bench --work DIR [--slide FILE] [--reps 3] [--warmup 1] [--out FILE]
//                               [--compare BEFORE.json]
//                               [patchgen options: --reader, --patch-size, --encoding, ...]
#include <openslide/openslide.h>

#include <algorithm>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "benchmarks/bench_report.h"
#include "benchmarks/patchgen/options.h"
#include "benchmarks/patchgen/run.h"
#include "common/core/csv.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/mpi/mpi_main.h"
#include "stages/patchgen/digest.h"

namespace tessera::patchgen::driver {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

int bench_main(const po::variables_map& values, Comm& comm, const json& command) {
  const BenchOptions o = bench_options_from(values, comm.size());
  const std::string manifest = (fs::path(o.work) / "manifest.csv").string();
  const std::string np = "np" + std::to_string(comm.size());
  const std::string run_dir = (fs::path(o.work) / ("run-" + np)).string();
  const std::string qc_dir = (fs::path(o.work) / ("plan-qc-" + np)).string();
  const json load_start = bench::load_average();
  const std::string dicom_manifest = (fs::path(o.work) / "manifest-dicom.csv").string();
  json generation, dicom_generation;
  if (comm.rank() == 0) {
    generation = ensure_slide(o);
    dicom_generation = ensure_dicom(o);
    fs::create_directories(qc_dir);
    atomic_write_file(manifest, csv_record({"slide_id", "path"}) + csv_record({"bench", o.slide}));
    if (!o.dicom.empty()) {
      atomic_write_file(dicom_manifest,
                        csv_record({"slide_id", "path"}) + csv_record({"bench", o.dicom_dir}));
    }
  }
  comm.barrier();
  const Config config = patchgen_config(values, manifest, run_dir);
  Config openslide_config = config;
  openslide_config.reader = SlideReader::kOpenSlide;
  const Config dicom_config =
      o.dicom.empty() ? config : patchgen_config(values, dicom_manifest, run_dir);

  json warmups = json::array(), reps = json::array(), grid;
  for (int w = 0; w < o.warmup; ++w) {
    warmups.push_back(
        repetition(w, o.modes, config, openslide_config, dicom_config, qc_dir, o.slide, o.cache, comm, &grid));
  }
  for (int r = 0; r < o.reps; ++r) {  // rotating order cancels drift and cache effects
    reps.push_back(
        repetition(r, o.modes, config, openslide_config, dicom_config, qc_dir, o.slide, o.cache, comm, &grid));
  }
  json usage = json::array();
  for (const auto& s : comm.allgather(bench::resource_usage().dump())) {
    usage.push_back(json::parse(s));
  }
  if (comm.rank() != 0) return kExitOk;

  const std::string stage_dir = (fs::path(run_dir) / "patchgen").string();
  // The run's digests, when a patchgen mode ran (the other modes write nothing).
  const bool ran_patchgen =
      std::find(o.modes.begin(), o.modes.end(), "patchgen") != o.modes.end() ||
      std::find(o.modes.begin(), o.modes.end(), "patchgen_openslide") != o.modes.end() ||
      std::find(o.modes.begin(), o.modes.end(), "patchgen_dicom") != o.modes.end();
  const RunDigest digest = ran_patchgen ? digest_run(stage_dir) : RunDigest{};
  // Every repetition and both readers must give the same shards, byte for byte.
  json shards;
  bool identical = true;
  for (const json* list : {&warmups, &reps}) {
    for (const json& rep : *list) {
      for (const char* mode : {"patchgen", "patchgen_openslide", "patchgen_dicom"}) {
        if (!rep.contains(mode)) continue;
        if (shards.is_null()) shards = rep[mode]["shard_xxh3"];
        identical &= rep[mode]["shard_xxh3"] == shards;
      }
    }
  }
  const json summary = bench::summarize_repetitions(reps);
  auto target = [&](const char* ratio, double min) -> json {
    if (!summary.contains(ratio)) return nullptr;  // a mode of the ratio was not measured
    const double median = summary[ratio]["median"].get<double>();
    return {{"min", min}, {"median", median}, {"met", median >= min}};
  };
  auto median_of = [&](const char* ratio) {
    return summary.contains(ratio) ? summary[ratio]["median"].get<double>() : 0.0;
  };
  const double ratio_median = median_of("ratio");
  const double ratio_openslide = median_of("ratio_openslide");
  const double ratio_decode = median_of("ratio_decode_limit");
  const double ratio_dicom = median_of("ratio_dicom");
  double peak_rss = 0;
  for (const auto& u : usage) peak_rss = std::max(peak_rss, u["peak_rss_mb"].get<double>());

  json report = {
      {"benchmark", "patchgen"},
      {"date", utc_timestamp()},
      {"command_line", command},
      {"machine", bench::machine_info()},
      {"versions", bench::versions({{"openslide", openslide_get_version()}})},
      {"load_average", {{"start", load_start}, {"end", bench::load_average()}}},
      {"parameters",
       {{"ranks", comm.size()},
        {"reps", o.reps},
        {"warmup", o.warmup},
        {"patch_size", config.patch_size},
        {"grid", grid},
        {"encoding", config.layout.encoding},
        {"compression", values["compression"].as<std::string>()},
        {"chunk_patches", config.layout.chunk_patches},
        {"partition", config.partition.to_string()},
        {"reader", to_string(config.reader)},
        {"reader_threads", config.reader_threads},
        {"read_batch", config.read_batch},
        {"read_ahead", config.read_ahead},
        {"modes", o.modes},
        {"qc", config.qc},
        {"patchgen_config", config.config_ini},
        {"work", o.work}}},
      {"slide", {{"spec", {{"width", o.width}, {"height", o.height}, {"seed", o.seed},
                           {"mpp", o.slide_mpp}}},
                 {"generation", generation},
                 {"info", slide_info(o.slide)},
                 {"dicom", o.dicom.empty() ? json()
                                           : json{{"variant", o.dicom},
                                                  {"generation", dicom_generation},
                                                  {"info", slide_info(o.dicom_dir)}}}}},
      {"warmup", warmups},
      {"repetitions", reps},
      {"summary", summary},
      {"measured", bench::measured_field({"", "patches_per_s", true})},
      {"target",
       {{"patchgen_vs_openslide_loop", target("ratio", kTargetDirect)},
        {"patchgen_vs_decode_limit", target("ratio_decode_limit", kTargetDecode)},
        {"patchgen_openslide_vs_openslide_loop", target("ratio_openslide", kTargetOpenSlide)},
        {"patchgen_dicom_vs_patchgen", target("ratio_dicom", kTargetDicom)}}},
      {"output", {{"patches", ran_patchgen ? json(digest.patches) : json()},
                  {"index_sha256", ran_patchgen ? json(digest.index_sha256) : json()},
                  {"pixels_sha256", ran_patchgen ? json(digest.pixels_sha256) : json()},
                  {"shard_xxh3", shards},
                  {"shards_identical_across_repetitions", identical}}},
      {"resources", {{"peak_rss_mb_max", peak_rss}, {"per_rank", usage}}}};
  report.update(bench::cache_policy_field(o.cache));
  if (!o.compare.empty()) {
    report["compare"] = bench::compare_reports(bench::load_report(o.compare), report);
    spdlog::info("against '{}':\n{}", o.compare, bench::format_comparison(report["compare"]));
  }
  bench::write_report(o.out, report);
  spdlog::info("medians (0: not measured): patchgen ({}) / OpenSlide loop {:.2f} (target {}), / "
               "decode limit {:.2f} (target {}); patchgen with OpenSlide / loop {:.2f} (target {}); "
               "DICOM twin / patchgen {:.2f} (target {}); report '{}'",
               to_string(config.reader), ratio_median, kTargetDirect, ratio_decode, kTargetDecode,
               ratio_openslide, kTargetOpenSlide, ratio_dicom, kTargetDicom, o.out);
  return kExitOk;
}

}  // namespace
}  // namespace tessera::patchgen::driver

int main(int argc, char** argv) {
  namespace pg = tessera::patchgen::driver;
  const nlohmann::json command = tessera::bench::command_line(argc, argv);
  return tessera::mpi_main(argc, argv, pg::kUsage, pg::bench_options(),
                           [&](const tessera::po::variables_map& values, tessera::Comm& comm) {
                             return pg::bench_main(values, comm, command);
                           });
}
