#include "stages/patchgen/extract.h"

#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <deque>
#include <exception>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/core/bounded_queue.h"
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

// One slide's share of a rank: what the reader thread reads, in the rank's order.
struct SlideJob {
  int position = 0;
  int slide = 0;
  std::string slide_id;
  std::string path;
  LevelChoice level;
  std::vector<int64_t> ordinals;
  std::vector<GridPatch> patches;
};

// Consecutive patches of one job, read. A failed slide ends with a batch carrying the error
// (patches from `first` on are skipped).
struct ReadBatch {
  size_t first = 0;
  int count = 0;
  std::vector<uint8_t> pixels;
  std::string error;
  bool last = false;  // the job's last batch
};

constexpr int kBatchPatches = 16;
constexpr size_t kBatchesAhead = 8;  // 8 x 16 raw 224 px patches: 19 MB

// The reader thread's totals, read after it is joined.
struct ReaderTotals {
  double read_s = 0;
  double resize_s = 0;
  int64_t direct_slides = 0;
  TileReaderStats tiles;
  int64_t fallbacks = 0;
};

// The reader thread: reads each job's patches (slide opened with --reader, one at a time) into
// batches until the job queue is closed or the batch queue refuses.
void read_slides(BoundedQueue<std::shared_ptr<const SlideJob>>& jobs,
                 BoundedQueue<ReadBatch>& batches, const Config& config, ReaderTotals* totals) {
  const int ps = config.patch_size;
  const size_t patch_bytes = static_cast<size_t>(ps) * ps * 3;
  std::vector<uint8_t> read_buffer;
  int logged_refusals = 0;
  while (auto next = jobs.pop()) {
    const SlideJob& job = **next;
    std::optional<Slide> slide;
    size_t i = 0, handed_over = 0;
    auto add_counters = [&] {
      if (!slide) return;
      const TileReaderStats t = slide->direct_stats();
      totals->direct_slides += std::string(slide->reader()) == "direct";
      totals->tiles.tiles_decoded += t.tiles_decoded;
      totals->tiles.tile_hits += t.tile_hits;
      totals->tiles.read_s += t.read_s;
      totals->tiles.decode_s += t.decode_s;
      totals->fallbacks += slide->openslide_fallbacks();
    };
    try {
      slide.emplace(Slide::open(job.path, config.reader,
                                static_cast<size_t>(config.tile_cache_mb) << 20));
      if (!slide->direct_refusal().empty() && logged_refusals++ < 3) {
        spdlog::info("slide '{}' read with OpenSlide: the direct reader refuses it: {}",
                     job.slide_id, slide->direct_refusal());
      }
      const int rs = job.level.read_size;
      while (i < job.patches.size()) {
        ReadBatch batch;
        batch.first = i;
        batch.count = static_cast<int>(std::min<size_t>(kBatchPatches, job.patches.size() - i));
        batch.pixels.resize(batch.count * patch_bytes);
        for (int k = 0; k < batch.count; ++k, ++i) {
          const GridPatch& g = job.patches[i];
          uint8_t* out = batch.pixels.data() + k * patch_bytes;
          auto t0 = Clock::now();
          if (job.level.resample) {
            read_buffer.resize(static_cast<size_t>(rs) * rs * 3);
            slide->read_rgb(g.x, g.y, job.level.level, rs, rs, read_buffer.data());
            totals->read_s += since(t0);
            auto t1 = Clock::now();
            resize_patch(read_buffer.data(), rs, out, ps);
            totals->resize_s += since(t1);
          } else {
            slide->read_rgb(g.x, g.y, job.level.level, ps, ps, out);
            totals->read_s += since(t0);
          }
        }
        batch.last = i == job.patches.size();
        if (!batches.push(std::move(batch))) {
          add_counters();
          return;
        }
        handed_over = i;
      }
    } catch (const IoError& e) {
      ReadBatch failed;
      // The patches of the batch in progress were not handed over: skipped with the rest.
      failed.first = handed_over;
      failed.error = e.what();
      failed.last = true;
      if (!batches.push(std::move(failed))) return;
    }
    add_counters();
  }
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

  // The rank's items, slide by slide, from the partition arithmetic: a job holds one slide's
  // share, never more than two slides' at once. Its plan file is read on this thread: HDF5 takes
  // one process-wide lock per call, so every HDF5 call stays here, beside the writes.
  int64_t next_item = 0;
  auto next_job = [&]() -> std::shared_ptr<const SlideJob> {
    if (next_item >= stats.planned) return nullptr;
    const int position = order.locate(partition.global_index(rank, next_item)).first;
    const int s = part.slides[position];
    const SlideEntry& entry = manifest.slides[s];
    auto plan = read_plan(plan_path(stage_dir, entry.slide_id), fingerprint, /*with_patches=*/true);
    if (!plan || !plan->ok || plan->patch_count != part.counts[position]) {
      fail<IoError>("the plan of slide '{}' ('{}') is missing or differs from the planning "
                    "exchange; rerun the stage",
                    entry.slide_id, plan_path(stage_dir, entry.slide_id));
    }
    auto job = std::make_shared<SlideJob>();
    job->position = position;
    job->slide = s;
    job->slide_id = entry.slide_id;
    job->path = entry.path;
    job->level = plan->level;
    for (; next_item < stats.planned; ++next_item) {
      const auto [p, ordinal] = order.locate(partition.global_index(rank, next_item));
      if (p != position) break;
      job->ordinals.push_back(ordinal);
      job->patches.push_back(plan->patches[ordinal]);
    }
    return job;
  };

  // Reading and decoding run on a thread of their own, overlapping the shard writes here.
  BoundedQueue<std::shared_ptr<const SlideJob>> jobs(2);
  BoundedQueue<ReadBatch> batches(kBatchesAhead);
  ReaderTotals totals;
  std::exception_ptr reader_error;
  std::thread reader([&] {
    try {
      read_slides(jobs, batches, config, &totals);
    } catch (...) {
      reader_error = std::current_exception();
    }
    batches.close();
  });
  struct Stop {  // on every exit, the reader thread is stopped and joined
    BoundedQueue<std::shared_ptr<const SlideJob>>& jobs;
    BoundedQueue<ReadBatch>& batches;
    std::thread& thread;
    ~Stop() {
      jobs.close();
      batches.close();
      if (thread.joinable()) thread.join();
    }
  } stop{jobs, batches, reader};

  std::deque<std::shared_ptr<const SlideJob>> pending;
  auto submit = [&] {
    if (auto job = next_job()) {
      pending.push_back(job);
      jobs.push(std::move(job));
    } else {
      jobs.close();
    }
  };
  submit();
  submit();
  int64_t done = 0;
  while (!pending.empty()) {
    std::optional<ReadBatch> batch = batches.pop();
    if (!batch) break;  // the reader stopped: its error is rethrown below
    const SlideJob& job = *pending.front();
    if (!batch->error.empty()) {
      if (config.fail_fast) {
        throw Error(fmt::format("slide '{}' failed (--fail-fast): {}", job.slide_id, batch->error),
                    kExitSlidesFailed);
      }
      spdlog::warn("slide '{}' failed while extracting: {}", job.slide_id, batch->error);
      stats.failed_slides[job.slide] = batch->error;
      done += static_cast<int64_t>(job.patches.size() - batch->first);
      progress.update(done);
    }
    const size_t patch_bytes = static_cast<size_t>(config.patch_size) * config.patch_size * 3;
    for (int i = 0; i < batch->count; ++i) {
      const size_t k = batch->first + static_cast<size_t>(i);
      const GridPatch& g = job.patches[k];
      // A failure to write the shard is the rank's, not the slide's: thrown from here.
      writer.add(make_patch_id(job.slide, job.ordinals[k]), job.slide, g.x, g.y, g.tissue,
                 batch->pixels.data() + i * patch_bytes);
      ++stats.patches;
      ++done;
      if (rank == config.debug_kill_rank && stats.patches == config.debug_kill_after) {
        spdlog::warn("--debug-kill-after {} reached: killing rank {} with SIGKILL",
                     config.debug_kill_after, rank);
        spdlog::default_logger()->flush();
        std::raise(SIGKILL);
      }
      progress.update(done);
    }
    if (batch->last) {
      pending.pop_front();
      submit();
    }
  }
  jobs.close();
  reader.join();
  if (reader_error) std::rethrow_exception(reader_error);
  writer.close();
  progress.finish(done);
  stats.read_s = totals.read_s;
  stats.resize_s = totals.resize_s;
  stats.direct_slides = totals.direct_slides;
  stats.tiles_decoded = totals.tiles.tiles_decoded;
  stats.tile_hits = totals.tiles.tile_hits;
  stats.tile_read_s = totals.tiles.read_s;
  stats.tile_decode_s = totals.tiles.decode_s;
  stats.openslide_fallbacks = totals.fallbacks;
  stats.encode_s = writer.encode_seconds();
  stats.write_s = writer.write_seconds();
  stats.total_s = since(start);
  return stats;
}

}  // namespace tessera::patchgen
