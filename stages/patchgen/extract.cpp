#include "stages/patchgen/extract.h"

#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <condition_variable>
#include <deque>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/core/clock.h"
#include "common/core/cpu.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/core/progress.h"
#include "common/stage/layout.h"
#include "common/stage/partition.h"
#include "common/slide/slide.h"
#include "common/store/store.h"

namespace tessera::patchgen {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

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

// Consecutive patches of one job, read: from `first` on, `count` of them. A batch that failed
// carries the error instead (the slide's patches from `first` on are skipped).
struct ReadBatch {
  size_t first = 0;
  int count = 0;
  std::vector<uint8_t> pixels;
  std::vector<std::vector<uint8_t>> jpeg;  // --encoding jpeg: the patches encoded (pixels freed)
  std::string error;
};

// What the reader threads read, summed over them, read after they are joined.
struct ReaderTotals {
  std::mutex mutex;
  double read_s = 0;
  double resize_s = 0;
  double encode_s = 0;
  int64_t direct_slides = 0;
  TileReaderStats tiles;
  int64_t fallbacks = 0;
  int logged_refusals = 0;

  void add_slide(const Slide& slide) {
    const TileReaderStats t = slide.direct_stats();
    std::lock_guard<std::mutex> lock(mutex);
    direct_slides += std::string(slide.reader()) == "direct";
    tiles.tiles_decoded += t.tiles_decoded;
    tiles.tile_hits += t.tile_hits;
    tiles.read_s += t.read_s;
    tiles.decode_s += t.decode_s;
    fallbacks += slide.openslide_fallbacks();
  }
};

// A job being read: its batches are claimed in order by whichever reader thread is free, all of
// them reading through one Slide (and so one tile cache), opened by the first. The slide's
// counters are added to the totals when the last holder lets go of it.
struct ActiveJob {
  std::shared_ptr<const SlideJob> job;
  size_t batches = 0;
  size_t next_claim = 0;
  std::map<size_t, ReadBatch> ready;  // read, not yet taken by the writer
  bool abandoned = false;             // the slide failed: the rest is dropped
  std::once_flag opening;
  std::optional<Slide> slide;
  std::string open_error;
  ReaderTotals* totals = nullptr;

  ~ActiveJob() {
    if (slide) totals->add_slide(*slide);
  }
};

// Hands batches of the rank's jobs to reader threads and their results, in order, to the writing
// thread. At most `ahead` batches are claimed and not yet taken, which bounds the memory.
class ReadQueue {
 public:
  struct Claim {
    std::shared_ptr<ActiveJob> job;
    size_t batch = 0;
  };

  explicit ReadQueue(size_t ahead) : ahead_(std::max<size_t>(1, ahead)) {}

  // Writing thread: a job for the readers (in the order the writer takes them).
  std::shared_ptr<ActiveJob> add(std::shared_ptr<const SlideJob> job, size_t batch_patches,
                                 ReaderTotals* totals) {
    auto active = std::make_shared<ActiveJob>();
    active->batches = (job->patches.size() + batch_patches - 1) / batch_patches;
    active->job = std::move(job);
    active->totals = totals;
    std::lock_guard<std::mutex> lock(mutex_);
    jobs_.push_back(active);
    changed_.notify_all();
    return active;
  }

  // Writing thread: batch `b` of `job`, once read; nullopt when the queue was stopped.
  std::optional<ReadBatch> take(ActiveJob& job, size_t b) {
    std::unique_lock<std::mutex> lock(mutex_);
    changed_.wait(lock, [&] { return stopped_ || job.ready.count(b) > 0; });
    if (stopped_) return std::nullopt;
    auto it = job.ready.find(b);
    ReadBatch batch = std::move(it->second);
    job.ready.erase(it);
    --outstanding_;
    changed_.notify_all();
    return batch;
  }

  // Writing thread: done with `job` (every batch taken, or the slide failed). Batches read or
  // being read are dropped.
  void finish(const std::shared_ptr<ActiveJob>& job) {
    std::lock_guard<std::mutex> lock(mutex_);
    job->abandoned = true;
    outstanding_ -= job->ready.size();  // batches still being read are dropped on delivery
    job->ready.clear();
    jobs_.erase(std::find(jobs_.begin(), jobs_.end(), job));
    changed_.notify_all();
  }

  // No more jobs: readers return once the queued ones are claimed.
  void close() {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
    changed_.notify_all();
  }

  // Stops everything: readers return after their batch in progress, take() returns nullopt.
  void stop() {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped_ = closed_ = true;
    changed_.notify_all();
  }

  // Reader thread: the next batch to read; nullopt when closed and nothing is left, or stopped.
  std::optional<Claim> claim() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (stopped_) return std::nullopt;
      if (outstanding_ < ahead_) {
        for (const auto& job : jobs_) {
          if (!job->abandoned && job->next_claim < job->batches) {
            ++outstanding_;
            return Claim{job, job->next_claim++};
          }
        }
        if (closed_) return std::nullopt;
      }
      changed_.wait(lock);
    }
  }

  // Reader thread: the result of a claim.
  void deliver(const Claim& claim, ReadBatch batch) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (claim.job->abandoned) {
      --outstanding_;
    } else {
      claim.job->ready.emplace(claim.batch, std::move(batch));
    }
    changed_.notify_all();
  }

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::shared_ptr<ActiveJob>> jobs_;
  size_t ahead_;
  size_t outstanding_ = 0;  // claimed and not yet taken (or dropped)
  bool closed_ = false;
  bool stopped_ = false;
};

// One reader thread: claims batches and reads them until the queue is closed or stopped.
void read_batches(ReadQueue& queue, const Config& config, size_t batch_patches,
                  ReaderTotals* totals) {
  const int ps = config.patch_size;
  const size_t patch_bytes = static_cast<size_t>(ps) * ps * 3;
  std::vector<uint8_t> read_buffer;
  double read_s = 0, resize_s = 0, encode_s = 0;
  const bool encode = config.layout.encoding == "jpeg";
  while (auto claim = queue.claim()) {
    ActiveJob& active = *claim->job;
    const SlideJob& job = *active.job;
    std::call_once(active.opening, [&] {
      try {
        active.slide.emplace(Slide::open(job.path, config.reader,
                                         static_cast<size_t>(config.tile_cache_mb) << 20));
      } catch (const IoError& e) {
        active.open_error = e.what();
        return;
      }
      if (active.slide->direct_refusal().empty()) return;
      std::lock_guard<std::mutex> lock(totals->mutex);
      if (totals->logged_refusals++ < 3) {
        spdlog::info("slide '{}' read with OpenSlide: the direct reader refuses it: {}",
                     job.slide_id, active.slide->direct_refusal());
      }
    });
    ReadBatch batch;
    batch.first = claim->batch * batch_patches;
    batch.count = static_cast<int>(std::min(batch_patches, job.patches.size() - batch.first));
    if (!active.open_error.empty()) {
      batch.error = active.open_error;
      queue.deliver(*claim, std::move(batch));
      continue;
    }
    const Slide& slide = *active.slide;
    const int rs = job.level.read_size;
    try {
      batch.pixels.resize(batch.count * patch_bytes);
      for (int k = 0; k < batch.count; ++k) {
        const GridPatch& g = job.patches[batch.first + k];
        uint8_t* out = batch.pixels.data() + k * patch_bytes;
        auto t0 = Clock::now();
        if (job.level.resample) {
          read_buffer.resize(static_cast<size_t>(rs) * rs * 3);
          slide.read_rgb(g.x, g.y, job.level.level, rs, rs, read_buffer.data());
          read_s += seconds_since(t0);
          auto t1 = Clock::now();
          resize_patch(read_buffer.data(), rs, out, ps);
          resize_s += seconds_since(t1);
        } else {
          slide.read_rgb(g.x, g.y, job.level.level, ps, ps, out);
          read_s += seconds_since(t0);
        }
      }
    } catch (const std::exception& e) {
      // A read that fails is the slide's failure, whatever threw (tessera's errors name the file).
      batch.pixels.clear();
      batch.error = dynamic_cast<const Error*>(&e) != nullptr
                        ? e.what()
                        : fmt::format("slide '{}': {}", job.path, e.what());
    }
    // Encoded here rather than on the writing thread, so that it runs in parallel. A failure to
    // encode is the rank's, as on the writing thread, not the slide's: it leaves the thread.
    if (encode && batch.error.empty()) {
      auto t0 = Clock::now();
      for (int k = 0; k < batch.count; ++k) {
        batch.jpeg.push_back(encode_jpeg(batch.pixels.data() + k * patch_bytes, ps, ps,
                                         config.layout.jpeg_quality));
      }
      batch.pixels = {};
      encode_s += seconds_since(t0);
    }
    queue.deliver(*claim, std::move(batch));
  }
  std::lock_guard<std::mutex> lock(totals->mutex);
  totals->read_s += read_s;
  totals->resize_s += resize_s;
  totals->encode_s += encode_s;
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

std::string shard_file(int rank) { return patch_shard_file(rank); }

ExtractStats extract_rank(const Manifest& manifest, const PartPlan& part, const Config& config,
                          int rank, int world_size, const std::string& stage_dir,
                          const std::string& fingerprint, const std::string& shard_path) {
  config.stage.faults.apply_file_size_limit();
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
                    rank == 0, stage_file(stage_dir, kProgressFile),
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

  // Reading and decoding run on reader threads of their own, overlapping the shard writes here.
  const size_t batch_patches = static_cast<size_t>(config.read_batch);
  const int reader_count = thread_count(config.reader_threads, "--reader-threads");
  ReaderTotals totals;  // before the queue: the jobs it may still hold add to it when destroyed
  ReadQueue queue(static_cast<size_t>(std::max(config.read_ahead, reader_count)));
  std::mutex error_mutex;
  std::exception_ptr reader_error;
  std::vector<std::thread> readers;
  struct Stop {  // on every exit, the reader threads are stopped and joined
    ReadQueue& queue;
    std::vector<std::thread>& threads;
    ~Stop() {
      queue.stop();
      for (std::thread& t : threads) {
        if (t.joinable()) t.join();
      }
    }
  } stop{queue, readers};
  for (int t = 0; t < reader_count; ++t) {
    readers.emplace_back([&] {
      try {
        read_batches(queue, config, batch_patches, &totals);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mutex);
        if (!reader_error) reader_error = std::current_exception();
        queue.stop();
      }
    });
  }

  // At most two slides' jobs are queued at once: the one being written and the next.
  std::deque<std::shared_ptr<ActiveJob>> pending;
  auto submit = [&] {
    if (auto job = next_job()) {
      pending.push_back(queue.add(std::move(job), batch_patches, &totals));
    } else {
      queue.close();
    }
  };
  submit();
  submit();
  int64_t done = 0;
  const size_t patch_bytes = static_cast<size_t>(config.patch_size) * config.patch_size * 3;
  std::vector<int64_t> ids, xy;  // one batch's columns
  std::vector<int32_t> slides;
  std::vector<float> tissue;
  bool stopped = false;
  while (!pending.empty() && !stopped) {
    const std::shared_ptr<ActiveJob> active = pending.front();
    const SlideJob& job = *active->job;
    for (size_t b = 0; b < active->batches; ++b) {
      std::optional<ReadBatch> batch = queue.take(*active, b);
      if (!batch) {  // a reader failed: its error is rethrown below
        stopped = true;
        break;
      }
      if (!batch->error.empty()) {
        if (config.fail_fast) {
          throw Error(fmt::format("slide '{}' failed (--fail-fast): {}", job.slide_id, batch->error),
                      kExitSlidesFailed);
        }
        spdlog::warn("slide '{}' failed while extracting: {}", job.slide_id, batch->error);
        stats.failed_slides[job.slide] = batch->error;
        done += static_cast<int64_t>(job.patches.size() - batch->first);
        progress.update(done);
        break;
      }
      ids.clear();
      slides.clear();
      xy.clear();
      tissue.clear();
      for (int i = 0; i < batch->count; ++i) {
        const size_t k = batch->first + static_cast<size_t>(i);
        const GridPatch& g = job.patches[k];
        ids.push_back(make_patch_id(job.slide, job.ordinals[k]));
        slides.push_back(job.slide);
        xy.push_back(g.x);
        xy.push_back(g.y);
        tissue.push_back(g.tissue);
      }
      // The batch is written from the reader's buffer, not copied. A failure to write the shard
      // is the rank's, not the slide's: thrown from here.
      for (size_t written = 0, count = static_cast<size_t>(batch->count); written < count;) {
        const size_t n = static_cast<size_t>(config.stage.faults.allowed(
            rank, stats.patches, static_cast<int64_t>(count - written)));
        if (batch->jpeg.empty()) {
          writer.add_rows(n, ids.data() + written, slides.data() + written,
                          xy.data() + 2 * written, tissue.data() + written,
                          batch->pixels.data() + written * patch_bytes);
        } else {
          for (size_t i = written; i < written + n; ++i) {
            writer.add_encoded(ids[i], slides[i], xy[2 * i], xy[2 * i + 1], tissue[i],
                               std::move(batch->jpeg[i]));
          }
        }
        written += n;
        stats.patches += static_cast<int64_t>(n);
        done += static_cast<int64_t>(n);
        config.stage.faults.point(rank, stats.patches, "patches written");
      }
      progress.update(done);
    }
    queue.finish(active);
    pending.pop_front();
    if (!stopped) submit();
  }
  queue.stop();
  for (std::thread& t : readers) t.join();
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
  stats.encode_s = totals.encode_s + writer.encode_seconds();
  stats.write_s = writer.write_seconds();
  stats.total_s = seconds_since(start);
  return stats;
}

}  // namespace tessera::patchgen
