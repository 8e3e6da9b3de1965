#include "common/core/progress.h"

#include <spdlog/spdlog.h>

#include "common/core/fs.h"

namespace tessera {

nlohmann::json ProgressRecord::to_json() const {
  return {{"label", label}, {"done", done},     {"total", total}, {"elapsed_s", elapsed_s},
          {"rate", rate},   {"eta_s", eta_s},   {"time", utc_timestamp()}};
}

std::string ProgressRecord::to_text() const {
  double percent = total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(total) : 100;
  std::string eta = eta_s < 0 ? "?" : fmt::format("{:.0f}s", eta_s);
  return fmt::format("{}: {}/{} ({:.1f}%), {:.1f}/s, ETA {}", label, done, total, percent, rate,
                     eta);
}

ProgressRecord make_progress_record(const std::string& label, int64_t done, int64_t total,
                                    double elapsed_s) {
  ProgressRecord r;
  r.label = label;
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

Progress::Progress(std::string label, int64_t total, bool active, const std::string& json_path,
                   double interval_s)
    : label_(std::move(label)), total_(total), active_(active), interval_s_(interval_s),
      start_(std::chrono::steady_clock::now()), last_(start_) {
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
  ProgressRecord record = make_progress_record(label_, done, total_, elapsed);
  spdlog::info("{}", record.to_text());
  if (json_ != nullptr) {
    std::string line = record.to_json().dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), json_);
    std::fflush(json_);
  }
}

}  // namespace tessera
