// The fixture of tessera-status's tests: fake run directories holding the files it reads, with the
// fields it reads.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "common/core/fs.h"
#include "common/stage/layout.h"
#include "common/stage/marker.h"
#include "stages/status/status.h"

namespace tessera::status::test_support {

namespace fs = std::filesystem;

constexpr const char* kFingerprint = "f00d";

// Builds fake run directories: the files tessera-status reads, with the fields it reads.
class StatusTest : public ::testing::Test {
 protected:
  void SetUp() override {
    run_ = fs::temp_directory_path() /
           fmt::format("tessera_status_test_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(run_);
    fs::create_directories(run_);
  }
  void TearDown() override { fs::remove_all(run_); }

  std::string dir(const std::string& relative) const { return (run_ / relative).string(); }

  // RUN/<aggregate's folder>/<name>, relative to the run, as the layout places it.
  std::string aggregate(const std::string& name) const {
    return fs::path(RunLayout(run_.string()).stage_root("aggregate", name))
        .lexically_relative(RunLayout(run_.string()).run())
        .string();
  }

  static void write(const std::string& path, const std::string& text) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path) << text;
  }

  // run.json and config.ini of a started stage directory.
  void start(const std::string& relative, const std::string& stage, int world_size,
             nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json run = {{"stage", stage}, {"config_fingerprint", kFingerprint},
                          {"world_size", world_size}, {"created", "2026-11-30T10:00:00.000Z"}};
    run.update(extra);
    write(dir(relative) + "/run.json", run.dump());
    write(dir(relative) + "/config.ini", "x = 1\n");
  }

  // A valid marker of `rank`, with one sealed output file.
  void marker(const std::string& relative, int rank, int world_size, int64_t rows,
              const std::string& start_time = "2026-11-30T10:00:00.000Z",
              const std::string& end_time = "2026-11-30T10:00:10.000Z") {
    const std::string shard = "shards/" + rank_file_name(rank, ".h5");
    write(dir(relative) + "/" + shard, std::string(1000 + rank, 'x'));
    nlohmann::json m = marker_base("patchgen", rank, world_size, kFingerprint);
    m["outputs"] = {seal_output(dir(relative), shard).to_json()};
    m["rows"] = rows;
    m["start_time"] = start_time;
    m["end_time"] = end_time;
    write(dir(relative) + "/markers/" + rank_file_name(rank, ".json"), m.dump());
  }

  void success(const std::string& relative, const std::string& stage, int world_size,
               nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json s = {{"stage", stage},
                        {"status", "completed"},
                        {"exit_code", 0},
                        {"world_size", world_size},
                        {"config_fingerprint", kFingerprint},
                        {"start_time", "2026-11-30T10:00:00.000Z"},
                        {"end_time", "2026-11-30T11:02:03.500Z"}};
    s.update(extra);
    write(dir(relative) + "/_SUCCESS", s.dump());
  }

  void complete(const std::string& relative, const std::string& stage, int world_size,
                nlohmann::json extra = nlohmann::json::object()) {
    start(relative, stage, world_size);
    success(relative, stage, world_size, std::move(extra));
  }

  RunStatus scan() const { return scan_run(run_.string()); }

  static const StageStatus& find(const RunStatus& s, const std::string& stage, int part,
                                 const std::string& name = "") {
    for (const auto& row : s.stages) {
      const std::string& n = stage == "embed" ? row.tag : row.name;
      if (row.stage == stage && row.part == part && (name.empty() || n == name)) return row;
    }
    ADD_FAILURE() << "no row " << stage << " " << name << " " << part;
    static StageStatus none;
    return none;
  }

  int main(const std::vector<std::string>& args, std::string* out = nullptr) {
    std::ostringstream o, e;
    int code = status_main(args, o, e);
    if (out) *out = o.str();
    return code;
  }

  fs::path run_;
};

}  // namespace tessera::status::test_support
