#include "benchmarks/bench_report.h"

#include <fcntl.h>
#include <hdf5.h>
#include <mpi.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <stdexcept>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "common/core/error.h"
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
  if (values.empty()) {
    return {{"median", nullptr}, {"mean", nullptr}, {"stddev", nullptr},
            {"min", nullptr},    {"max", nullptr},  {"n", 0}};
  }
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  const double median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  double sum = 0;
  for (double v : values) sum += v;
  const double mean = sum / static_cast<double>(n);
  nlohmann::json stddev;
  if (n >= 2) {
    double squares = 0;
    for (double v : values) squares += (v - mean) * (v - mean);
    stddev = std::sqrt(squares / static_cast<double>(n - 1));
  }
  return {{"median", median},        {"mean", mean}, {"stddev", stddev},
          {"min", values.front()}, {"max", values.back()}, {"n", n}};
}

nlohmann::json summarize_repetitions(const nlohmann::json& repetitions) {
  nlohmann::json out = nlohmann::json::object();
  if (!repetitions.is_array() || repetitions.empty()) return out;
  summarize_into(repetitions, nlohmann::json::json_pointer(), repetitions.front(), out);
  return out;
}

nlohmann::json read_pressure(const std::string& path) {
  std::ifstream in(path);
  if (!in) return nullptr;
  nlohmann::json out = {{"some", nullptr}, {"full", nullptr}};
  bool any = false;
  std::string line;
  while (std::getline(in, line)) {  // "some avg10=0.00 avg60=0.00 avg300=0.00 total=12345"
    std::istringstream words(line);
    std::string kind, word;
    words >> kind;
    if (kind != "some" && kind != "full") continue;
    nlohmann::json fields = {{"avg10", nullptr}, {"total_us", nullptr}};
    while (words >> word) {
      const auto eq = word.find('=');
      if (eq == std::string::npos) continue;
      const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
      try {
        if (key == "avg10") fields["avg10"] = std::stod(value);
        if (key == "total") fields["total_us"] = std::stoll(value);
      } catch (const std::exception&) {
      }
    }
    out[kind] = fields;
    any = true;
  }
  return any ? out : nlohmann::json();
}

std::string cgroup_v2_dir() {
  std::string relative;
  {
    std::ifstream in("/proc/self/cgroup");
    std::string line;
    while (std::getline(in, line)) {
      if (line.rfind("0::", 0) == 0) relative = line.substr(3);
    }
  }
  if (relative.empty()) return "";
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    // "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw"
    const auto dash = line.find(" - ");
    if (dash == std::string::npos) continue;
    std::istringstream tail(line.substr(dash + 3));
    std::string fstype;
    tail >> fstype;
    if (fstype != "cgroup2") continue;
    std::istringstream head(line.substr(0, dash));
    std::string id, parent, device, root, mount_point;
    head >> id >> parent >> device >> root >> mount_point;
    if (relative == "/") return mount_point;
    return mount_point + relative;
  }
  return "";
}

nlohmann::json pressure_snapshot() {
  const std::string dir = cgroup_v2_dir();
  nlohmann::json cgroup = {{"dir", or_null(dir)}, {"memory", nullptr}, {"io", nullptr}};
  if (!dir.empty()) {
    cgroup["memory"] = read_pressure(dir + "/memory.pressure");
    cgroup["io"] = read_pressure(dir + "/io.pressure");
  }
  return {{"host",
           {{"memory", read_pressure("/proc/pressure/memory")},
            {"io", read_pressure("/proc/pressure/io")}}},
          {"cgroup", cgroup}};
}

nlohmann::json pressure_delta(const nlohmann::json& before, const nlohmann::json& after) {
  nlohmann::json out = after;
  for (const char* scope : {"host", "cgroup"}) {
    for (const char* resource : {"memory", "io"}) {
      for (const char* kind : {"some", "full"}) {
        const auto at = nlohmann::json::json_pointer() / scope / resource / kind / "total_us";
        if (!out.contains(at)) continue;
        const bool known = before.contains(at) && before[at].is_number_integer() &&
                           after[at].is_number_integer();
        out[at] = known ? nlohmann::json(after[at].get<int64_t>() - before[at].get<int64_t>())
                        : nlohmann::json();
      }
    }
  }
  return out;
}

RepetitionProbe::RepetitionProbe() {
  reset_peak_rss();
  pressure_ = pressure_snapshot();
  usage_ = resource_usage();
}

nlohmann::json RepetitionProbe::finish() const {
  const nlohmann::json usage = resource_usage();
  const nlohmann::json pressure = pressure_snapshot();
  const auto delta = [&](const char* key) {
    return usage[key].get<int64_t>() - usage_[key].get<int64_t>();
  };
  return {{"minor_page_faults", delta("minor_page_faults")},
          {"major_page_faults", delta("major_page_faults")},
          {"peak_rss_mb", peak_rss_mb_since_reset()},
          {"pressure", pressure_delta(pressure_, pressure)}};
}

void check_cache_policy(const std::string& policy) {
  if (policy != kCacheWarm && policy != kCacheFresh && policy != kCacheDrop) {
    fail<InvalidInput>("invalid --cache '{}': must be warm, fresh or drop", policy);
  }
}

nlohmann::json cache_policy_field(const std::string& policy) {
  std::string note;
  if (policy == kCacheWarm) {
    note = "input handles opened once and kept open across repetitions; after the first read the "
           "inputs are served from the page cache";
  } else if (policy == kCacheFresh) {
    note = "input handles (HDF5 files, slides) reopened for every repetition, outside the timer; "
           "the page cache is left as it is, so file contents are usually still cached";
  } else {
    note = "input handles reopened for every repetition, and posix_fadvise(POSIX_FADV_DONTNEED) "
           "on every input file after closing it, outside the timer: advice, not proof of a cold "
           "cache (the kernel may keep pages; see resident_before/after of each drop; shared or "
           "remote file systems and the device's own cache are untouched)";
  }
  return {{"cache_policy", policy}, {"cache_note", note}};
}

namespace {

// Fraction of the pages of open file `fd` of `bytes` in the page cache; null if not measurable.
nlohmann::json resident_fraction(int fd, off_t bytes) {
  if (bytes <= 0) return nullptr;
  void* map = mmap(nullptr, static_cast<size_t>(bytes), PROT_READ, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) return nullptr;
  const long page = sysconf(_SC_PAGESIZE);
  const size_t pages = (static_cast<size_t>(bytes) + page - 1) / page;
  std::vector<unsigned char> resident(pages);
  nlohmann::json out;
  if (mincore(map, static_cast<size_t>(bytes), resident.data()) == 0) {
    size_t in = 0;
    for (unsigned char r : resident) in += r & 1;
    out = static_cast<double>(in) / static_cast<double>(pages);
  }
  munmap(map, static_cast<size_t>(bytes));
  return out;
}

}  // namespace

nlohmann::json drop_page_cache(const std::vector<std::string>& paths) {
  nlohmann::json out = nlohmann::json::array();
  for (const std::string& path : paths) {
    nlohmann::json entry = {{"path", path},         {"bytes", nullptr},
                            {"advice", nullptr},    {"resident_before", nullptr},
                            {"resident_after", nullptr}};
    const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      entry["advice"] = fmt::format("open failed: {}", std::strerror(errno));
      out.push_back(entry);
      continue;
    }
    struct stat st {};
    if (fstat(fd, &st) == 0) {
      entry["bytes"] = static_cast<int64_t>(st.st_size);
      entry["resident_before"] = resident_fraction(fd, st.st_size);
    }
    const int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // returns the error number
    entry["advice"] = rc == 0 ? std::string("done")
                              : fmt::format("posix_fadvise failed: {}", std::strerror(rc));
    if (entry["bytes"].is_number()) {
      entry["resident_after"] = resident_fraction(fd, st.st_size);
    }
    close(fd);
    out.push_back(entry);
  }
  return out;
}

nlohmann::json measured_field(const Measured& m) {
  return {{"modes", m.modes}, {"metric", m.metric}, {"higher_is_better", m.higher_is_better}};
}

nlohmann::json load_report(const std::string& path) {
  const std::string text = read_file(path);
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("'{}' is not a JSON report: {}", path, e.what());
  }
}

void write_report(const std::string& path, const nlohmann::json& report) {
  atomic_write_file(path, report.dump(2) + "\n");
}

}  // namespace tessera::bench
