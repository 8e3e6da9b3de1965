// Progress reporting for long loops: counts, rate and ETA logged at most every `interval`
// seconds, and the same record appended as one JSON line to a progress file, so dashboards and
// the status command can follow a job without parsing logs.
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

namespace tessera {

// One progress record. `rate` is units per second since start; `eta_s` is negative when unknown.
struct ProgressRecord {
  std::string label;
  int64_t done = 0;
  int64_t total = 0;
  double elapsed_s = 0;
  double rate = 0;
  double eta_s = -1;
  nlohmann::json to_json() const;
  std::string to_text() const;  // "extract: 1200/5000 patches (24.0%), 310.2/s, ETA 12s"
};

// Computes a record from counts and elapsed time (pure, for tests).
ProgressRecord make_progress_record(const std::string& label, int64_t done, int64_t total,
                                    double elapsed_s);

// Reports progress of one rank's loop. An inactive reporter (ranks other than 0) does nothing.
// Not thread-safe: call from one thread.
class Progress {
 public:
  // `json_path` empty: no JSON lines. The file is opened for appending.
  Progress(std::string label, int64_t total, bool active, const std::string& json_path,
           double interval_s = 5.0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Reports when at least `interval_s` passed since the last report.
  void update(int64_t done);
  // Reports the final state unconditionally.
  void finish(int64_t done);

 private:
  void report(int64_t done);
  std::string label_;
  int64_t total_;
  bool active_;
  double interval_s_;
  std::FILE* json_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace tessera
