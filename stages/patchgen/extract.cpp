#include "stages/patchgen/extract.h"

#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/marker.h"
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
          {"write_s", write_s},   {"hash_s", hash_s},     {"total_s", total_s}};
}

ExtractStats extract_rank(const Manifest& manifest, const std::vector<SlidePlan>& plans,
                          const Config& config, int rank, int world_size,
                          const std::string& stage_dir, const std::string& fingerprint) {
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
  const std::string start_time = utc_timestamp();
  const std::string shard_rel = "shards/" + rank_file_name(rank, ".h5");
  const std::string shard_path = (fs::path(stage_dir) / shard_rel).string();
  const std::string marker_path =
      (fs::path(stage_dir) / "markers" / rank_file_name(rank, ".json")).string();
  fs::create_directories(fs::path(shard_path).parent_path());
  fs::remove(marker_path);

  std::vector<SlideReadInfo> infos(plans.size());
  for (const auto& p : plans) {
    if (p.ok) {
      infos[p.index] = {p.level.level, p.level.read_size,
                        p.level.footprint / config.patch_size};
    }
  }
  PatchOrder order(plans);
  const int64_t total = order.total();
  ExtractStats stats;
  const Partition partition(config.partition, total,
                            world_size);
  stats.planned = partition.count(rank);

  ShardWriter writer(shard_path, config.layout, rank, world_size, infos);
  Progress progress("extract (rank 0)", stats.planned, rank == 0,
                    (fs::path(stage_dir) / "progress.jsonl").string(), config.progress_interval);
  const int ps = config.patch_size;
  std::vector<uint8_t> read_buffer, patch(static_cast<size_t>(ps) * ps * 3);
  std::optional<Slide> slide;
  int open_index = -1;
  int64_t done = 0;

  for (const ItemRun& run : partition.runs(rank)) {
    for (int64_t item = run.first; item < run.first + run.count; ++item) {
      ++done;
      const auto [s, ordinal] = order.locate(item);
      if (stats.failed_slides.count(s)) continue;
      const SlidePlan& plan = plans[s];
      const SlideEntry& entry = manifest.slides[s];
      const GridPatch& g = plan.patches[ordinal];
      bool read = false;
      try {
        if (open_index != s) {
          slide.reset();
          open_index = s;
          slide.emplace(Slide::open(entry.path));
        }
        const int rs = plan.level.read_size;
        auto t0 = Clock::now();
        if (plan.level.resample) {
          read_buffer.resize(static_cast<size_t>(rs) * rs * 3);
          slide->read_rgb(g.x, g.y, plan.level.level, rs, rs, read_buffer.data());
          stats.read_s += since(t0);
          auto t1 = Clock::now();
          resize_patch(read_buffer.data(), rs, patch.data(), ps);
          stats.resize_s += since(t1);
        } else {
          slide->read_rgb(g.x, g.y, plan.level.level, ps, ps, patch.data());
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
        slide.reset();
        open_index = -1;
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
  }
  slide.reset();
  writer.close();
  progress.finish(done);
  stats.encode_s = writer.encode_seconds();
  stats.write_s = writer.write_seconds();

  auto t0 = Clock::now();
  nlohmann::json marker = marker_base("patchgen", rank, world_size, fingerprint);
  marker["file"] = shard_rel;
  marker["file_bytes"] = file_size(shard_path).value_or(0);
  marker["file_sha256"] = sha256_file(shard_path);
  stats.hash_s = since(t0);
  stats.total_s = since(start);
  marker["rows"] = writer.rows();
  marker["stats"] = stats.to_json();
  marker["start_time"] = start_time;
  marker["end_time"] = utc_timestamp();
  atomic_write_file(marker_path, marker.dump(2) + "\n");
  return stats;
}

}  // namespace tessera::patchgen
