#include "common/stage/skeleton.h"

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/core/clock.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/failure.h"
#include "common/stage/layout.h"
#include "common/stage/lineage.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

// The text of a marker or _SUCCESS. Their strings may quote bytes from input files (a slide's
// failure reason naming a damaged header's UID): bytes that are not UTF-8 are written as U+FFFD,
// so that one bad byte cannot fail the run after its work is done.
std::string marker_text(const nlohmann::json& marker) {
  return marker.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace

std::string RankContext::staging_path(const std::string& relative) const {
  return (fs::path(dir) / (relative + ".tmp." + job_token)).string();
}

std::optional<FileLock> hold_input(Comm& comm, const std::string& stage_dir,
                                   const StageOptions& options) {
  std::optional<FileLock> lock;
  if (!options.file_locking) return lock;
  done_by_root(comm, [&] {
    if (!path_exists(stage_file(stage_dir, kRunFile))) {
      fail<InvalidInput>("'{}' is not complete (no _SUCCESS): run that stage first or finish its "
                         "rerun",
                         stage_dir);
    }
    std::string holder;
    lock = FileLock::try_acquire(stage_file(stage_dir, kLockFile), &holder,
                                 FileLock::Mode::kShared);
    if (!lock) {
      fail<InvalidInput>("'{}' is being written by another running job ({}): wait for it to "
                         "finish",
                         stage_dir, holder);
    }
  });
  return lock;
}

std::vector<std::string> incomplete_parts(const std::string& root, int parts) {
  std::vector<std::string> missing;
  for (int p = 0; p < parts; ++p) {
    const std::string dir = part_dir(root, p, parts);
    if (!path_exists(stage_file(dir, kSuccessFile)) || !stale_reason(dir).empty()) {
      missing.push_back(dir);
    }
  }
  return missing;
}

void require_all_parts(const std::string& root, int parts) {
  const std::vector<std::string> missing = incomplete_parts(root, parts);
  if (missing.empty()) return;
  std::string list;
  for (const auto& dir : missing) list += "\n  " + dir;
  fail<InvalidInput>("{} of the {} parts of '{}' are not complete (run or rerun them with --part "
                     "and --parts {}):{}",
                     missing.size(), parts, root, parts, list);
}

std::string marker_path(const std::string& stage_dir, int rank) {
  return (fs::path(stage_dir) / kMarkerDir / rank_file_name(rank, ".json")).string();
}

namespace {

// Collective. Runs `check` (this rank's share of a check: "" or the first problem it found) on
// every rank; returns the problem of the lowest rank that found one (agree_on_failure), "" when
// none did. An I/O error while checking counts as a problem; any other error is thrown on every
// rank.
std::string agreed_problem(Comm& comm, const std::function<std::string()>& check) {
  try {
    agree_on_failure(comm, [&] {
      const std::string problem = check();
      if (!problem.empty()) throw IoError(problem);
    });
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

// Each rank checks the markers r, r + R, ... of `stage_dir`; returns the first problem found on
// any rank, "" when every marker is valid.
std::string check_markers_shared(Comm& comm, const std::string& stage_dir,
                                 const std::string& fingerprint, int world_size,
                                 VerifyLevel level) {
  return agreed_problem(comm, [&]() -> std::string {
    for (int r = comm.rank(); r < world_size; r += comm.size()) {
      MarkerCheck check = check_marker(marker_path(stage_dir, r), stage_dir, fingerprint,
                                       world_size, level);
      if (!check.valid) return fmt::format("rank {} of '{}': {}", r, stage_dir, check.reason);
    }
    return "";
  });
}

// Each rank checks the outputs i, i + R, ... that `success` (the _SUCCESS of `stage_dir`) lists;
// returns the first problem found on any rank.
std::string check_success_outputs_shared(Comm& comm, const std::string& stage_dir,
                                         const nlohmann::json& success, VerifyLevel level) {
  return agreed_problem(comm, [&]() -> std::string {
    if (!success.contains("outputs") || !success["outputs"].is_array()) return "";
    const auto& outputs = success["outputs"];
    for (size_t i = comm.rank(); i < outputs.size(); i += static_cast<size_t>(comm.size())) {
      try {
        std::string problem = check_output(stage_dir, OutputRecord::from_json(outputs[i]), level);
        if (!problem.empty()) return problem;
      } catch (const nlohmann::json::exception& e) {
        return fmt::format("'{}/_SUCCESS' lists an unreadable output: {}", stage_dir, e.what());
      }
    }
    return "";
  });
}

// Seals the files this rank's finish() wrote and gathers every rank's records on rank 0.
nlohmann::json seal_finish_outputs(Comm& comm, const std::string& stage_dir,
                                   const nlohmann::json& fields) {
  nlohmann::json mine = nlohmann::json::array();
  if (fields.is_object() && fields.contains("outputs")) {
    for (const auto& file : fields["outputs"]) {
      mine.push_back(seal_output(stage_dir, file.get<std::string>()).to_json());
    }
  }
  nlohmann::json all = nlohmann::json::array();
  for (const auto& text : comm.allgather(mine.dump())) {
    for (auto& record : nlohmann::json::parse(text)) all.push_back(std::move(record));
  }
  return all;
}

// Rank 0, before a complete stage found damaged is resumed: removes the files its _SUCCESS lists
// that fail their full check, so that they are made again (finish() rewrites its files; a stage
// that keeps files of an earlier attempt, as patchgen's plans and QC images, keeps only those
// present) instead of being sealed again as they are.
void remove_damaged_finish_outputs(const std::string& stage_dir) {
  std::optional<nlohmann::json> success;
  try {
    success = read_json_file(stage_file(stage_dir, kSuccessFile));
  } catch (const Error&) {
    return;
  }
  if (!success || !success->is_object() || !success->contains("outputs")) return;
  for (const auto& o : (*success)["outputs"]) {
    try {
      const OutputRecord r = OutputRecord::from_json(o);
      if (check_output(stage_dir, r, VerifyLevel::kFull).empty()) continue;
      const fs::path path = fs::path(stage_dir) / r.file;
      if (path.lexically_normal().string().rfind(fs::path(stage_dir).lexically_normal().string(), 0) != 0) {
        continue;  // only files inside the stage directory
      }
      std::error_code ec;
      fs::remove(path, ec);
      if (!ec) spdlog::warn("removed the damaged '{}' to make it again", path.string());
    } catch (const nlohmann::json::exception&) {
    }
  }
}

}  // namespace

nlohmann::json check_stage_input(Comm& comm, const std::string& stage_dir, VerifyLevel level) {
  const auto success = read_json_file(stage_file(stage_dir, kSuccessFile));
  const auto run = read_json_file(stage_file(stage_dir, kRunFile));
  if (!success || !run) {
    fail<InvalidInput>("'{}' is not complete (no _SUCCESS): run that stage first or finish its "
                       "rerun",
                       stage_dir);
  }
  const std::string stale = stale_reason(stage_dir);
  if (!stale.empty()) fail<InvalidInput>("{}; rerun that stage", stale);
  std::string problem =
      check_markers_shared(comm, stage_dir, run->value("config_fingerprint", ""),
                           run->value("world_size", 0), level);
  if (problem.empty()) problem = check_success_outputs_shared(comm, stage_dir, *success, level);
  if (!problem.empty()) {
    fail<IoError>("input {} is damaged or incomplete: {}; rerun that stage with --verify full to "
                  "redo what is damaged",
                  run->value("stage", "stage"), problem);
  }
  return *run;
}

std::string rank_outputs_problem(const std::string& stage_dir, VerifyLevel level,
                                 const std::string& finish_file) {
  std::optional<nlohmann::json> run, success;
  try {
    run = read_json_file(stage_file(stage_dir, kRunFile));
    success = read_json_file(stage_file(stage_dir, kSuccessFile));
  } catch (const Error& e) {
    return e.what();
  }
  if (!run || !success || !run->is_object() || !success->is_object()) {
    return fmt::format("'{}' is not complete (no {} or {})", stage_dir, kRunFile, kSuccessFile);
  }
  const int world_size = run->value("world_size", 0);
  const std::string fingerprint = run->value("config_fingerprint", "");
  if (world_size < 1) return fmt::format("'{}' records no world size", stage_file(stage_dir, kRunFile));
  for (int r = 0; r < world_size; ++r) {
    const MarkerCheck check =
        check_marker(marker_path(stage_dir, r), stage_dir, fingerprint, world_size, level);
    if (!check.valid) return fmt::format("rank {} of '{}': {}", r, stage_dir, check.reason);
  }
  if (finish_file.empty()) return "";
  return finish_output_problem(stage_dir, finish_file, level);
}

std::string finish_output_problem(const std::string& stage_dir, const std::string& relative,
                                  VerifyLevel level) {
  try {
    const auto success = read_json_file(stage_file(stage_dir, kSuccessFile));
    if (!success) return fmt::format("'{}' is not complete (no {})", stage_dir, kSuccessFile);
    for (const auto& o : success->value("outputs", nlohmann::json::array())) {
      if (o.at("file").get<std::string>() != relative) continue;
      return check_output(stage_dir, OutputRecord::from_json(o), level);
    }
  } catch (const nlohmann::json::exception& e) {
    return fmt::format("'{}/{}' lists an unreadable output: {}", stage_dir, kSuccessFile, e.what());
  } catch (const Error& e) {
    return e.what();
  }
  return fmt::format("'{}/{}' lists no output '{}'", stage_dir, kSuccessFile, relative);
}

std::string stage_outputs_problem(const std::string& stage_dir, VerifyLevel level) {
  const std::string ranks = rank_outputs_problem(stage_dir, level);
  if (!ranks.empty()) return ranks;
  try {
    const auto success = read_json_file(stage_file(stage_dir, kSuccessFile));
    for (const auto& o : success.value_or(nlohmann::json::object())
                             .value("outputs", nlohmann::json::array())) {
      const std::string why = check_output(stage_dir, OutputRecord::from_json(o), level);
      if (!why.empty()) return why;
    }
  } catch (const nlohmann::json::exception& e) {
    return fmt::format("'{}/{}' lists an unreadable output: {}", stage_dir, kSuccessFile, e.what());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

namespace {

// run_stage once the directory is taken.
int run_taken_stage(Comm& comm, const StageRun& run, StageWork& work, StageState& state,
                    const std::string& start_time) {
  if (state.action == StageAction::kComplete && run.options.verify == VerifyLevel::kFull) {
    // A complete stage checked in full: anything damaged since is redone, the rest kept.
    std::string problem =
        check_markers_shared(comm, run.dir, run.fingerprint, comm.size(), VerifyLevel::kFull);
    if (problem.empty()) {
      const auto success = decided_by_root(comm, [&] {
        return read_file(stage_file(run.dir, kSuccessFile));
      });
      problem = check_success_outputs_shared(comm, run.dir, nlohmann::json::parse(success),
                                             VerifyLevel::kFull);
    }
    if (!problem.empty()) {
      if (comm.rank() == 0) {
        spdlog::warn("'{}' was complete but {}: resuming to redo it", run.dir, problem);
        remove_damaged_finish_outputs(run.dir);
        std::error_code ec;
        fs::remove(stage_file(run.dir, kSuccessFile), ec);
        if (ec) fail<IoError>("cannot remove '{}/_SUCCESS': {}", run.dir, ec.message());
      }
      // Every rank's set-up must see what rank 0 removed (patchgen keeps only plans whose QC
      // images are present).
      comm.barrier();
      state.action = StageAction::kResume;
    }
  }
  if (state.action == StageAction::kComplete && run.refinish_reason) {
    std::string reason;
    if (comm.rank() == 0) {
      try {
        reason = run.refinish_reason();
      } catch (const std::exception& e) {
        reason = e.what();
      }
    }
    reason = comm.broadcast(reason, 0);
    if (!reason.empty()) {
      if (comm.rank() == 0) {
        spdlog::warn("'{}' is complete but {}: finishing it again", run.dir, reason);
        std::error_code ec;
        fs::remove(stage_file(run.dir, kSuccessFile), ec);
        if (ec) fail<IoError>("cannot remove '{}/_SUCCESS': {}", run.dir, ec.message());
      }
      state.action = StageAction::kResume;
    }
  }
  if (state.action == StageAction::kComplete) {
    // Rank 0 reads the exit code the run recorded; every rank returns it.
    return std::stoi(decided_by_root(comm, [&] {
      auto summary = read_json_file(stage_file(run.dir, kSuccessFile));
      spdlog::info("'{}' is already complete for this configuration; nothing to do", run.dir);
      return std::to_string(summary ? summary->value("exit_code", 0) : 0);
    }));
  }
  if (comm.rank() == 0) {
    spdlog::info("{}: {} ranks, directory '{}' ({})", run.stage, comm.size(), run.dir,
                 state.action == StageAction::kResume ? "resuming" : "fresh");
  }
  if (std::optional<int> early = work.setup(comm, state.action)) return *early;

  const std::string mine = marker_path(run.dir, comm.rank());
  bool done = false;
  if (state.action == StageAction::kResume) {
    MarkerCheck check =
        check_marker(mine, run.dir, run.fingerprint, comm.size(), run.options.verify);
    done = check.valid;
    if (done) {
      spdlog::info("rank output is complete (marker checked, --verify {}), skipping it",
                   to_string(run.options.verify));
    } else {
      spdlog::info("redoing rank output: {}", check.reason);
    }
  }
  if (!done) {
    std::error_code ec;
    fs::remove(mine, ec);
    if (ec) fail<IoError>("cannot remove the stale marker '{}': {}", mine, ec.message());
    const std::string rank_start = utc_timestamp();
    const RankContext context{comm.rank(), comm.size(), run.dir, state.job_token};
    RankResult result = work.rank_work(context);
    if (run.options.faults.pause_before_marker > 0) {
      spdlog::warn("--debug-pause-before-marker: rank {} (pid {}) pausing {} s",
                   comm.rank(), ::getpid(), run.options.faults.pause_before_marker);
      spdlog::default_logger()->flush();
      std::this_thread::sleep_for(
          std::chrono::duration<double>(run.options.faults.pause_before_marker));
    }
    if (run.options.file_locking &&
        !job_holds_run(run.dir, state.job_token, /*lock_holder=*/comm.rank() == 0)) {
      fail<IoError>("rank {}: this job no longer holds '{}' (its rank 0 is gone or another job "
                    "took the directory over); stopping without writing its outputs or marker",
                    comm.rank(), run.dir);
    }
    const auto t0 = Clock::now();
    nlohmann::json marker = marker_base(run.stage, comm.rank(), comm.size(), run.fingerprint);
    nlohmann::json outputs = nlohmann::json::array();
    for (const auto& file : result.outputs) {
      const std::string staged = context.staging_path(file);
      const std::string final_path = (fs::path(run.dir) / file).string();
      std::error_code ec;
      fs::rename(staged, final_path, ec);
      if (ec) fail<IoError>("cannot move '{}' to '{}': {}", staged, final_path, ec.message());
      outputs.push_back(seal_output(run.dir, file).to_json());
    }
    marker["outputs"] = outputs;
    marker["seal_s"] = seconds_since(t0);  // fsync and hashing of the outputs
    marker["start_time"] = rank_start;
    marker["end_time"] = utc_timestamp();
    marker.update(result.fields);
    if (run.run_fields.is_object()) marker.update(run.run_fields);
    atomic_write_file(mine, marker_text(marker));
  }
  const double wait_s = timed_barrier(comm);

  const auto finish_start = Clock::now();
  std::vector<nlohmann::json> markers;
  if (comm.rank() == 0) {
    // Every marker was written or checked by its own rank in this job; rank 0 re-checks the
    // cheap part (sizes and the files' ends) before it builds on them.
    for (int r = 0; r < comm.size(); ++r) {
      MarkerCheck check = check_marker(marker_path(run.dir, r), run.dir, run.fingerprint,
                                       comm.size(), VerifyLevel::kCheap);
      if (!check.valid) fail<IoError>("rank {} output is not complete: {}", r, check.reason);
      markers.push_back(std::move(check.marker));
    }
  }
  nlohmann::json fields = work.finish(comm, markers);
  nlohmann::json finish_outputs = seal_finish_outputs(comm, run.dir, fields);
  // Rank 0 writes _SUCCESS; every rank returns the exit code it records, or throws its error.
  return std::stoi(decided_by_root(comm, [&] {
    nlohmann::json summary = summary_base(run.stage, comm.size(), run.fingerprint, start_time);
    summary["exit_code"] = 0;
    if (fields.is_object()) summary.update(fields);
    summary["outputs"] = std::move(finish_outputs);
    if (run.run_fields.is_object()) summary.update(run.run_fields);
    summary["wait_s_rank0"] = wait_s;
    summary["finish_s"] = seconds_since(finish_start);
    atomic_write_file(stage_file(run.dir, kSuccessFile), marker_text(summary));
    clear_failures(run.dir, -1);
    return std::to_string(summary["exit_code"].get<int>());
  }));
}

}  // namespace

int run_stage(Comm& comm, const StageRun& run, StageWork& work) {
  const std::string start_time = utc_timestamp();
  StageState state = prepare_stage(comm, run.stage, run.dir, run.config_ini, run.fingerprint,
                                   run.options, run.run_fields, run.links);
  // From here on the directory is this job's: a failure is recorded there for tessera-status.
  clear_failures(run.dir, comm.rank());
  try {
    return run_taken_stage(comm, run, work, state, start_time);
  } catch (const std::exception& e) {
    const auto* error = dynamic_cast<const Error*>(&e);
    record_failure(run.dir, {comm.rank(), error ? error->exit_code() : kExitError, e.what(),
                             utc_timestamp()});
    throw;
  }
}

}  // namespace tessera
