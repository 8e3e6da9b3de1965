#include "stages/embed/infer.h"

#include <chrono>
#include <cmath>
#include <csignal>
#include <exception>
#include <optional>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/core/bounded_queue.h"
#include "common/core/error.h"
#include "common/h5/h5.h"
#include "common/core/progress.h"
#include "stages/embed/work.h"

namespace tessera::embed {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

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

InferStats embed_rows(const PatchIndex& index, const std::vector<int64_t>& rows,
                      const Model& model, PatchSource& source, const Config& config, int rank,
                      const std::string& shard_path, const std::string& progress_path) {
  const auto start = Clock::now();
  InferStats stats;
  const int d = model.output_dim();
  const int ps = index.patch_size;
  const size_t patch_bytes = static_cast<size_t>(ps) * ps * 3;
  const auto batches = make_batches(rows, config.batch_size);

  h5::File file = h5::File::open(shard_path, h5::Mode::kCreateTruncate);
  h5::DatasetOptions opts;
  opts.chunk = {256};
  h5::Dataset ids = file.create_appendable("patch_id", h5::Type::kInt64, {}, opts);
  h5::DatasetOptions eopts;
  eopts.chunk = {256, static_cast<hsize_t>(d)};
  h5::Dataset emb = file.create_appendable(
      "embeddings", config.store_dtype == "fp16" ? h5::Type::kFloat16 : h5::Type::kFloat32,
      {static_cast<hsize_t>(d)}, eopts);
  file.set_attr("output_dim", static_cast<int64_t>(d));
  file.set_attr("rank", static_cast<int64_t>(rank));
  file.set_attr("model_fingerprint", model.fingerprint().dump());

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
        r.forward_s = since(t0);
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

  Progress progress("embed (rank 0)", static_cast<int64_t>(rows.size()), rank == 0, progress_path,
                    config.progress_interval);
  std::vector<uint8_t> pixels(patch_bytes * static_cast<size_t>(config.batch_size));
  std::vector<int64_t> batch_ids;
  size_t next = 0, written = 0, inflight = 0;
  while (written < batches.size()) {
    while (next < batches.size() && inflight < static_cast<size_t>(config.prefetch)) {
      const auto& batch = batches[next];
      auto t0 = Clock::now();
      std::fill(pixels.begin(), pixels.end(), 0);
      source.read(batch, pixels.data());
      auto t1 = Clock::now();
      stats.read_s += std::chrono::duration<double>(t1 - t0).count();
      Job job;
      job.batch = next;
      job.real = static_cast<int>(batch.size());
      job.input = model.prepare(pixels.data(), config.batch_size, ps);
      stats.prepare_s += since(t1);
      jobs.push(std::move(job));
      ++next;
      ++inflight;
    }
    auto t0 = Clock::now();
    std::optional<Result> result = results.pop();
    stats.wait_s += since(t0);
    if (!result) fail("embed: inference thread stopped unexpectedly");
    if (result->error) std::rethrow_exception(result->error);
    --inflight;
    const auto& batch = batches[result->batch];
    batch_ids.clear();
    for (int64_t i : batch) batch_ids.push_back(index.patch_id[i]);
    std::string bad = check_finite(result->output.data(), result->real, d, batch_ids.data());
    if (!bad.empty()) fail("rank {}: {}", rank, bad);
    auto t1 = Clock::now();
    ids.append(batch_ids.data(), batch_ids.size());
    emb.append_floats(result->output.data(), static_cast<hsize_t>(result->real));
    stats.write_s += since(t1);
    stats.forward_s += result->forward_s;
    stats.patches += result->real;
    ++stats.batches;
    ++written;
    progress.update(stats.patches);
    if (rank == config.debug_kill_rank && config.debug_kill_after >= 0 &&
        stats.patches >= config.debug_kill_after) {
      spdlog::warn("--debug-kill-after {} reached: killing rank {} with SIGKILL",
                   config.debug_kill_after, rank);
      spdlog::default_logger()->flush();
      std::raise(SIGKILL);
    }
  }
  auto t1 = Clock::now();
  ids.close();
  emb.close();
  file.close();
  stats.write_s += since(t1);
  progress.finish(stats.patches);
  stats.total_s = since(start);
  return stats;
}

}  // namespace tessera::embed
