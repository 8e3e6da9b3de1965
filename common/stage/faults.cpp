#include "common/stage/faults.h"

#include <sys/resource.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include <spdlog/spdlog.h>

#include "common/core/error.h"

namespace tessera {

int64_t Faults::allowed(int rank, int64_t done, int64_t n) const {
  if (rank != kill_rank || kill_after < 0) return n;
  const int64_t left = kill_after - done;
  return left > 0 && left < n ? left : n;
}

void Faults::point(int rank, int64_t done, const char* unit) const {
  if (slow_io_s > 0) std::this_thread::sleep_for(std::chrono::duration<double>(slow_io_s));
  if (rank != kill_rank || kill_after < 0 || done < kill_after) return;
  if (fail_io) {
    fail<IoError>("injected I/O error (--debug-fail-io) on rank {} after {} {}", rank, done, unit);
  }
  spdlog::warn("--debug-kill-after {} reached: killing rank {} with SIGKILL", kill_after, rank);
  spdlog::default_logger()->flush();
  std::raise(SIGKILL);
}

void Faults::apply_file_size_limit() const {
  if (file_size_limit <= 0) return;
  std::signal(SIGXFSZ, SIG_IGN);  // a write beyond the limit fails with EFBIG instead
  struct rlimit limit {};
  getrlimit(RLIMIT_FSIZE, &limit);
  limit.rlim_cur = static_cast<rlim_t>(file_size_limit);
  if (setrlimit(RLIMIT_FSIZE, &limit) != 0) {
    fail<IoError>("--debug-file-size-limit: setrlimit failed: {}", std::strerror(errno));
  }
}

void add_fault_options(OptionTable& table, const char* unit) {
  constexpr OptionKind kDebug = OptionKind::kDebug;
  const std::string after_help = std::string("... after this many ") + unit;  // copied by po
  table.group("Fault injection (tests only)")
      ("debug-kill-rank", kDebug, po::value<int>()->default_value(-1),
       "rank that fails (SIGKILL, or an I/O error with --debug-fail-io)")
      ("debug-kill-after", kDebug, po::value<int64_t>()->default_value(-1), after_help.c_str())
      ("debug-fail-io", kDebug, po::bool_switch(),
       "the failing rank throws an I/O error instead of being killed")
      ("debug-file-size-limit", kDebug, po::value<int64_t>()->default_value(0),
       "RLIMIT_FSIZE in bytes for the rank's work (a full disk)")
      ("debug-slow-io", kDebug, po::value<double>()->default_value(0.0),
       "seconds slept at every work point (slow storage)")
      ("debug-pause-before-marker", kDebug, po::value<double>()->default_value(0.0),
       "seconds each rank sleeps before writing its marker");
}

Faults faults_from(const po::variables_map& values) {
  Faults f;
  f.kill_rank = values["debug-kill-rank"].as<int>();
  f.kill_after = values["debug-kill-after"].as<int64_t>();
  f.fail_io = values["debug-fail-io"].as<bool>();
  f.file_size_limit = values["debug-file-size-limit"].as<int64_t>();
  f.slow_io_s = values["debug-slow-io"].as<double>();
  f.pause_before_marker = values["debug-pause-before-marker"].as<double>();
  if (f.file_size_limit < 0 || f.slow_io_s < 0 || f.pause_before_marker < 0) {
    fail<InvalidInput>("the --debug-* options take values >= 0");
  }
  return f;
}

}  // namespace tessera
