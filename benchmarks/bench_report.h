// Shared pieces of every benchmark driver's JSON report: machine and version information, the
// command line, resource usage, summaries of repeated measurements, page faults and pressure
// stalls around a repetition, page-cache advice for input files, and the comparison of two
// reports (bench_report_compare.cpp). Nothing here communicates; drivers gather per-rank values
// themselves.
//
// A driver's report, as compare_reports() reads it (docs/performance.md, "Benchmark harness"):
//   "parameters"   what was run (the driver's parameter block; compared for equality)
//   "machine", "versions", "gpu" (optional)   where it ran (compared: see compare_reports)
//   "repetitions"  an array of timed repetitions, each holding the measured modes (see Measured)
//   "measured"     measured_field(): where in a repetition the modes and their metric are
//   "output"       results; fields named *sha256*, *xxh3* or *hash* are compared for equality
//   "cache_policy", "cache_note"   cache_policy_field() (not compared: what a comparison may vary)
#pragma once

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/core/options.h"

namespace tessera::bench {

// The machine: host name, kernel, CPU model (first "model name" of /proc/cpuinfo), logical cores
// (std::thread::hardware_concurrency), total memory in GiB (/proc/meminfo) and the current load
// average. Fields that cannot be read are null; never throws.
nlohmann::json machine_info();

// The 1, 5 and 15 minute load averages from /proc/loadavg as a JSON array of three numbers, or
// null when unreadable.
nlohmann::json load_average();

// Versions: tessera version() and git_revision(), the build type and compiler this file was built
// with, HDF5 (H5get_libversion) and the MPI library (MPI_Get_library_version, first line; MPI must
// be initialised). `extra` adds component versions known only to the caller (OpenSlide, libtorch)
// under their names.
nlohmann::json versions(const std::map<std::string, std::string>& extra = {});

// argv as a JSON array of strings, and the same joined with single spaces.
nlohmann::json command_line(int argc, char** argv);

// This process's resource usage so far (getrusage RUSAGE_SELF): peak_rss_mb (ru_maxrss),
// minor_page_faults, major_page_faults, user_s and system_s CPU seconds.
nlohmann::json resource_usage();

// User plus system CPU seconds of this process so far (getrusage RUSAGE_SELF, all threads).
double cpu_seconds();

// Resets the kernel's peak-RSS mark of this process (writes "5" to /proc/self/clear_refs, Linux
// 4.0+) so that peak_rss_mb_since_reset() measures one phase. Returns false when not possible.
bool reset_peak_rss();

// VmHWM of /proc/self/status in MiB: the peak RSS since the last reset_peak_rss() or process
// start; null when unreadable.
nlohmann::json peak_rss_mb_since_reset();

// {"median", "mean", "stddev", "min", "max", "n"} of `values` (median of an even count: mean of
// the middle two; stddev is the sample standard deviation, null for n < 2). All null except n = 0
// for an empty list.
nlohmann::json summarize(std::vector<double> values);

// Summaries of every numeric field across `repetitions` (a JSON array of objects with the same
// shape): the result mirrors the objects' structure with each number replaced by summarize() of
// that field over the repetitions. Nested objects are followed; arrays, strings and booleans
// are left out.
nlohmann::json summarize_repetitions(const nlohmann::json& repetitions);

// A driver runs a stage with the stage's own options, except those it sets itself
// (`set_by_bench`). passed_through() is the stage's options minus those, under `caption`, for the
// driver's command line; passed_through_values() copies their parsed values, to which the driver
// then adds its own before building the stage's Config.
po::options_description passed_through(const std::string& caption,
                                       const po::options_description& stage,
                                       const std::set<std::string>& set_by_bench);
po::variables_map passed_through_values(const po::variables_map& values,
                                        const po::options_description& stage,
                                        const std::set<std::string>& set_by_bench);

// Pressure stall information of one PSI file (/proc/pressure/memory, a cgroup's io.pressure, ...):
// {"some": {"avg10", "total_us"}, "full": {...}}, a line missing from the file null; null when the
// file cannot be read. total_us counts microseconds stalled since boot (or cgroup creation).
nlohmann::json read_pressure(const std::string& path);

// This process's cgroup v2 directory: the "0::" line of /proc/self/cgroup below the cgroup2 mount
// of /proc/self/mountinfo; "" when there is none (no cgroup v2 or not mounted).
std::string cgroup_v2_dir();

// Host and cgroup memory and io pressure now: {"host": {"memory", "io"}, "cgroup": {"dir",
// "memory", "io"}}, each read_pressure() (null where not readable).
nlohmann::json pressure_snapshot();

// `after` with every total_us replaced by total_us(after) - total_us(before) (null where either is
// null) and avg10 kept as read at the end: the stall time over the interval.
nlohmann::json pressure_delta(const nlohmann::json& before, const nlohmann::json& after);

// What happened to the process and the machine around one repetition, collected outside its
// timed region: construct it before the repetition (this resets the peak-RSS mark), call
// finish() after. finish() gives {"minor_page_faults", "major_page_faults" (getrusage deltas of
// the whole process), "peak_rss_mb" (VmHWM since the reset, null if unreadable), "pressure"
// (pressure_delta over the repetition)}. Process-wide: do not overlap two probes in one process.
class RepetitionProbe {
 public:
  RepetitionProbe();
  nlohmann::json finish() const;

 private:
  nlohmann::json usage_;
  nlohmann::json pressure_;
};

// Input cache policies of a driver's --cache option: kCacheWarm keeps input handles open across
// repetitions (files stay in the page cache after the first read); kCacheFresh reopens them for
// every repetition; kCacheDrop also calls drop_page_cache() on the input files after closing them.
inline constexpr const char* kCacheWarm = "warm";
inline constexpr const char* kCacheFresh = "fresh";
inline constexpr const char* kCacheDrop = "drop";

// Throws InvalidInput naming the option unless `policy` is warm, fresh or drop.
void check_cache_policy(const std::string& policy);

// {"cache_policy": policy, "cache_note": what the policy does and does not guarantee} for the
// top level of a report (drop is advice to the kernel, not proof of a cold cache).
nlohmann::json cache_policy_field(const std::string& policy);

// Advises the kernel to drop the cached pages of each file (posix_fadvise POSIX_FADV_DONTNEED over
// the whole file; call it with the files closed, outside any timer). Returns one object per path:
// {"path", "bytes", "advice" ("done" or the error), "resident_before", "resident_after"
// (fractions of the file's pages in the page cache, by mincore; null where not measurable)}.
// Dirty pages are not written back, so they stay. Never throws; not collective (the page cache
// is per host: every host's ranks must call it).
nlohmann::json drop_page_cache(const std::vector<std::string>& paths);

// Where a report's measured values are: in every element of "repetitions", the object at JSON
// pointer `modes` ("" for the repetition itself) holds one object per measured mode, each with a
// number `metric` (e.g. "tiles_per_s"). `higher_is_better` says which way a ratio > 1 points.
struct Measured {
  std::string modes = "/modes";
  std::string metric = "tiles_per_s";
  bool higher_is_better = true;
};

// The report's "measured" field for `m`.
nlohmann::json measured_field(const Measured& m);

// Reads a JSON report. Throws IoError naming the path when unreadable or not JSON.
nlohmann::json load_report(const std::string& path);

// Compares report `after` with report `before` (both of one driver). Refuses, giving
// {"refused": reason, "differences": [{"field", "before", "after"}, ...]}, when the "parameters"
// differ, the environment differs (machine cpu_model, arch and logical_cores; every "versions"
// entry except git_revision; "gpu" models when present), an "output" hash field differs (see the
// file comment), the "measured" fields differ or a report has no measured modes. Otherwise gives
// {"refused": null, "metric", "higher_is_better", "modes": {mode: {"ratio_of_medians" (after /
// before), "before", "after" (summarize() of the metric over each report's repetitions)}}} for
// the modes both reports measured. "cache_policy" of each side is copied in as information.
// `allowed` names parameters (as "/parameters/NAME") whose difference is expected, e.g. an option
// the later revision added: such differences are listed under "allowed_differences" instead of
// refusing. Nothing but parameters can be allowed; output hashes and the environment never.
// Pure; never throws on malformed reports (a missing block is a difference); throws
// std::invalid_argument for an `allowed` entry outside "/parameters/".
nlohmann::json compare_reports(const nlohmann::json& before, const nlohmann::json& after,
                               const std::vector<std::string>& allowed = {});

// compare_reports()'s result as lines of text for a log or terminal: the refusal and its
// differences, or per mode "ratio R (after median [min, max] sd S vs before median [min, max]
// sd S)".
std::string format_comparison(const nlohmann::json& comparison);

// Writes `report` as indented JSON to `path` atomically (parent folders are created). Throws
// IoError naming the path.
void write_report(const std::string& path, const nlohmann::json& report);

// Wall-clock seconds since construction (steady clock).
class Stopwatch {
 public:
  Stopwatch() : start_(std::chrono::steady_clock::now()) {}
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace tessera::bench
