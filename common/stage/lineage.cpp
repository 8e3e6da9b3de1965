#include "common/stage/lineage.h"

#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/layout.h"

namespace tessera {

namespace fs = std::filesystem;

namespace {

std::string absolute_dir(const std::string& dir) {
  std::string abs = fs::absolute(dir).lexically_normal().string();
  if (abs.size() > 1 && abs.back() == '/') abs.pop_back();
  return abs;
}

// The absolute input directory a record of `stage_dir` names.
std::string recorded_dir(const std::string& stage_dir, const nlohmann::json& input) {
  return absolute_dir((fs::path(absolute_dir(stage_dir)) / input.value("dir", "")).string());
}

// run.json of a stage directory, or nullopt when it is absent or unreadable.
std::optional<nlohmann::json> run_json_of(const std::string& dir) {
  try {
    return read_json_file(stage_file(dir, kRunFile));
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::string stale_reason_at(const std::string& stage_dir, int depth) {
  const std::string stale = stage_file(stage_dir, kStaleFile);
  if (path_exists(stale)) {
    std::string why = "it was made from a replaced input";
    try {
      auto j = read_json_file(stale);
      if (j && j->is_object()) why = j->value("reason", why);
    } catch (const std::exception&) {
    }
    return fmt::format("'{}' is stale: {}", stage_dir, why);
  }
  const auto run = run_json_of(stage_dir);
  if (!run || !run->is_object() || !run->contains("inputs") || !(*run)["inputs"].is_array()) {
    return "";
  }
  for (const auto& input : (*run)["inputs"]) {
    if (!input.is_object()) continue;
    const std::string dir = recorded_dir(stage_dir, input);
    const std::string success = stage_file(dir, kSuccessFile);
    if (!path_exists(success)) {
      return fmt::format("'{}' was made from '{}', which is no longer complete (no {})",
                         stage_dir, dir, kSuccessFile);
    }
    std::string now;
    try {
      now = xxh3_hex(read_file(success));
    } catch (const std::exception& e) {
      return fmt::format("'{}' was made from '{}', whose {} cannot be read: {}", stage_dir, dir,
                         kSuccessFile, e.what());
    }
    if (now != input.value("success_xxh3", "")) {
      return fmt::format("'{}' was made from '{}', which was rerun or replaced since (its {} "
                         "changed)",
                         stage_dir, dir, kSuccessFile);
    }
    if (depth < 8) {
      const std::string upstream = stale_reason_at(dir, depth + 1);
      if (!upstream.empty()) {
        return fmt::format("'{}' was made from '{}', which is no longer valid: {}", stage_dir, dir,
                           upstream);
      }
    }
  }
  return "";
}

}  // namespace

nlohmann::json input_record(const std::string& input_dir, const std::string& stage_dir) {
  const std::string dir = absolute_dir(input_dir);
  const auto run = run_json_of(dir);
  const std::string success = stage_file(dir, kSuccessFile);
  if (!run || !path_exists(success)) {
    fail<IoError>("'{}' is not a complete stage directory (no {} or {})", dir, kRunFile,
                  kSuccessFile);
  }
  return {{"stage", run->value("stage", "")},
          {"dir", fs::path(dir).lexically_relative(absolute_dir(stage_dir)).string()},
          {"config_fingerprint", run->value("config_fingerprint", "")},
          {"success_xxh3", xxh3_hex(read_file(success))}};
}

std::string stale_reason(const std::string& stage_dir) { return stale_reason_at(stage_dir, 0); }

std::vector<std::string> mark_downstream_stale(const std::string& run, const std::string& stage,
                                               const std::string& replaced_dir,
                                               const std::string& reason) {
  const RunLayout layout(run);
  std::set<std::string> replaced = {absolute_dir(replaced_dir)};
  std::vector<std::string> marked;
  for (const std::string& downstream : downstream_stages(stage)) {
    for (const StageDir& sd : layout.stage_dirs(downstream)) {
      const auto rj = run_json_of(sd.dir);
      if (!rj || !rj->is_object()) continue;  // never started: nothing to mark
      bool made_from_replaced = true;         // no lineage recorded: conservatively yes
      if (rj->contains("inputs") && (*rj)["inputs"].is_array()) {
        made_from_replaced = false;
        for (const auto& input : (*rj)["inputs"]) {
          if (input.is_object() && replaced.count(recorded_dir(sd.dir, input))) {
            made_from_replaced = true;
          }
        }
      }
      if (!made_from_replaced) continue;
      replaced.insert(absolute_dir(sd.dir));
      if (path_exists(stage_file(sd.dir, kStaleFile))) continue;
      const nlohmann::json stale = {{"reason", reason},
                                    {"input", absolute_dir(replaced_dir)},
                                    {"time", utc_timestamp()}};
      atomic_write_file(stage_file(sd.dir, kStaleFile), stale.dump(2) + "\n");
      spdlog::warn("'{}' was made from '{}', which is being replaced: marked stale", sd.dir,
                   replaced_dir);
      marked.push_back(sd.dir);
    }
  }
  return marked;
}

}  // namespace tessera
