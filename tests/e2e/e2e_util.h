// Helpers for end-to-end tests that run tessera's executables as a user would (through mpirun)
// and check exit codes and outputs.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace tessera::e2e {

namespace fs = std::filesystem;

// Runs a shell command, capturing stdout+stderr into `output`; returns the exit status (or
// 128+signal).
inline int run_command(const std::string& command, std::string* output = nullptr) {
  const std::string log = (fs::temp_directory_path() /
                           fmt::format("tessera_e2e_{}_{}.log", ::getpid(), std::rand()))
                              .string();
  int status = std::system((command + " > " + log + " 2>&1").c_str());
  std::ifstream in(log);
  std::stringstream text;
  text << in.rdbuf();
  if (output) *output = text.str();
  fs::remove(log);
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// "mpirun -np N <flags> " with the flags CTest was configured with.
inline std::string mpirun(int ranks) {
  return fmt::format("{} -np {} {} ", TESSERA_MPIEXEC, ranks, TESSERA_MPIEXEC_FLAGS);
}

// A fresh directory for one test, removed unless the test failed.
class TempDir {
 public:
  explicit TempDir(const std::string& name)
      : path_(fs::temp_directory_path() / fmt::format("tessera_{}_{}", name, ::getpid())) {
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    if (!::testing::Test::HasFailure()) fs::remove_all(path_);
  }
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

}  // namespace tessera::e2e
