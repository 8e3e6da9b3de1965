#include "stages/embed/infer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <exception>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/core/bounded_queue.h"
#include "common/core/clock.h"
#include "common/core/error.h"
#include "common/store/embeddings.h"
#include "common/core/progress.h"
#include "stages/embed/work.h"

namespace tessera::embed {

namespace {

using Clock = std::chrono::steady_clock;

struct Job {
  size_t batch = 0;
  int real = 0;  // rows that are not padding
  PreparedBatch input;
};

struct Result {
  size_t batch = 0;
  int real = 0;
  std::vector<float> output;
  double forward_s = 0;
  std::exception_ptr error;
};

}  // namespace

nlohmann::json InferStats::to_json() const {
  return {{"patches", patches},     {"batches", batches},   {"read_s", read_s},
          {"prepare_s", prepare_s}, {"forward_s", forward_s}, {"write_s", write_s},
          {"wait_s", wait_s},       {"total_s", total_s}};
}

std::string check_finite(const float* values, int64_t n, int d, const int64_t* patch_ids) {
  std::vector<int64_t> bad;
  int64_t count = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) {
      if (!std::isfinite(values[i * d + j])) {
        if (bad.size() < 10) bad.push_back(patch_ids[i]);
        ++count;
        break;
      }
    }
  }
  if (bad.empty()) return "";
  return fmt::format("{} embedding(s) contain NaN or Inf, patch ids {}{}", count,
                     fmt::join(bad, ", "), count > 10 ? ", ..." : "");
}

InferStats embed_rows(const IndexInfo& info, const IndexReader& index, const Partition& partition,
                      int rank, const Model& model, PatchSource& source, const Config& config,
                      const std::string& shard_path, const std::string& progress_path) {
  const auto start = Clock::now();
  InferStats stats;
  const int d = model.output_dim();
  const int ps = info.patch_size;
  const size_t patch_bytes = static_cast<size_t>(ps) * ps * 3;
  const int64_t batches = batch_count(partition, rank, config.batch_size);
  EmbeddingShardWriter writer(shard_path, d, config.store_dtype == "fp16", rank,
                              model.fingerprint().dump());
  std::vector<IndexRows> batch_index(static_cast<size_t>(config.prefetch) + 1);

  BoundedQueue<Job> jobs(static_cast<size_t>(config.prefetch));
  BoundedQueue<Result> results(static_cast<size_t>(config.prefetch) + 1);
  std::thread worker([&] {
    while (auto job = jobs.pop()) {
      Result r;
      r.batch = job->batch;
      r.real = job->real;
      try {
        r.output.resize(static_cast<size_t>(job->input.size()) * d);
        auto t0 = Clock::now();
        model.forward(job->input, r.output.data());
        r.forward_s = seconds_since(t0);
      } catch (...) {
        r.error = std::current_exception();
      }
      if (!results.push(std::move(r))) break;
    }
  });
  struct Joiner {
    BoundedQueue<Job>& jobs;
    BoundedQueue<Result>& results;
    std::thread& worker;
    ~Joiner() {
      jobs.close();
      results.close();
      if (worker.joinable()) worker.join();
    }
  } joiner{jobs, results, worker};

  Progress progress("embed", partition.count(rank), {rank, config.stage.part, config.stage.parts},
                    rank == 0, progress_path, config.progress_interval);
  std::vector<uint8_t> pixels(patch_bytes * static_cast<size_t>(config.batch_size));
  // On CUDA every forward pass keeps one shape (cuDNN plans and the caching allocator are reused),
  // so a short last batch is padded with blank patches; on the CPU it simply costs less.
  const bool pad_batches = model.fingerprint().value("device", "cpu") == "cuda";
  int64_t next = 0, written = 0, inflight = 0;
  while (written < batches) {
    while (next < batches && inflight < config.prefetch) {
      auto t0 = Clock::now();
      IndexRows& rows = batch_index[static_cast<size_t>(next) % batch_index.size()];
      rows = index.read_rows(batch_rows(partition, rank, config.batch_size, next));
      std::fill(pixels.begin(), pixels.end(), 0);
      source.read(rows, pixels.data());
      auto t1 = Clock::now();
      stats.read_s += std::chrono::duration<double>(t1 - t0).count();
      Job job;
      job.batch = static_cast<size_t>(next);
      job.real = static_cast<int>(rows.size());
      job.input = model.prepare(pixels.data(), pad_batches ? config.batch_size : job.real, ps);
      stats.prepare_s += seconds_since(t1);
      jobs.push(std::move(job));
      ++next;
      ++inflight;
    }
    auto t0 = Clock::now();
    std::optional<Result> result = results.pop();
    stats.wait_s += seconds_since(t0);
    if (!result) fail("embed: inference thread stopped unexpectedly");
    if (result->error) std::rethrow_exception(result->error);
    --inflight;
    const IndexRows& rows = batch_index[result->batch % batch_index.size()];
    std::string bad = check_finite(result->output.data(), result->real, d, rows.patch_id.data());
    if (!bad.empty()) fail("rank {}: {}", rank, bad);
    auto t1 = Clock::now();
    writer.append(rows.patch_id.data(), rows.slide.data(), rows.coords.data(),
                  result->output.data(), rows.size());
    stats.write_s += seconds_since(t1);
    stats.forward_s += result->forward_s;
    stats.patches += result->real;
    ++stats.batches;
    ++written;
    progress.update(stats.patches);
    config.stage.faults.point(rank, stats.patches, "patches embedded");
  }
  auto t1 = Clock::now();
  writer.close();
  stats.write_s += seconds_since(t1);
  progress.finish(stats.patches);
  stats.total_s = seconds_since(start);
  return stats;
}

}  // namespace tessera::embed
