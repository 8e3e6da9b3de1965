#include "common/stage/failure.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "common/core/fs.h"

namespace tessera {

namespace fs = std::filesystem;

std::string failure_path(const std::string& stage_dir, int rank) {
  return (fs::path(stage_dir) / kFailureDir / rank_file_name(rank, ".json")).string();
}

void record_failure(const std::string& stage_dir, const StageFailure& failure) noexcept {
  try {
    make_directories((fs::path(stage_dir) / kFailureDir).string());
    const nlohmann::json j = {{"rank", failure.rank},
                              {"exit_code", failure.exit_code},
                              {"message", failure.message},
                              {"time", failure.time}};
    // Messages may quote bytes from files (a slide's header): not UTF-8 is written as U+FFFD.
    atomic_write_file(failure_path(stage_dir, failure.rank),
                      j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
  } catch (const std::exception& e) {
    spdlog::warn("cannot record the failure in '{}': {}", stage_dir, e.what());
  }
}

void clear_failures(const std::string& stage_dir, int rank) noexcept {
  std::error_code ec;
  if (rank < 0) {
    fs::remove_all(fs::path(stage_dir) / kFailureDir, ec);
  } else {
    fs::remove(failure_path(stage_dir, rank), ec);
  }
}

std::vector<StageFailure> read_failures(const std::string& stage_dir, int world_size) {
  std::vector<StageFailure> out;
  std::error_code ec;
  // One listing of the records there are, not a probe per rank.
  for (fs::directory_iterator it(fs::path(stage_dir) / kFailureDir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    int rank = -1;
    if (std::sscanf(name.c_str(), "rank-%d.json", &rank) != 1 ||
        name != rank_file_name(rank, ".json") || rank >= world_size) {
      continue;
    }
    try {
      const auto j = read_json_file(it->path().string());
      if (!j || !j->is_object()) continue;
      StageFailure f;
      f.rank = rank;
      f.exit_code = j->value("exit_code", 1);
      f.message = j->value("message", "");
      f.time = j->value("time", "");
      out.push_back(std::move(f));
    } catch (const std::exception&) {
    }
  }
  std::sort(out.begin(), out.end(),
            [](const StageFailure& a, const StageFailure& b) { return a.rank < b.rank; });
  return out;
}

}  // namespace tessera
