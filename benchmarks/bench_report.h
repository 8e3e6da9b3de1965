// Shared pieces of every benchmark driver's JSON report: machine and version information, the
// command line, resource usage, and median/min/max summaries of repeated measurements. Nothing
// here communicates; drivers gather per-rank values themselves.
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

// {"median", "min", "max", "n"} of `values` (median of an even count: mean of the middle two).
// All null except n = 0 for an empty list.
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
