#include "benchmarks/bench_report.h"

#include <hdf5.h>
#include <mpi.h>
#include <sys/resource.h>
#include <sys/utsname.h>

#include <algorithm>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/core/fs.h"
#include "common/core/version.h"

namespace tessera::bench {

namespace {

// The value after "key:" on the first line of `path` that starts with `key`, trimmed; "" if none.
std::string proc_field(const std::string& path, const std::string& key) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto first = line.find_first_not_of(" \t", colon + 1);
    return first == std::string::npos ? "" : line.substr(first);
  }
  return "";
}

nlohmann::json or_null(const std::string& s) {
  return s.empty() ? nlohmann::json() : nlohmann::json(s);
}

void summarize_into(const nlohmann::json& repetitions, const nlohmann::json::json_pointer& at,
                    const nlohmann::json& shape, nlohmann::json& out) {
  for (const auto& [key, value] : shape.items()) {
    const auto field = at / key;
    if (value.is_object()) {
      summarize_into(repetitions, field, value, out);
    } else if (value.is_number()) {
      std::vector<double> values;
      for (const auto& rep : repetitions) {
        if (rep.contains(field) && rep[field].is_number()) {
          values.push_back(rep[field].get<double>());
        }
      }
      out[field] = summarize(values);
    }
  }
}

}  // namespace

nlohmann::json load_average() {
  std::ifstream in("/proc/loadavg");
  double a = 0, b = 0, c = 0;
  if (!(in >> a >> b >> c)) return nullptr;
  return {a, b, c};
}

nlohmann::json machine_info() {
  nlohmann::json m;
  utsname u{};
  if (uname(&u) == 0) {
    m["host"] = u.nodename;
    m["kernel"] = std::string(u.sysname) + " " + u.release;
    m["arch"] = u.machine;
  }
  m["cpu_model"] = or_null(proc_field("/proc/cpuinfo", "model name"));
  m["logical_cores"] = std::thread::hardware_concurrency();
  const std::string mem = proc_field("/proc/meminfo", "MemTotal");  // "24567890 kB"
  m["memory_gib"] =
      mem.empty() ? nlohmann::json() : nlohmann::json(std::stod(mem) / (1024.0 * 1024.0));
  m["load_average"] = load_average();
  return m;
}

nlohmann::json versions(const std::map<std::string, std::string>& extra) {
  nlohmann::json v;
  v["tessera"] = version();
  v["git_revision"] = git_revision();
  v["build_type"] = TESSERA_BUILD_TYPE;
  v["compiler"] = TESSERA_CXX_COMPILER;
  unsigned major = 0, minor = 0, release = 0;
  H5get_libversion(&major, &minor, &release);
  v["hdf5"] = std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(release);
  char mpi[MPI_MAX_LIBRARY_VERSION_STRING] = {};
  int len = 0;
  if (MPI_Get_library_version(mpi, &len) == MPI_SUCCESS) {
    std::string text(mpi, static_cast<size_t>(len));
    v["mpi"] = text.substr(0, text.find_first_of("\r\n,"));
  }
  for (const auto& [name, value] : extra) v[name] = value;
  return v;
}

nlohmann::json command_line(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  std::ostringstream joined;
  for (size_t i = 0; i < args.size(); ++i) joined << (i ? " " : "") << args[i];
  return {{"argv", args}, {"joined", joined.str()}};
}

nlohmann::json resource_usage() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto seconds = [](const timeval& t) { return t.tv_sec + t.tv_usec / 1e6; };
  return {{"peak_rss_mb", u.ru_maxrss / 1024.0},  // ru_maxrss is in KiB on Linux
          {"minor_page_faults", u.ru_minflt},
          {"major_page_faults", u.ru_majflt},
          {"user_s", seconds(u.ru_utime)},
          {"system_s", seconds(u.ru_stime)}};
}

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec +
         u.ru_stime.tv_usec / 1e6;
}

po::options_description passed_through(const std::string& caption,
                                       const po::options_description& stage,
                                       const std::set<std::string>& set_by_bench) {
  po::options_description pass(caption);
  for (const auto& option : stage.options()) {
    if (!set_by_bench.count(option->long_name())) pass.add(option);
  }
  return pass;
}

po::variables_map passed_through_values(const po::variables_map& values,
                                        const po::options_description& stage,
                                        const std::set<std::string>& set_by_bench) {
  po::variables_map v;
  for (const auto& option : stage.options()) {
    if (set_by_bench.count(option->long_name())) continue;
    auto it = values.find(option->long_name());
    if (it != values.end()) v.emplace(it->first, it->second);
  }
  return v;
}

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

nlohmann::json peak_rss_mb_since_reset() {
  const std::string hwm = proc_field("/proc/self/status", "VmHWM");  // "123456 kB"
  return hwm.empty() ? nlohmann::json() : nlohmann::json(std::stod(hwm) / 1024.0);
}

nlohmann::json summarize(std::vector<double> values) {
  if (values.empty()) return {{"median", nullptr}, {"min", nullptr}, {"max", nullptr}, {"n", 0}};
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {{"median", median}, {"min", values.front()}, {"max", values.back()}, {"n", n}};
}

nlohmann::json summarize_repetitions(const nlohmann::json& repetitions) {
  nlohmann::json out = nlohmann::json::object();
  if (!repetitions.is_array() || repetitions.empty()) return out;
  summarize_into(repetitions, nlohmann::json::json_pointer(), repetitions.front(), out);
  return out;
}

void write_report(const std::string& path, const nlohmann::json& report) {
  atomic_write_file(path, report.dump(2) + "\n");
}

}  // namespace tessera::bench
