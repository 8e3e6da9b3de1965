#include "stages/patchgen/patchgen.h"

#include <chrono>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/marker.h"
#include "stages/patchgen/consolidate.h"
#include "stages/patchgen/extract.h"
#include "stages/patchgen/plan.h"

namespace tessera::patchgen {

namespace fs = std::filesystem;

namespace {

// Rank 0 validates the whole manifest (including file checks, so a large cohort is not stat'ed
// by every rank); the outcome is broadcast and every rank parses the same text.
std::optional<Manifest> load_manifest_collectively(const Config& config, Comm& comm) {
  std::string outcome;
  if (comm.rank() == 0) {
    try {
      load_manifest(config.manifest, /*check_files=*/true);
    } catch (const InvalidInput& e) {
      outcome = e.what();
    }
  }
  outcome = comm.broadcast(outcome, 0);
  if (!outcome.empty()) {
    if (comm.rank() == 0) spdlog::error("{}", outcome);
    return std::nullopt;
  }
  return load_manifest(config.manifest, /*check_files=*/false);
}

std::vector<SlidePlan> plan_slides(const Manifest& manifest, const Config& config, Comm& comm,
                                   const std::string& qc_dir) {
  std::vector<SlidePlan> mine;
  for (size_t s = comm.rank(); s < manifest.slides.size(); s += comm.size()) {
    mine.push_back(plan_slide(manifest.slides[s], config, qc_dir));
    const SlidePlan& p = mine.back();
    if (p.ok) {
      spdlog::info("slide '{}': {}x{} px, {:.4f} um/px ({}), level {} read {} px, {} patches",
                   manifest.slides[s].slide_id, p.width, p.height, p.mpp_x, p.mpp_source,
                   p.level.level, p.level.read_size, p.patches.size());
    } else {
      spdlog::warn("slide '{}' failed: {}", manifest.slides[s].slide_id, p.reason);
    }
  }
  std::vector<SlidePlan> plans(manifest.slides.size());
  for (const auto& bytes : comm.allgather(encode_plans(mine))) {
    for (auto& p : decode_plans(bytes)) plans[p.index] = std::move(p);
  }
  return plans;
}

}  // namespace

int run(const Config& config, Comm& comm) {
  const std::string start_time = utc_timestamp();
  auto manifest = load_manifest_collectively(config, comm);
  if (!manifest) return kExitBadInput;
  const std::string stage_dir = (fs::path(config.out) / "patchgen").string();
  const std::string fingerprint =
      sha256_hex(config.fingerprint_ini + "manifest_sha256 = " + sha256_file(config.manifest) + "\n");
  StageState state =
      prepare_stage(comm, "patchgen", stage_dir, config.config_ini, fingerprint, config.stage.overwrite);
  if (state.action == StageAction::kComplete) {
    auto summary = read_json_file((fs::path(stage_dir) / "_SUCCESS").string());
    int code = summary ? summary->value("exit_code", 0) : 0;
    if (comm.rank() == 0) {
      spdlog::info("'{}' is already complete for this configuration ({} patches); nothing to do",
                   stage_dir, summary ? summary->value("patches", 0) : 0);
    }
    return code;
  }
  if (comm.rank() == 0) {
    spdlog::info("patchgen: {} slides, {} ranks, run directory '{}' ({})", manifest->slides.size(),
                 comm.size(), stage_dir,
                 state.action == StageAction::kResume ? "resuming" : "fresh");
  }
  const std::string qc_dir = (fs::path(stage_dir) / "qc").string();
  if (comm.rank() == 0) fs::create_directories(qc_dir);
  comm.barrier();

  std::vector<SlidePlan> plans = plan_slides(*manifest, config, comm, qc_dir);
  int failed_at_planning = 0;
  for (const auto& p : plans) failed_at_planning += p.ok ? 0 : 1;
  if (config.fail_fast && failed_at_planning > 0) {
    if (comm.rank() == 0) {
      spdlog::error("{} slide(s) failed and --fail-fast is set; stopping before extraction",
                    failed_at_planning);
    }
    return kExitSlidesFailed;
  }
  if (comm.rank() == 0) {
    int64_t total = PatchOrder(plans).total();
    spdlog::info("plan: {} patches from {} slides ({} failed)", total,
                 plans.size() - failed_at_planning, failed_at_planning);
  }

  const std::string marker_path =
      (fs::path(stage_dir) / "markers" / rank_file_name(comm.rank(), ".json")).string();
  if (!rank_output_complete(state.action, marker_path, stage_dir, fingerprint, comm.size())) {
    ExtractStats stats = extract_rank(*manifest, plans, config, comm.rank(), comm.size(),
                                      stage_dir, fingerprint);
    spdlog::info("wrote {} patches in {:.1f}s (read {:.1f}s, write {:.1f}s)", stats.patches,
                 stats.total_s, stats.read_s, stats.write_s);
  }
  const double wait_s = timed_barrier(comm);

  std::string outcome;
  if (comm.rank() == 0) {
    nlohmann::json summary =
        consolidate(*manifest, plans, config, comm.size(), stage_dir, fingerprint, start_time, wait_s);
    spdlog::info("patchgen complete: {} patches, {} slides ok, {} failed; index '{}/index.h5', "
                 "QC images in '{}'",
                 summary["patches"].get<int64_t>(), summary["slides_ok"].get<int>(),
                 summary["slides_failed"].get<int>(), stage_dir, qc_dir);
    outcome = std::to_string(summary["exit_code"].get<int>());
  }
  outcome = comm.broadcast(outcome, 0);
  return std::stoi(outcome);
}

}  // namespace tessera::patchgen
