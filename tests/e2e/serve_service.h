// The serve executable under mpirun for end-to-end tests: started on a free port, found through
// its registration, stopped by a signal to rank 0 or to mpirun.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "common/core/fs.h"
#include "tests/e2e/e2e_util.h"

namespace tessera::e2e {

// A running `mpirun -np R serve ...`, stopped (SIGTERM to rank 0) and waited for at the end.
class Service {
 public:
  // `launcher`: the mpirun command line ("" for mpirun(ranks)).
  Service(const fs::path& dir, int ranks, const std::string& index, const std::string& extra,
          const std::string& tag, const std::string& launcher = "")
      : registry_(dir / ("registry-" + tag)), log_(dir / ("serve-" + tag + ".log")) {
    fs::remove_all(registry_);
    // exec: the process forked here is mpirun itself, which signal_launcher() signals.
    const std::string command = "exec " + (launcher.empty() ? mpirun(ranks) : launcher) +
                                TESSERA_SERVE + " --index " + index +
                                " --port 0 --threads 1 --registry " + registry_.string() + " " +
                                extra + " > " + log_.string() + " 2>&1";
    pid_ = ::fork();
    if (pid_ == 0) {
      ::setpgid(0, 0);
      ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
    const fs::path entry = registry_ / (fs::path(index).filename().string() + ".json");
    for (int i = 0; i < 1200 && !fs::exists(entry); ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        ADD_FAILURE() << "serve exited before listening:\n" << log();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const auto j = read_json_file(entry.string());
    if (!j) {
      ADD_FAILURE() << "serve did not register in " << entry << ":\n" << log();
      return;
    }
    port_ = j->at("port").get<int>();
    rank0_ = j->at("pid").get<int>();
    entry_ = entry;
    // Registered before the server thread accepts: wait for /healthz.
    for (int i = 0; i < 600; ++i) {
      httplib::Client c("127.0.0.1", port_);
      if (auto r = c.Get("/healthz"); r && r->status == 200) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  ~Service() { stop(); }
  int port() const { return port_; }
  int rank0() const { return rank0_; }
  bool running() const { return pid_ > 0 && port_ > 0; }
  std::string log() const {
    std::ifstream in(log_);
    std::stringstream t;
    t << in.rdbuf();
    return t.str();
  }
  // Stops the service (SIGTERM to rank 0); returns mpirun's exit status.
  int stop() { return stop_by(rank0_, SIGTERM); }
  // Sends `signal` to mpirun itself, as Ctrl-C or scancel do; returns its exit status.
  int signal_launcher(int signal) { return stop_by(pid_, signal); }

 private:
  int stop_by(int target, int signal) {
    if (pid_ <= 0) return -1;
    if (target > 0) ::kill(target, signal);
    int status = 0;
    for (int i = 0; i < 600; ++i) {
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        EXPECT_FALSE(fs::exists(entry_)) << "the registration outlived the service";
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::kill(-pid_, SIGKILL);
    ::waitpid(pid_, &status, 0);
    pid_ = -1;
    ADD_FAILURE() << "serve did not stop on signal " << signal << ":\n" << log();
    return -1;
  }

  fs::path registry_, log_, entry_;
  pid_t pid_ = -1;
  int port_ = 0;
  int rank0_ = 0;
};

}  // namespace tessera::e2e
