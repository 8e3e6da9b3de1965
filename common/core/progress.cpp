#include "common/core/progress.h"

#include <cmath>

#include <spdlog/spdlog.h>

#include "common/core/fs.h"

namespace tessera {

nlohmann::json ProgressRecord::to_json() const {
  return {{"label", label},
          {"rank", source.rank},
          {"part", source.part},
          {"parts", source.parts},
          {"done", done},
          {"total", total},
          {"elapsed_s", elapsed_s},
          {"rate", rate},
          {"eta_s", eta_s},
          {"time", time.empty() ? utc_timestamp() : time}};
}

ProgressRecord ProgressRecord::from_json(const nlohmann::json& j) {
  ProgressRecord r;
  r.label = j.value("label", "");
  r.source.rank = j.value("rank", 0);
  r.source.part = j.value("part", 0);
  r.source.parts = j.value("parts", 1);
  r.done = j.value("done", int64_t{0});
  r.total = j.value("total", int64_t{0});
  r.elapsed_s = j.value("elapsed_s", 0.0);
  r.rate = j.value("rate", 0.0);
  r.eta_s = j.value("eta_s", -1.0);
  r.time = j.value("time", "");
  return r;
}

std::string format_hms(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const auto total = static_cast<int64_t>(std::llround(seconds));
  return fmt::format("{}:{:02d}:{:02d}", total / 3600, (total / 60) % 60, total % 60);
}

std::string ProgressRecord::to_text() const {
  double percent = total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100;
  std::string where = source.parts > 1 ? fmt::format("rank {}, part {} of {}", source.rank,
                                                     source.part, source.parts)
                                       : fmt::format("rank {}", source.rank);
  return fmt::format("{} ({}): {}/{} ({:.1f}%), {:.1f}/s, ETA {}", label, where, done, total,
                     percent, rate, format_hms(eta_s));
}

ProgressRecord make_progress_record(const std::string& label, int64_t done, int64_t total,
                                    double elapsed_s, ProgressSource source) {
  ProgressRecord r;
  r.label = label;
  r.source = source;
  r.done = done;
  r.total = total;
  r.elapsed_s = elapsed_s;
  r.rate = elapsed_s > 0 ? static_cast<double>(done) / elapsed_s : 0;
  if (done >= total) {
    r.eta_s = 0;
  } else if (r.rate > 0) {
    r.eta_s = static_cast<double>(total - done) / r.rate;
  }
  return r;
}

Progress::Progress(std::string label, int64_t total, ProgressSource source, bool active,
                   const std::string& json_path, double interval_s)
    : label_(std::move(label)), source_(source), total_(total), active_(active),
      interval_s_(interval_s), start_(std::chrono::steady_clock::now()), last_(start_) {
  if (active_ && !json_path.empty()) {
    json_ = std::fopen(json_path.c_str(), "a");
    if (json_ == nullptr) spdlog::warn("cannot append progress to '{}'", json_path);
  }
}

Progress::~Progress() {
  if (json_ != nullptr) std::fclose(json_);
}

void Progress::update(int64_t done) {
  if (!active_) return;
  auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_).count() < interval_s_) return;
  last_ = now;
  report(done);
}

void Progress::finish(int64_t done) {
  if (active_) report(done);
}

void Progress::report(int64_t done) {
  double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  ProgressRecord record = make_progress_record(label_, done, total_, elapsed, source_);
  spdlog::info("{}", record.to_text());
  if (json_ != nullptr) {
    std::string line = record.to_json().dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), json_);
    std::fflush(json_);
  }
}

}  // namespace tessera
