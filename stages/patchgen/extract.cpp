#include "stages/patchgen/extract.h"

#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/core/progress.h"
#include "common/stage/partition.h"
#include "common/slide/slide.h"
#include "common/store/store.h"

namespace tessera::patchgen {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

nlohmann::json ExtractStats::to_json() const {
  nlohmann::json failed = nlohmann::json::array();
  for (const auto& [slide, reason] : failed_slides) {
    failed.push_back({{"slide", slide}, {"reason", reason}});
  }
  return {{"patches", patches},   {"planned", planned},   {"failed_slides", failed},
          {"read_s", read_s},     {"resize_s", resize_s}, {"encode_s", encode_s},
          {"write_s", write_s},   {"total_s", total_s},
          {"direct_slides", direct_slides},        {"tiles_decoded", tiles_decoded},
          {"tile_hits", tile_hits},                {"tile_read_s", tile_read_s},
          {"tile_decode_s", tile_decode_s},        {"openslide_fallbacks", openslide_fallbacks}};
}

std::string shard_file(int rank) { return "shards/" + rank_file_name(rank, ".h5"); }

ExtractStats extract_rank(const Manifest& manifest, const PartPlan& part, const Config& config,
                          int rank, int world_size, const std::string& stage_dir,
                          const std::string& fingerprint, const std::string& shard_path) {
  if (config.debug_file_size_limit > 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // a write beyond the limit fails with EFBIG instead
    struct rlimit limit {};
    getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = static_cast<rlim_t>(config.debug_file_size_limit);
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) {
      fail<IoError>("--debug-file-size-limit: setrlimit failed: {}", std::strerror(errno));
    }
  }
  const auto start = Clock::now();
  std::error_code ec;
  fs::create_directories(fs::path(shard_path).parent_path(), ec);
  if (ec) fail<IoError>("cannot create '{}': {}", fs::path(shard_path).parent_path().string(), ec.message());

  const PatchOrder order = part.order();
  const Partition partition(config.partition, order.total(), world_size);
  ExtractStats stats;
  stats.planned = partition.count(rank);

  ShardWriter writer(shard_path, config.layout, rank, world_size);
  Progress progress("extract", stats.planned, {rank, config.stage.part, config.stage.parts},
                    rank == 0, (fs::path(stage_dir) / "progress.jsonl").string(),
                    config.progress_interval);
  const int ps = config.patch_size;
  std::vector<uint8_t> read_buffer, patch(static_cast<size_t>(ps) * ps * 3);
  std::optional<Slide> slide;
  std::optional<SlidePlan> plan;  // of the slide at position `open_position`, patches included
  int open_position = -1;
  std::set<int> failed_positions;
  int64_t done = 0;
  int logged_refusals = 0;
  // Counters of the slides read, added up as each is closed.
  auto close_slide = [&] {
    if (!slide) return;
    const TileReaderStats t = slide->direct_stats();
    stats.direct_slides += std::string(slide->reader()) == "direct";
    stats.tiles_decoded += t.tiles_decoded;
    stats.tile_hits += t.tile_hits;
    stats.tile_read_s += t.read_s;
    stats.tile_decode_s += t.decode_s;
    stats.openslide_fallbacks += slide->openslide_fallbacks();
    slide.reset();
  };

  // Item by item from the partition arithmetic: no list of the rank's items (a cyclic share
  // is one run per item, 24 bytes each, O(own patches)) is ever built.
  for (int64_t k = 0; k < stats.planned; ++k) {
    const int64_t item = partition.global_index(rank, k);
    ++done;
    const auto [position, ordinal] = order.locate(item);
    if (failed_positions.count(position)) continue;
    const int s = part.slides[position];
    const SlideEntry& entry = manifest.slides[s];
    if (open_position != position) {
      close_slide();
      plan = read_plan(plan_path(stage_dir, entry.slide_id), fingerprint, /*with_patches=*/true);
      if (!plan || !plan->ok || plan->patch_count != part.counts[position]) {
        fail<IoError>("the plan of slide '{}' ('{}') is missing or differs from the planning "
                      "exchange; rerun the stage",
                      entry.slide_id, plan_path(stage_dir, entry.slide_id));
      }
      open_position = position;
    }
    const GridPatch& g = plan->patches[ordinal];
    bool read = false;
    try {
      if (!slide) {
        slide.emplace(Slide::open(entry.path, config.reader,
                                  static_cast<size_t>(config.tile_cache_mb) << 20));
        if (!slide->direct_refusal().empty() && logged_refusals++ < 3) {
          spdlog::info("slide '{}' read with OpenSlide: the direct reader refuses it: {}",
                       entry.slide_id, slide->direct_refusal());
        }
      }
      const int rs = plan->level.read_size;
      auto t0 = Clock::now();
      if (plan->level.resample) {
        read_buffer.resize(static_cast<size_t>(rs) * rs * 3);
        slide->read_rgb(g.x, g.y, plan->level.level, rs, rs, read_buffer.data());
        stats.read_s += since(t0);
        auto t1 = Clock::now();
        resize_patch(read_buffer.data(), rs, patch.data(), ps);
        stats.resize_s += since(t1);
      } else {
        slide->read_rgb(g.x, g.y, plan->level.level, ps, ps, patch.data());
        stats.read_s += since(t0);
      }
      read = true;
    } catch (const IoError& e) {
      if (config.fail_fast) {
        throw Error(fmt::format("slide '{}' failed (--fail-fast): {}", entry.slide_id, e.what()),
                    kExitSlidesFailed);
      }
      spdlog::warn("slide '{}' failed while extracting: {}", entry.slide_id, e.what());
      stats.failed_slides[s] = e.what();
      failed_positions.insert(position);
      close_slide();
    }
    // Outside the try: a failure to write the shard is the rank's, not the slide's.
    if (read) {
      writer.add(make_patch_id(s, ordinal), s, g.x, g.y, g.tissue, patch.data());
      ++stats.patches;
    }
    if (rank == config.debug_kill_rank && stats.patches == config.debug_kill_after) {
      spdlog::warn("--debug-kill-after {} reached: killing rank {} with SIGKILL",
                   config.debug_kill_after, rank);
      spdlog::default_logger()->flush();
      std::raise(SIGKILL);
    }
    progress.update(done);
  }
  close_slide();
  writer.close();
  progress.finish(done);
  stats.encode_s = writer.encode_seconds();
  stats.write_s = writer.write_seconds();
  stats.total_s = since(start);
  return stats;
}

}  // namespace tessera::patchgen
