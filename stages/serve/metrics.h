// serve's counters and histograms, written in the Prometheus text exposition format (base units in
// the names: seconds, bytes). Thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace tessera::serve {

class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void observe(double value);
  // The series `name`_bucket / _sum / _count with `labels` (`key="value",...` or "").
  std::string text(const std::string& name, const std::string& labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<int64_t> counts_;  // per bound, not cumulative; the last is +Inf
  double sum_ = 0;
  int64_t count_ = 0;
};

class Metrics {
 public:
  // One finished request of route `route` (a fixed name such as "search", never a path).
  void request(const std::string& route, int status, double seconds);
  void batch(size_t jobs, double seconds);
  // Gauges set by the owner before export.
  void set_gauge(const std::string& name, const std::string& help, double value);
  // Everything in the text format, with the process's resident set size.
  std::string text() const;

 private:
  mutable std::mutex mutex_;
  std::map<std::pair<std::string, int>, int64_t> requests_;  // (route, status)
  std::map<std::string, Histogram> latency_;
  Histogram batch_size_{{1, 2, 4, 8, 16, 32, 64, 128, 256}};
  Histogram batch_seconds_{{0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1}};
  std::map<std::string, std::pair<std::string, double>> gauges_;
};

// The process's resident set size in bytes (/proc/self/statm), 0 when unknown.
int64_t resident_bytes();

}  // namespace tessera::serve
