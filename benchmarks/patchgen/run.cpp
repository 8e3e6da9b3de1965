#include "benchmarks/patchgen/run.h"

#include <openslide/openslide.h>
#include <turbojpeg.h>

#include <algorithm>

#include <filesystem>
#include <set>
#include <tuple>
#include <sstream>

#include <spdlog/spdlog.h>

#include "common/core/options.h"
#include "benchmarks/bench_report.h"
#include "common/core/csv.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/h5/h5.h"
#include "common/stage/layout.h"
#include "common/stage/skeleton.h"
#include "common/store/index.h"
#include "common/stage/marker.h"
#include "common/mpi/mpi_main.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/digest.h"
#include "stages/patchgen/manifest.h"
#include "common/stage/partition.h"
#include "stages/patchgen/patchgen.h"
#include "stages/patchgen/plan.h"
#include "common/slide/slide.h"
#include "tests/synthslide/dicom_writer.h"
#include "tests/synthslide/synthslide.h"

namespace tessera::patchgen::driver {

namespace fs = std::filesystem;
using bench::Stopwatch;
using nlohmann::json;

// Rank 0 only: generates the slide when missing.
json ensure_slide(const BenchOptions& o) {
  if (fs::exists(o.slide)) return {{"generated", false}};
  spdlog::info("generating {}x{} slide '{}' (seed {}, {} um/px)", o.width, o.height, o.slide,
               o.seed, o.slide_mpp);
  synth::SlideSpec spec;
  spec.path = o.slide;
  spec.width = o.width;
  spec.height = o.height;
  spec.seed = o.seed;
  spec.mpp = o.slide_mpp;
  fs::create_directories(fs::path(o.slide).parent_path());
  Stopwatch watch;
  synth::write_slide(spec);
  return {{"generated", true}, {"generate_s", watch.seconds()}};
}

// Rank 0 only: writes the slide's DICOM twin when missing (from the TIFF's tiles, so the same
// pixels: tests/synthslide/dicom_writer.h).
json ensure_dicom(const BenchOptions& o) {
  if (o.dicom.empty()) return nullptr;
  if (fs::exists(o.dicom_dir)) return {{"path", o.dicom_dir}, {"generated", false}};
  const Slide tiff = Slide::open(o.slide, SlideReader::kDirect);
  synth::SlideSpec spec;
  spec.path = o.slide;
  spec.width = tiff.width();
  spec.height = tiff.height();
  spec.seed = o.seed;
  spec.mpp = slide_mpp(tiff, o.slide_mpp)->x;
  spec.tile_size = tiff.direct_reader()->tile_size(0).first;
  synth::DicomSpec dicom;
  dicom.dir = o.dicom_dir;
  dicom.codec = o.dicom.rfind("j2k", 0) == 0 ? synth::DicomCodec::kJpeg2000 : synth::DicomCodec::kJpeg;
  dicom.sparse = o.dicom.find("sparse") != std::string::npos;
  spdlog::info("writing the DICOM twin '{}' of '{}'", dicom.dir, o.slide);
  Stopwatch watch;
  const auto summary = synth::write_dicom_series(spec, dicom);
  return {{"path", o.dicom_dir}, {"generated", true}, {"generate_s", watch.seconds()},
          {"frames", summary.frames}};
}

json slide_info(const std::string& path) {
  Slide slide = Slide::open(path);
  json levels = json::array();
  for (int l = 0; l < slide.level_count(); ++l) levels.push_back({slide.width(l), slide.height(l)});
  uint64_t bytes = 0;
  if (fs::is_directory(path)) {
    for (const auto& e : fs::directory_iterator(path)) bytes += e.is_regular_file() ? e.file_size() : 0;
  } else {
    bytes = file_size(path).value_or(0);
  }
  return {{"path", path}, {"bytes", bytes}, {"vendor", slide.vendor()}, {"levels", levels}};
}

// Every regular file under `dir`: count and bytes.
std::pair<int64_t, uint64_t> count_files(const std::string& dir) {
  int64_t files = 0;
  uint64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      ++files;
      bytes += e.file_size();
    }
  }
  return {files, bytes};
}

// Tissue detection and grid (patchgen's plan step) on rank 0, timed; broadcast to every rank.
SlidePlan timed_plan(const Config& config, const std::string& qc_dir, Comm& comm, double* seconds) {
  const std::string path = (fs::path(qc_dir) / "bench-plan.h5").string();
  if (comm.rank() == 0) {
    const Manifest manifest = load_manifest(config.manifest, /*check_files=*/true);
    Stopwatch watch;
    SlidePlan plan = plan_slide(manifest.slides.at(0), config, qc_dir);
    *seconds = watch.seconds();
    if (!plan.ok) fail<Error>("the benchmark slide failed to plan: {}", plan.reason);
    write_plan(path, plan, manifest.slides.at(0), "bench");
  }
  comm.barrier();
  return read_plan(path, "bench", /*with_patches=*/true).value();
}

// Rank 0 only: the run's index must hold exactly the planned patches, read as planned.
void check_index_matches_plan(const std::string& stage_dir, const SlidePlan& plan) {
  const IndexInfo info = load_index_info(stage_dir);
  const auto coords = IndexReader(info.path).read_range(0, info.rows).coords;
  const auto& level = info.slides.level;
  const auto& read_size = info.slides.read_size;
  bool same = coords.size() == 2 * plan.patches.size() && level.size() == 1 &&
              level[0] == plan.level.level && read_size[0] == plan.level.read_size;
  for (size_t i = 0; same && i < plan.patches.size(); ++i) {
    same = coords[2 * i] == plan.patches[i].x && coords[2 * i + 1] == plan.patches[i].y;
  }
  if (!same) {
    fail<Error>("'{}/index.h5' does not hold the planned {} patches; the reference loop would "
                "not read the same patches",
                stage_dir, plan.patches.size());
  }
}

// Collective. One patchgen run in a fresh run directory, timed between barriers. The returned
// metrics are complete on rank 0 only.
json measure_patchgen(const Config& config, const SlidePlan& plan, Comm& comm) {
  const std::string stage_dir = (fs::path(config.out) / "patchgen").string();
  if (comm.rank() == 0) fs::remove_all(config.out);
  bench::reset_peak_rss();
  comm.barrier();
  Stopwatch watch;
  const double cpu0 = bench::cpu_seconds();
  const int code = run(config, comm);
  comm.barrier();
  const double wall = watch.seconds();
  const double cpu = comm.allreduce_sum(bench::cpu_seconds() - cpu0);
  const json rss = bench::peak_rss_mb_since_reset();
  const double peak_rss = comm.allreduce_max(rss.is_number() ? rss.get<double>() : -1.0);
  if (code != kExitOk) fail<Error>("patchgen exited with code {}", code);
  if (comm.rank() != 0) return {};

  check_index_matches_plan(stage_dir, plan);
  const json success = read_json_file(stage_file(stage_dir, kSuccessFile)).value();
  const json& sum = success["seconds_summed_over_ranks"];
  const int ranks = comm.size();
  const auto patches = success["patches"].get<int64_t>();
  const auto shard_bytes = success["shard_bytes"].get<uint64_t>();
  const auto [files, bytes] = count_files(stage_dir);
  json per_rank = json::array(), shard_sha = json::array();
  for (int r = 0; r < ranks; ++r) {
    const json marker =
        read_json_file(marker_path(stage_dir, r)).value();
    const json& s = marker["stats"];
    per_rank.push_back({{"rank", r}, {"patches", s["patches"]}, {"read_s", s["read_s"]},
                        {"write_s", s["write_s"]}, {"extract_s", s["total_s"]},
                        {"seal_s", marker["seal_s"]},
                        {"outside_extract_s", wall - s["total_s"].get<double>()}});
    shard_sha.push_back(marker["outputs"][0]["xxh3"]);
  }
  const double read = sum["read_s"], resize = sum["resize_s"], encode = sum["encode_s"],
               write = sum["write_s"], seal = sum["seal_s"], extract = sum["total_s"];
  const double rank_seconds = wall * ranks;
  return {
      {"patches", patches},
      {"wall_s", wall},
      {"patches_per_s", patches / wall},
      {"patches_per_s_per_rank", patches / wall / ranks},
      {"cpu_s", cpu},
      {"patches_per_cpu_s", patches / cpu},
      {"shard_bytes", shard_bytes},
      {"mb_written_per_s", shard_bytes / 1e6 / wall},
      {"files_written", files},
      {"bytes_written", bytes},
      {"time_split_s",
       {{"read_decode", read},
        {"resize", resize},
        {"encode", encode},
        {"write", write},
        // Reading runs on its own thread beside the writes: their sum may exceed the extraction.
        {"extract_other", std::max(0.0, extract - read - resize - encode - write)},
        {"read_write_overlap", std::max(0.0, read + resize + encode + write - extract)},
        {"seal", seal},
        {"outside_extract", rank_seconds - extract - seal},
        {"wait_rank0", success["wait_s_rank0"]},
        {"consolidate", success["consolidate_s"]}}},
      {"io_fraction", (read + write) / rank_seconds},
      // Completion bookkeeping: making the shards durable (fsync) and hashing them for the
      // markers, as a share of the ranks' time.
      {"bookkeeping_fraction", seal / rank_seconds},
      {"peak_rss_mb", peak_rss},
      {"per_rank", per_rank},
      {"shard_xxh3", shard_sha}};
}

// Collective. The reference loop over this rank's share of the same patches, timed between
// barriers; the slide is opened inside the timed region, as patchgen does.
json measure_reference(const Config& config, const SlidePlan& plan, const std::string& slide_path,
                       Comm& comm) {
  const auto total = static_cast<int64_t>(plan.patches.size());
  std::vector<int64_t> mine;
  const Partition partition(config.partition, total,
                            comm.size());
  for (const auto& run : partition.runs(comm.rank())) {
    for (int64_t i = 0; i < run.count; ++i) mine.push_back(run.first + i);
  }
  const int rs = plan.level.read_size;
  std::vector<uint32_t> argb(static_cast<size_t>(rs) * rs);
  uint32_t fold = 0;
  bench::reset_peak_rss();
  comm.barrier();
  Stopwatch watch;
  const double cpu0 = bench::cpu_seconds();
  {
    Slide slide = Slide::open(slide_path);
    for (int64_t i : mine) {
      const GridPatch& g = plan.patches[i];
      slide.read_argb(g.x, g.y, plan.level.level, rs, rs, argb.data());
      fold ^= argb[(i * 7919) % argb.size()];
    }
  }
  const double loop = watch.seconds();
  comm.barrier();
  const double wall = watch.seconds();
  const double cpu = comm.allreduce_sum(bench::cpu_seconds() - cpu0);
  const json rss = bench::peak_rss_mb_since_reset();
  const double peak_rss = comm.allreduce_max(rss.is_number() ? rss.get<double>() : -1.0);
  json loops = json::array();
  for (const auto& s : comm.allgather(json(loop).dump())) loops.push_back(json::parse(s));
  spdlog::debug("reference loop fold {:08x}", fold);
  return {{"patches", total},
          {"wall_s", wall},
          {"patches_per_s", total / wall},
          {"patches_per_s_per_rank", total / wall / comm.size()},
          {"cpu_s", cpu},
          {"patches_per_cpu_s", total / cpu},
          {"peak_rss_mb", peak_rss},
          {"per_rank_loop_s", loops}};
}

// The compressed tiles of one level that a rank's patches touch, read into memory with libtiff
// (outside any timer), each once.
struct TouchedTiles {
  std::vector<std::vector<uint8_t>> jpeg;  // complete streams: tables + tile
  int tile_w = 0, tile_h = 0;
};

// The complete JPEG streams of the tiles of the plan's level that the patches `mine` touch, each
// once, in storage order, as the direct reader reads them.
TouchedTiles touched_tiles(const Slide& slide, const SlidePlan& plan,
                           const std::vector<int64_t>& mine) {
  const TileReader* reader = slide.direct_reader();
  if (reader == nullptr) {
    fail<Error>("'{}': the decode limit needs a slide the direct reader reads ({})", slide.path(),
                slide.direct_refusal());
  }
  const int level = plan.level.level;
  const int64_t level_w = slide.width(level), level_h = slide.height(level);
  TouchedTiles out;
  std::tie(out.tile_w, out.tile_h) = reader->tile_size(level);
  const int64_t tw = out.tile_w, th = out.tile_h, cols = (level_w + tw - 1) / tw;
  const double ds = plan.level.level_downsample;
  const int rs = plan.level.read_size;
  std::set<int64_t> tiles;  // row-major tile numbers: storage order
  for (int64_t i : mine) {
    const auto lx = static_cast<int64_t>(plan.patches[i].x / ds);
    const auto ly = static_cast<int64_t>(plan.patches[i].y / ds);
    for (int64_t y = std::max<int64_t>(ly, 0) / th; y * th < std::min(ly + rs, level_h); ++y) {
      for (int64_t x = std::max<int64_t>(lx, 0) / tw; x * tw < std::min(lx + rs, level_w); ++x) {
        tiles.insert(y * cols + x);
      }
    }
  }
  for (int64_t t : tiles) {
    std::vector<uint8_t> jpeg = reader->jpeg_stream(level, t % cols, t / cols);
    if (!jpeg.empty()) out.jpeg.push_back(std::move(jpeg));
  }
  return out;
}

// Collective. The decode limit: each rank decodes, from memory, the tiles its share of the patches
// touches, timed between barriers; patches per second of the job as if nothing but decoding ran.
json measure_decode_limit(const Config& config, const SlidePlan& plan,
                          const std::string& slide_path, Comm& comm) {
  const auto total = static_cast<int64_t>(plan.patches.size());
  const Partition partition(config.partition, total, comm.size());
  std::vector<int64_t> mine;
  for (const auto& run : partition.runs(comm.rank())) {
    for (int64_t i = 0; i < run.count; ++i) mine.push_back(run.first + i);
  }
  const Slide slide = Slide::open(slide_path, SlideReader::kDirect);
  const TouchedTiles tiles = touched_tiles(slide, plan, mine);
  std::vector<uint8_t> rgb(static_cast<size_t>(tiles.tile_w) * tiles.tile_h * 3);
  tjhandle tj = tjInitDecompress();
  comm.barrier();
  Stopwatch watch;
  for (const auto& jpeg : tiles.jpeg) {
    if (tjDecompress2(tj, jpeg.data(), jpeg.size(), rgb.data(), tiles.tile_w, 0, tiles.tile_h,
                      TJPF_RGB, 0) != 0) {
      const std::string why = tjGetErrorStr2(tj);
      tjDestroy(tj);
      fail<IoError>("'{}': TurboJPEG cannot decode a tile: {}", slide_path, why);
    }
  }
  const double loop = watch.seconds();
  comm.barrier();
  const double wall = watch.seconds();
  tjDestroy(tj);
  const auto decoded = comm.allreduce_sum(static_cast<double>(tiles.jpeg.size()));
  return {{"patches", total},
          {"wall_s", wall},
          {"patches_per_s", total / wall},
          {"tiles_decoded", decoded},
          {"tiles_per_s_per_rank", tiles.jpeg.size() / std::max(loop, 1e-9)},
          {"tile_size", {tiles.tile_w, tiles.tile_h}}};
}

// Collective. One repetition: the plan (timed), then the four modes in an order rotated by the
// repetition's index.
// `grid` receives the plan's level, read size and patch count.
json repetition(int index, const std::vector<std::string>& modes, const Config& config,
                const Config& openslide_config, const Config& dicom_config,
                const std::string& qc_dir,
                const std::string& slide_path, const std::string& cache, Comm& comm, json* grid) {
  const json load = bench::load_average();
  double plan_s = 0;
  const SlidePlan plan = timed_plan(config, qc_dir, comm, &plan_s);
  *grid = {{"level", plan.level.level}, {"read_size", plan.level.read_size},
           {"resample", plan.level.resample}, {"patches", plan.patches.size()},
           {"slide_mpp", plan.mpp_x}};
  json result = {{"index", index}, {"load_average_at_start", load},
                 {"tissue_detection_s", plan_s}, {"order", json::array()}};
  json around = json::object();
  for (size_t k = 0; k < modes.size(); ++k) {
    const std::string& mode = modes[(k + static_cast<size_t>(index)) % modes.size()];
    if (cache == bench::kCacheDrop) {
      if (comm.rank() == 0) result["dropped"][mode] = bench::drop_page_cache({slide_path});
      comm.barrier();
    }
    bench::RepetitionProbe probe;
    json m = mode == "patchgen"             ? measure_patchgen(config, plan, comm)
             : mode == "patchgen_openslide" ? measure_patchgen(openslide_config, plan, comm)
             : mode == "patchgen_dicom"     ? measure_patchgen(dicom_config, plan, comm)
             : mode == "reference"          ? measure_reference(config, plan, slide_path, comm)
                                            : measure_decode_limit(config, plan, slide_path, comm);
    around[mode] = probe.finish();
    result["order"].push_back(mode);
    result[mode] = m;
  }
  if (comm.rank() != 0) return {};
  result["around"] = around;
  auto has = [&](const char* mode) { return result.contains(mode); };
  auto rate = [&](const char* mode) {
    return has(mode) ? result[mode]["patches_per_s"].get<double>() : 0.0;
  };
  if (has("patchgen") && has("reference")) {
    result["ratio"] = rate("patchgen") / rate("reference");
    result["ratio_cpu"] = result["patchgen"]["patches_per_cpu_s"].get<double>() /
                          result["reference"]["patches_per_cpu_s"].get<double>();
  }
  if (has("patchgen_openslide") && has("reference")) {
    result["ratio_openslide"] = rate("patchgen_openslide") / rate("reference");
  }
  if (has("patchgen") && has("decode_limit")) {
    result["ratio_decode_limit"] = rate("patchgen") / rate("decode_limit");
  }
  if (has("patchgen") && has("patchgen_dicom")) {
    result["ratio_dicom"] = rate("patchgen_dicom") / rate("patchgen");
  }
  if (has("reference") && has("patchgen_dicom")) {
    result["ratio_dicom_vs_openslide_loop"] = rate("patchgen_dicom") / rate("reference");
  }
  spdlog::info("repetition {}: patchgen {:.1f} patches/s ({}), with OpenSlide {:.1f}, OpenSlide "
               "loop {:.1f}, decode limit {:.1f}, DICOM twin {:.1f} (0: not measured)",
               index, rate("patchgen"), to_string(config.reader), rate("patchgen_openslide"),
               rate("reference"), rate("decode_limit"), rate("patchgen_dicom"));
  return result;
}

}  // namespace tessera::patchgen::driver
