#include "stages/serve/metrics.h"

#include <unistd.h>

#include <fstream>

#include <fmt/format.h>

namespace tessera::serve {

namespace {

const std::vector<double> kLatencyBounds = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                            0.1,    0.25,  0.5,    1,     2.5,   5,     10};

std::string with(const std::string& labels, const std::string& more) {
  if (labels.empty()) return more;
  return labels + "," + more;
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  size_t i = 0;
  while (i < bounds_.size() && value > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += value;
  ++count_;
}

std::string Histogram::text(const std::string& name, const std::string& labels) const {
  std::string out;
  int64_t cumulative = 0;
  for (size_t i = 0; i < bounds_.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{{}}} {}\n", name, with(labels, fmt::format("le=\"{}\"", bounds_[i])),
                       cumulative);
  }
  out += fmt::format("{}_bucket{{{}}} {}\n", name, with(labels, "le=\"+Inf\""), count_);
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  out += fmt::format("{}_sum{} {}\n{}_count{} {}\n", name, braces, sum_, name, braces, count_);
  return out;
}

void Metrics::request(const std::string& route, int status, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++requests_[{route, status}];
  latency_.try_emplace(route, kLatencyBounds).first->second.observe(seconds);
}

void Metrics::batch(size_t jobs, double seconds) {
  std::lock_guard<std::mutex> lock(mutex_);
  batch_size_.observe(static_cast<double>(jobs));
  batch_seconds_.observe(seconds);
}

void Metrics::set_gauge(const std::string& name, const std::string& help, double value) {
  std::lock_guard<std::mutex> lock(mutex_);
  gauges_[name] = {help, value};
}

std::string Metrics::text() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  out += "# HELP tessera_serve_requests_total HTTP requests answered, by route and status.\n"
         "# TYPE tessera_serve_requests_total counter\n";
  for (const auto& [key, n] : requests_) {
    out += fmt::format("tessera_serve_requests_total{{route=\"{}\",status=\"{}\"}} {}\n", key.first,
                       key.second, n);
  }
  out += "# HELP tessera_serve_errors_total HTTP requests answered with a 4xx or 5xx status.\n"
         "# TYPE tessera_serve_errors_total counter\n";
  std::map<std::string, int64_t> errors;
  for (const auto& [key, n] : requests_) {
    if (key.second >= 400) errors[key.first] += n;
  }
  for (const auto& [route, n] : errors) {
    out += fmt::format("tessera_serve_errors_total{{route=\"{}\"}} {}\n", route, n);
  }
  out += "# HELP tessera_serve_request_duration_seconds Time from a parsed request to its answer.\n"
         "# TYPE tessera_serve_request_duration_seconds histogram\n";
  for (const auto& [route, h] : latency_) {
    out += h.text("tessera_serve_request_duration_seconds", fmt::format("route=\"{}\"", route));
  }
  out += "# HELP tessera_serve_batch_size Searches gathered into one collective round.\n"
         "# TYPE tessera_serve_batch_size histogram\n";
  out += batch_size_.text("tessera_serve_batch_size", "");
  out += "# HELP tessera_serve_batch_duration_seconds Time of one collective search round.\n"
         "# TYPE tessera_serve_batch_duration_seconds histogram\n";
  out += batch_seconds_.text("tessera_serve_batch_duration_seconds", "");
  for (const auto& [name, g] : gauges_) {
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n{} {}\n", name, g.first, name, name, g.second);
  }
  out += "# HELP tessera_serve_resident_memory_bytes Resident set size of rank 0.\n"
         "# TYPE tessera_serve_resident_memory_bytes gauge\n";
  out += fmt::format("tessera_serve_resident_memory_bytes {}\n", resident_bytes());
  return out;
}

int64_t resident_bytes() {
  std::ifstream in("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(in >> size >> resident)) return 0;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

}  // namespace tessera::serve
