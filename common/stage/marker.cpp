#include "common/core/hash.h"
#include "common/stage/marker.h"

#include <unistd.h>

#include <filesystem>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/version.h"

namespace tessera {

namespace fs = std::filesystem;

nlohmann::json marker_base(const std::string& stage, int rank, int world_size,
                           const std::string& config_fingerprint) {
  return {{"stage", stage},
          {"rank", rank},
          {"world_size", world_size},
          {"config_fingerprint", config_fingerprint},
          {"version", version()},
          {"git_revision", git_revision()},
          {"host", host_name()},
          {"pid", static_cast<int64_t>(::getpid())}};
}

MarkerCheck check_marker(const std::string& marker_path, const std::string& stage_dir,
                         const std::string& config_fingerprint, int world_size, bool verify_hash) {
  MarkerCheck check;
  std::optional<nlohmann::json> marker;
  try {
    marker = read_json_file(marker_path);
  } catch (const Error& e) {
    check.reason = e.what();
    return check;
  }
  if (!marker) {
    check.reason = "marker missing";
    return check;
  }
  check.marker = *marker;
  try {
    if (marker->at("config_fingerprint").get<std::string>() != config_fingerprint) {
      check.reason = "configuration fingerprint differs";
      return check;
    }
    if (marker->at("world_size").get<int>() != world_size) {
      check.reason = "world size differs";
      return check;
    }
    const std::string file = (fs::path(stage_dir) / marker->at("file").get<std::string>()).string();
    auto size = file_size(file);
    if (!size) {
      check.reason = fmt::format("'{}' missing", file);
      return check;
    }
    if (*size != marker->at("file_bytes").get<uint64_t>()) {
      check.reason = fmt::format("'{}' has {} bytes, marker records {}", file, *size,
                                 marker->at("file_bytes").get<uint64_t>());
      return check;
    }
    if (verify_hash && sha256_file(file) != marker->at("file_sha256").get<std::string>()) {
      check.reason = fmt::format("'{}' SHA-256 differs from the marker", file);
      return check;
    }
  } catch (const nlohmann::json::exception& e) {
    check.reason = fmt::format("marker incomplete: {}", e.what());
    return check;
  }
  check.valid = true;
  return check;
}

nlohmann::json summary_base(const std::string& stage, int world_size,
                            const std::string& config_fingerprint, const std::string& start_time) {
  return {{"stage", stage},
          {"world_size", world_size},
          {"config_fingerprint", config_fingerprint},
          {"version", version()},
          {"git_revision", git_revision()},
          {"start_time", start_time},
          {"end_time", utc_timestamp()}};
}

bool rank_output_complete(StageAction action, const std::string& marker_path,
                          const std::string& stage_dir, const std::string& config_fingerprint,
                          int world_size) {
  if (action != StageAction::kResume) return false;
  MarkerCheck check = check_marker(marker_path, stage_dir, config_fingerprint, world_size);
  if (check.valid) {
    spdlog::info("rank output is complete (valid marker), skipping it");
  } else {
    spdlog::info("redoing rank output: {}", check.reason);
  }
  return check.valid;
}

StageAction plan_stage(const std::string& stage_dir, const std::optional<nlohmann::json>& existing,
                       bool success_exists, const std::string& config_fingerprint, int world_size,
                       bool overwrite) {
  if (!existing) return StageAction::kFresh;
  if (overwrite) return StageAction::kFresh;
  std::string old_fp = existing->value("config_fingerprint", "");
  int old_size = existing->value("world_size", -1);
  if (old_fp != config_fingerprint) {
    fail<InvalidInput>("'{}' holds a run with a different configuration (fingerprint {} vs {}); "
                       "use a new directory or --overwrite (see config.ini there)",
                       stage_dir, old_fp.substr(0, 12), config_fingerprint.substr(0, 12));
  }
  if (old_size != world_size) {
    fail<InvalidInput>("'{}' was run with {} ranks, this run has {}; rerun with {} ranks or "
                       "use --overwrite",
                       stage_dir, old_size, world_size, old_size);
  }
  return success_exists ? StageAction::kComplete : StageAction::kResume;
}

StageState prepare_stage(Comm& comm, const std::string& stage, const std::string& stage_dir,
                         const std::string& config_ini, const std::string& config_fingerprint,
                         bool overwrite) {
  StageState state;
  // "0".."2": the action; otherwise "E<exit code>" followed by the error message.
  std::string outcome;
  if (comm.rank() == 0) {
    try {
      fs::create_directories(stage_dir);
      std::string holder;
      state.lock = FileLock::try_acquire((fs::path(stage_dir) / ".lock").string(), &holder);
      if (!state.lock) {
        fail<InvalidInput>("'{}' is locked by another running job ({}); wait for it or stop it",
                           stage_dir, holder);
      }
      auto existing = read_json_file((fs::path(stage_dir) / "run.json").string());
      bool success = fs::exists(fs::path(stage_dir) / "_SUCCESS");
      state.action =
          plan_stage(stage_dir, existing, success, config_fingerprint, comm.size(), overwrite);
      if (state.action == StageAction::kFresh) {
        for (const auto& entry : fs::directory_iterator(stage_dir)) {
          if (entry.path().filename() != ".lock") fs::remove_all(entry.path());
        }
        nlohmann::json run = {{"stage", stage},
                              {"config_fingerprint", config_fingerprint},
                              {"world_size", comm.size()},
                              {"version", version()},
                              {"git_revision", git_revision()},
                              {"created", utc_timestamp()}};
        atomic_write_file((fs::path(stage_dir) / "config.ini").string(), config_ini);
        atomic_write_file((fs::path(stage_dir) / "run.json").string(), run.dump(2) + "\n");
      }
      outcome = std::to_string(static_cast<int>(state.action));
    } catch (const fs::filesystem_error& e) {
      outcome = fmt::format("E{}cannot prepare '{}': {}", static_cast<int>(kExitError), stage_dir,
                            e.what());
    } catch (const Error& e) {
      outcome = fmt::format("E{}{}", e.exit_code(), e.what());
    }
  }
  outcome = comm.broadcast(outcome, 0);
  if (outcome.size() != 1) {
    const int code = outcome[1] - '0';
    if (code == kExitBadInput) throw InvalidInput(outcome.substr(2));
    throw IoError(outcome.substr(2));
  }
  state.action = static_cast<StageAction>(outcome[0] - '0');
  return state;
}

}  // namespace tessera
