#include "common/stage/marker.h"

#include <unistd.h>

#include <chrono>
#include <future>
#include <filesystem>
#include <random>
#include <sstream>
#include <set>
#include <map>
#include <utility>
#include <regex>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/hash.h"
#include "common/core/version.h"
#include "common/stage/layout.h"
#include "common/stage/lineage.h"

namespace tessera {

namespace fs = std::filesystem;

nlohmann::json OutputRecord::to_json() const {
  return {{"file", file},          {"bytes", bytes},   {"xxh3", xxh3},
          {"xxh3_ends", xxh3_ends}, {"sync_s", sync_s}, {"hash_s", hash_s}};
}

OutputRecord OutputRecord::from_json(const nlohmann::json& j) {
  OutputRecord r;
  r.file = j.at("file").get<std::string>();
  r.bytes = j.at("bytes").get<uint64_t>();
  r.xxh3 = j.at("xxh3").get<std::string>();
  r.xxh3_ends = j.at("xxh3_ends").get<std::string>();
  return r;
}

OutputRecord seal_output(const std::string& stage_dir, const std::string& relative_path) {
  using Clock = std::chrono::steady_clock;
  const std::string path = (fs::path(stage_dir) / relative_path).string();
  OutputRecord r;
  r.file = relative_path;
  // The hash reads the closed file from the page cache while fsync writes it out: the two
  // overlap, so sealing costs about the longer of them, not their sum.
  auto hashed = std::async(std::launch::async, [&path, &r] {
    const auto t0 = Clock::now();
    r.xxh3 = xxh3_file(path);
    r.xxh3_ends = xxh3_ends(path);
    r.hash_s = std::chrono::duration<double>(Clock::now() - t0).count();
  });
  const auto t0 = Clock::now();
  try {
    sync_file(path);
  } catch (...) {
    hashed.wait();
    throw;
  }
  r.sync_s = std::chrono::duration<double>(Clock::now() - t0).count();
  hashed.get();
  r.bytes = file_size(path).value_or(0);
  return r;
}

std::string check_output(const std::string& stage_dir, const OutputRecord& record,
                         VerifyLevel level) {
  const std::string path = (fs::path(stage_dir) / record.file).string();
  try {
    auto size = file_size(path);
    if (!size) return fmt::format("'{}' missing", path);
    if (*size != record.bytes) {
      return fmt::format("'{}' has {} bytes, its marker records {}", path, *size, record.bytes);
    }
    if (xxh3_ends(path) != record.xxh3_ends) {
      return fmt::format("'{}' differs from its marker at its start or end", path);
    }
    if (level == VerifyLevel::kFull && xxh3_file(path) != record.xxh3) {
      return fmt::format("'{}' content differs from its marker (XXH3)", path);
    }
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

nlohmann::json seal_text(const std::string& relative, const std::string& text) {
  return {{"file", relative}, {"bytes", static_cast<uint64_t>(text.size())}, {"xxh3", xxh3_hex(text)}};
}

std::string check_text_seal(const std::string& success_path, const std::string& field,
                            const std::string& path, const std::string& text) {
  std::optional<nlohmann::json> success;
  try {
    success = read_json_file(success_path);
  } catch (const Error&) {
    return "";  // a damaged _SUCCESS is its stage's problem, found where that is checked
  }
  if (!success || !success->is_object() || !success->contains(field)) return "";
  const nlohmann::json& seal = (*success)[field];
  const nlohmann::json mine = seal_text("", text);
  bool same = false;
  try {
    same = seal.at("bytes") == mine.at("bytes") && seal.at("xxh3") == mine.at("xxh3");
  } catch (const nlohmann::json::exception&) {
    same = false;  // a seal that is not one vouches for nothing
  }
  if (same) return "";
  return fmt::format("'{}' ({} bytes) differs from its seal in '{}' (size or XXH3)", path,
                     text.size(), success_path);
}

nlohmann::json marker_base(const std::string& stage, int rank, int world_size,
                           const std::string& config_fingerprint) {
  return {{"format_version", kMarkerFormatVersion},
          {"stage", stage},
          {"rank", rank},
          {"world_size", world_size},
          {"config_fingerprint", config_fingerprint},
          {"version", version()},
          {"git_revision", git_revision()},
          {"host", host_name()},
          {"pid", static_cast<int64_t>(::getpid())}};
}

MarkerCheck check_marker(const std::string& marker_path, const std::string& stage_dir,
                         const std::string& config_fingerprint, int world_size,
                         VerifyLevel level) {
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
    if (marker->value("format_version", int64_t{0}) != kMarkerFormatVersion) {
      check.reason = fmt::format("marker format version {} (this build writes {})",
                                 marker->value("format_version", int64_t{0}), kMarkerFormatVersion);
      return check;
    }
    if (marker->at("config_fingerprint").get<std::string>() != config_fingerprint) {
      check.reason = "configuration fingerprint differs";
      return check;
    }
    if (marker->at("world_size").get<int>() != world_size) {
      check.reason = "world size differs";
      return check;
    }
    for (const auto& output : marker->at("outputs")) {
      std::string why = check_output(stage_dir, OutputRecord::from_json(output), level);
      if (!why.empty()) {
        check.reason = why;
        return check;
      }
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

std::string config_differences(const std::string& before, const std::string& now) {
  const auto options = [](const std::string& text) {
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      const size_t eq = line.find(" = ");
      if (eq == std::string::npos || line.empty() || line[0] == '#' || line[0] == ';') continue;
      out[line.substr(0, eq)] = line.substr(eq + 3);
    }
    return out;
  };
  const auto a = options(before), b = options(now);
  std::set<std::string> keys;
  for (const auto& [k, v] : a) keys.insert(k);
  for (const auto& [k, v] : b) keys.insert(k);
  std::vector<std::string> out;
  for (const auto& k : keys) {
    if (k == "overwrite") continue;
    const auto was = a.find(k), is = b.find(k);
    if (was != a.end() && is != b.end() && was->second == is->second) continue;
    if (is == b.end()) {
      out.push_back(fmt::format("--{} (now unset)", k));
    } else {
      out.push_back(fmt::format("--{} {} (was {})", k, is->second.empty() ? "''" : is->second,
                                was == a.end() ? "unset"
                                               : was->second.empty() ? "''" : was->second));
    }
  }
  return fmt::format("{}", fmt::join(out, ", "));
}

StageAction plan_stage(const std::string& stage_dir, const std::optional<nlohmann::json>& existing,
                       bool success_exists, const std::string& config_fingerprint, int world_size,
                       bool overwrite, const std::string& differences) {
  if (!existing) return StageAction::kFresh;
  if (overwrite) return StageAction::kFresh;
  std::string old_fp = existing->value("config_fingerprint", "");
  int old_size = existing->value("world_size", -1);
  if (old_fp != config_fingerprint) {
    fail<InvalidInput>(
        "'{}' holds a run with another configuration ({}): to keep both, give this run a "
        "directory of its own (ingest and aggregate --name N, embed --tag T, patchgen another "
        "--out); to replace it, --overwrite",
        stage_dir,
        differences.empty()
            ? std::string("the same options: its inputs or their fingerprints differ")
            : "this run differs in " + differences);
  }
  if (old_size != world_size) {
    if (success_exists) {
      fail<InvalidInput>("'{}' is complete already, made with {} ranks (this run has {}): there "
                         "is nothing to redo, and the next stage reads it whatever its ranks; "
                         "to make it again with {} ranks, --overwrite",
                         stage_dir, old_size, world_size, world_size);
    }
    fail<InvalidInput>("'{}' was run with {} ranks, this run has {}; rerun with {} ranks or "
                       "use --overwrite",
                       stage_dir, old_size, world_size, old_size);
  }
  return success_exists ? StageAction::kComplete : StageAction::kResume;
}

namespace {

std::string new_job_token() {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ device() ^
                      static_cast<uint64_t>(::getpid()));
  return fmt::format("{:016x}", rng());
}

// Whether _SUCCESS at `path` exists and parses: a damaged one (a flipped byte) is a stage to
// finish again, which rewrites it, not a stage complete.
bool summary_readable(const std::string& path) {
  try {
    if (read_json_file(path)) return true;
  } catch (const InvalidInput& e) {
    spdlog::warn("{}: finishing the stage again to rewrite it", e.what());
  }
  return false;
}

bool is_temporary_name(const std::string& name) {
  static const std::regex kTemporary(
      ".*\\.tmp("                     // written in place, then renamed (plans, HDF5 files)
      "|\\.[0-9a-f]{16}"              // a job's staged output (RankContext::staging_path)
      "|\\.[A-Za-z0-9._-]+\\.[0-9]+"  // atomic_write_file's .tmp.<host>.<pid>
      ")");
  return std::regex_match(name, kTemporary);
}

// Removes the temporaries under `dir` that jobs killed before this one left (a shard staged by a
// killed rank can be hundreds of MB): files named by is_temporary_name, except this job's own.
// Folders holding their own .lock are other stage directories (parts of another split) and are
// left alone. Returns the number of files and bytes removed.
std::pair<int64_t, uint64_t> remove_dead_temporaries(const fs::path& dir,
                                                     const std::string& job_token) {
  std::pair<int64_t, uint64_t> removed{0, 0};
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::error_code type_ec;
    const std::string name = entry.path().filename().string();
    if (entry.is_directory(type_ec) && !entry.is_symlink(type_ec)) {
      if (!fs::exists(entry.path() / kLockFile, type_ec)) {
        const auto below = remove_dead_temporaries(entry.path(), job_token);
        removed.first += below.first;
        removed.second += below.second;
      }
      continue;
    }
    if (!entry.is_regular_file(type_ec) || !is_temporary_name(name)) continue;
    if (name.size() > job_token.size() &&
        name.compare(name.size() - job_token.size(), job_token.size(), job_token) == 0) {
      continue;
    }
    const uint64_t bytes = entry.file_size(type_ec);
    if (fs::remove(entry.path(), type_ec)) {
      ++removed.first;
      removed.second += type_ec ? 0 : bytes;
    }
  }
  return removed;
}

}  // namespace

StageState prepare_stage(Comm& comm, const std::string& stage, const std::string& stage_dir,
                         const std::string& config_ini, const std::string& config_fingerprint,
                         const StageOptions& options, const nlohmann::json& run_fields,
                         const StageLinks& links) {
  StageState state;
  const std::string ranks_lock = stage_file(stage_dir, kRanksLockFile);
  // "<action><token>", decided by rank 0.
  const std::string outcome = decided_by_root(comm, [&] {
    make_directories(stage_dir);
    state.job_token = new_job_token();
    if (options.file_locking) {
      std::string holder;
      state.lock = FileLock::try_acquire(stage_file(stage_dir, kLockFile), &holder,
                                         FileLock::Mode::kExclusive,
                                         {{"job", state.job_token}});
      if (!state.lock) {
        fail<InvalidInput>("'{}' is locked by another running job ({}; a job writing it or a "
                           "later stage reading it); wait for it or stop it",
                           stage_dir, holder);
      }
      // Every rank of a job holds .ranks.lock shared until it ends; ranks left running after
      // their mpirun was killed still hold it.
      state.ranks_lock = FileLock::try_acquire(ranks_lock, &holder);
      if (!state.ranks_lock) {
        fail<InvalidInput>("'{}' still has ranks of an earlier job running (orphaned when their "
                           "mpirun or rank 0 was killed?): wait for them to end or kill them "
                           "(ps shows them; the last job is recorded in '{}/.lock')",
                           stage_dir, stage_dir);
      }
      state.ranks_lock->downgrade();
    } else {
      spdlog::warn("--file-locking false: '{}' is not locked; make sure no other job writes "
                   "it", stage_dir);
    }
    auto existing = read_json_file(stage_file(stage_dir, kRunFile));
    const bool success = summary_readable(stage_file(stage_dir, kSuccessFile));
    const std::string stale = existing ? stale_reason(stage_dir) : "";
    if (!stale.empty()) {
      // Outputs made from a replaced input are worth nothing, whatever they were made with.
      spdlog::warn("{}: starting it afresh", stale);
      state.action = StageAction::kFresh;
    } else {
      std::string differences;
      if (existing && existing->value("config_fingerprint", "") != config_fingerprint) {
        const std::string old_ini = stage_file(stage_dir, kConfigFile);
        if (path_exists(old_ini)) differences = config_differences(read_file(old_ini), config_ini);
      }
      state.action = plan_stage(stage_dir, existing, success, config_fingerprint, comm.size(),
                                options.overwrite, differences);
    }
    if (state.action != StageAction::kFresh && options.file_locking) {
      // This job holds the directory's lock and no rank of an earlier job still runs here
      // (.ranks.lock): every other job's temporary in it is a dead job's.
      const auto [files, bytes] = remove_dead_temporaries(stage_dir, state.job_token);
      if (files > 0) {
        spdlog::info("'{}': removed {} temporary file(s) ({} bytes) left by killed jobs",
                     stage_dir, files, bytes);
      }
    }
    if (state.action == StageAction::kFresh) {
      if (existing && !links.run.empty()) {
        mark_downstream_stale(links.run, stage, stage_dir,
                              fmt::format("its input '{}' was started afresh (--overwrite, a "
                                          "changed input, or a stale run)",
                                          stage_dir));
      }
      std::error_code ec;
      for (const auto& entry : fs::directory_iterator(stage_dir, ec)) {
        const auto name = entry.path().filename();
        if (name != kLockFile && name != kRanksLockFile) remove_tree(entry.path().string());
      }
      if (ec) fail<IoError>("cannot list '{}': {}", stage_dir, ec.message());
      nlohmann::json run = {{"stage", stage},
                            {"config_fingerprint", config_fingerprint},
                            {"world_size", comm.size()},
                            {"version", version()},
                            {"git_revision", git_revision()},
                            {"created", utc_timestamp()}};
      nlohmann::json inputs = nlohmann::json::array();
      for (const auto& input : links.inputs) inputs.push_back(input_record(input, stage_dir));
      run["inputs"] = std::move(inputs);
      if (run_fields.is_object()) run.update(run_fields);
      atomic_write_file(stage_file(stage_dir, kConfigFile), config_ini);
      atomic_write_file(stage_file(stage_dir, kRunFile), run.dump(2) + "\n");
    }
    return std::to_string(static_cast<int>(state.action)) + state.job_token;
  });
  state.action = static_cast<StageAction>(outcome[0] - '0');
  state.job_token = outcome.substr(1);
  if (comm.rank() != 0 && options.file_locking) {
    std::string holder;
    state.ranks_lock = FileLock::try_acquire(ranks_lock, &holder, FileLock::Mode::kShared);
    if (!state.ranks_lock) {
      fail<IoError>("rank {}: cannot take the shared lock of '{}'", comm.rank(), ranks_lock);
    }
  }
  return state;
}

bool job_holds_run(const std::string& stage_dir, const std::string& job_token, bool lock_holder) {
  // The holder must not even read the file: closing any descriptor of it would drop its lock.
  if (lock_holder) return true;
  const std::string lock = stage_file(stage_dir, kLockFile);
  std::optional<nlohmann::json> content;
  try {
    content = nlohmann::json::parse(read_file(lock));
  } catch (const std::exception&) {
    return false;
  }
  if (content->value("job", "") != job_token) return false;
  return FileLock::held_elsewhere(lock);
}

}  // namespace tessera
