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

// Where a loop runs: the reporting rank and the part of the cohort its stage works on.
struct ProgressSource {
  int rank = 0;
  int part = 0;
  int parts = 1;
};

// One progress record. `rate` is units per second since start; `eta_s` is negative when unknown.
struct ProgressRecord {
  std::string label;
  ProgressSource source;
  int64_t done = 0;
  int64_t total = 0;
  double elapsed_s = 0;
  double rate = 0;
  double eta_s = -1;
  std::string time;  // UTC of the record; to_json() stamps the current time when empty
  // {"label", "rank", "part", "parts", "done", "total", "elapsed_s", "rate", "eta_s", "time"}.
  nlohmann::json to_json() const;
  // The inverse of to_json(); fields missing from older files keep their defaults (rank 0,
  // part 0 of 1). Throws nlohmann::json::exception for fields of the wrong type.
  static ProgressRecord from_json(const nlohmann::json& j);
  // "extract (rank 3, part 1 of 4): 1200/5000 (24.0%), 310.2/s, ETA 0:00:12"; the part is left
  // out when parts == 1, the ETA is "?" when unknown.
  std::string to_text() const;
};

// Seconds as "h:mm:ss" (hours unbounded, rounded to the nearest second): 75 -> "0:01:15",
// 90061 -> "25:01:01". Negative or non-finite values give "?".
std::string format_hms(double seconds);

// Computes a record from counts and elapsed time (pure, for tests).
ProgressRecord make_progress_record(const std::string& label, int64_t done, int64_t total,
                                    double elapsed_s, ProgressSource source = {});

// Reports progress of one rank's loop. An inactive reporter (ranks other than 0) does nothing.
// Not thread-safe: call from one thread.
class Progress {
 public:
  // `source` says which rank and part the records are of. `json_path` empty: no JSON lines. The
  // file is opened for appending.
  Progress(std::string label, int64_t total, ProgressSource source, bool active,
           const std::string& json_path, double interval_s = 5.0);
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
  ProgressSource source_;
  int64_t total_;
  bool active_;
  double interval_s_;
  std::FILE* json_ = nullptr;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_;
};

}  // namespace tessera
