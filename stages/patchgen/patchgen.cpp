#include "stages/patchgen/patchgen.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/skeleton.h"
#include "common/store/files.h"
#include "stages/patchgen/consolidate.h"
#include "stages/patchgen/extract.h"
#include "stages/patchgen/plan.h"
#include "stages/patchgen/qc.h"

namespace tessera::patchgen {

namespace fs = std::filesystem;

namespace {

constexpr const char* kDirectoryManifest = "manifest.csv";  // written with --slides

// Rank 0 validates the whole manifest (including file checks, so a large cohort is not stat'ed
// by every rank); its error reaches every rank and every rank parses the same text.
Manifest load_manifest_collectively(const Config& config, Comm& comm) {
  done_by_root(comm, [&] { load_manifest(config.manifest, /*check_files=*/true); });
  return load_manifest(config.manifest, /*check_files=*/false);
}

void make_directory(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec) fail<IoError>("cannot create '{}': {}", path, ec.message());
}

class PatchgenWork final : public StageWork {
 public:
  PatchgenWork(const Manifest& manifest, const Config& config, std::string stage_dir,
               std::string fingerprint, std::string generated_manifest)
      : manifest_(manifest),
        config_(config),
        dir_(std::move(stage_dir)),
        fingerprint_(std::move(fingerprint)),
        generated_manifest_(std::move(generated_manifest)) {
    for (const auto& s : manifest_.slides) {
      if (s.index % config_.stage.parts == config_.stage.part) part_.slides.push_back(s.index);
    }
  }

  // Slide k of the part is planned by rank k mod R; a plan kept from an earlier attempt of the
  // same configuration is reused. Ranks then exchange one count per slide, nothing more.
  std::optional<int> setup(Comm& comm, StageAction action) override {
    const std::string qc_dir = (fs::path(dir_) / "qc").string();
    make_directory(qc_dir);
    make_directory((fs::path(dir_) / kPlansDir).string());
    if (comm.rank() == 0 && !generated_manifest_.empty()) {
      atomic_write_file((fs::path(dir_) / kDirectoryManifest).string(), generated_manifest_);
    }
    const size_t n = part_.slides.size();
    part_.counts.assign(n, 0);
    part_.failed.assign(n, 0);
    for (size_t k = static_cast<size_t>(comm.rank()); k < n; k += static_cast<size_t>(comm.size())) {
      const SlideEntry& entry = manifest_.slides[part_.slides[k]];
      const std::string path = plan_path(dir_, entry.slide_id);
      std::optional<SlidePlan> plan;
      if (action == StageAction::kResume) plan = read_plan(path, fingerprint_, false);
      // A slide's plan is kept with its QC images only: one removed as damaged is made again.
      if (plan && plan->ok && config_.qc &&
          (!path_exists((fs::path(qc_dir) / (entry.slide_id + ".png")).string()) ||
           !path_exists((fs::path(qc_dir) / (entry.slide_id + ".geojson")).string()))) {
        plan.reset();
      }
      if (plan) {
        spdlog::debug("slide '{}': plan kept from an earlier attempt", entry.slide_id);
      } else {
        plan = plan_slide(entry, config_, qc_dir);
        write_plan(path, *plan, entry, fingerprint_);
        if (plan->ok) {
          spdlog::info("slide '{}': {}x{} px, {:.4f} um/px ({}), level {} read {} px, {} patches",
                       entry.slide_id, plan->width, plan->height, plan->mpp_x, plan->mpp_source,
                       plan->level.level, plan->level.read_size, plan->patch_count);
        } else {
          spdlog::warn("slide '{}' failed: {}", entry.slide_id, plan->reason);
        }
      }
      part_.counts[k] = plan->ok ? plan->patch_count : 0;
      part_.failed[k] = plan->ok ? 0 : 1;
    }
    share_plan_counts(comm, part_);
    int failed = 0;
    for (uint8_t f : part_.failed) failed += f;
    if (comm.rank() == 0) {
      spdlog::info("plan: {} patches from {} slides ({} failed){}", part_.order().total(),
                   n - failed, failed,
                   config_.stage.parts > 1
                       ? fmt::format(", part {} of {}", config_.stage.part, config_.stage.parts)
                       : "");
    }
    if (config_.fail_fast && failed > 0) {
      if (comm.rank() == 0) {
        spdlog::error("{} slide(s) failed and --fail-fast is set; stopping before extraction",
                      failed);
      }
      return kExitSlidesFailed;
    }
    return std::nullopt;
  }

  RankResult rank_work(const RankContext& context) override {
    const int rank = context.rank;
    ExtractStats stats = extract_rank(manifest_, part_, config_, rank, context.world_size, dir_,
                                      fingerprint_, context.staging_path(shard_file(rank)));
    spdlog::info("wrote {} patches in {:.1f}s (read {:.1f}s, write {:.1f}s); direct reader: {} "
                 "slides, {} tiles decoded ({:.1f}s), {} reused",
                 stats.patches, stats.total_s, stats.read_s, stats.write_s, stats.direct_slides,
                 stats.tiles_decoded, stats.tile_decode_s, stats.tile_hits);
    RankResult result;
    result.outputs = {shard_file(rank)};
    result.fields = {{"rows", stats.patches}, {"stats", stats.to_json()}};
    return result;
  }

  nlohmann::json finish(Comm& comm, const std::vector<nlohmann::json>& markers) override {
    // Each rank vouches for the plans it made (slide k of the part by rank k mod R), and for their
    // QC images (none for a slide that failed before its mask).
    nlohmann::json outputs = nlohmann::json::array();
    for (size_t k = static_cast<size_t>(comm.rank()); k < part_.slides.size();
         k += static_cast<size_t>(comm.size())) {
      const std::string& id = manifest_.slides[part_.slides[k]].slide_id;
      outputs.push_back(fs::path(plan_path(dir_, id)).lexically_relative(dir_).string());
      for (const char* ext : {".png", ".geojson"}) {
        const std::string qc = "qc/" + id + ext;
        if (config_.qc && path_exists((fs::path(dir_) / qc).string())) outputs.push_back(qc);
      }
    }
    if (comm.rank() != 0) return {{"outputs", outputs}};
    nlohmann::json summary = consolidate(manifest_, part_, config_, dir_, fingerprint_, markers);
    outputs.push_back(kIndexFile);
    if (!generated_manifest_.empty()) outputs.push_back(kDirectoryManifest);
    if (config_.qc) {
      std::vector<std::string> ids;
      ids.reserve(part_.slides.size());
      for (int index : part_.slides) ids.push_back(manifest_.slides[index].slide_id);
      const std::string qc_dir = (fs::path(dir_) / "qc").string();
      write_qc_overview((fs::path(qc_dir) / "_overview.png").string(), qc_dir, ids);
      outputs.push_back("qc/_overview.png");
    }
    spdlog::info("patchgen complete: {} patches, {} slides ok, {} failed; index '{}/index.h5', "
                 "QC images in '{}/qc'",
                 summary["patches"].get<int64_t>(), summary["slides_ok"].get<int>(),
                 summary["slides_failed"].get<int>(), dir_, dir_);
    summary["outputs"] = std::move(outputs);
    return summary;
  }

 private:
  const Manifest& manifest_;
  const Config& config_;
  std::string dir_;
  std::string fingerprint_;
  std::string generated_manifest_;  // --slides: written to the stage directory by rank 0
  PartPlan part_;
};

// With --slides, rank 0 lists the directory, validates the manifest it makes (file checks
// included) and broadcasts its text; its error reaches every rank.
std::string directory_manifest_collectively(const Config& config, const std::string& manifest_path,
                                            Comm& comm) {
  return decided_by_root(comm, [&] {
    std::string text = directory_manifest(config.slides, slide_extensions(config.ext));
    const Manifest manifest = parse_manifest(text, manifest_path);
    std::string error;
    for (const auto& p : check_manifest_files(manifest)) error += "\n  " + p;
    if (!error.empty()) fail<InvalidInput>("--slides '{}':{}", config.slides, error);
    return text;
  });
}

}  // namespace

int run(const Config& config, Comm& comm) {
  const std::string stage_dir =
      RunLayout(config.out).stage_dir(kPatchgenStage, "", config.stage.part, config.stage.parts);
  std::optional<Manifest> manifest;
  std::string manifest_sha256;
  std::string generated;  // with --slides: the manifest's text, which setup() writes
  if (config.slides.empty()) {
    manifest = load_manifest_collectively(config, comm);
    manifest_sha256 = sha256_file(config.manifest);
  } else {
    // Written inside the stage directory once the skeleton has prepared it (a fresh start
    // empties the directory), so the manifest is fingerprinted from its text.
    const std::string path = (fs::path(stage_dir) / kDirectoryManifest).string();
    generated = directory_manifest_collectively(config, path, comm);
    manifest = parse_manifest(generated, path);
    manifest_sha256 = sha256_hex(generated);
  }
  const std::string fingerprint =
      sha256_hex(config.fingerprint_ini + "manifest_sha256 = " + manifest_sha256 + "\n");
  PatchgenWork work(*manifest, config, stage_dir, fingerprint, generated);
  StageRun run{kPatchgenStage, stage_dir, config.config_ini, fingerprint, config.stage,
               {{"part", config.stage.part}, {"parts", config.stage.parts}},
               {config.out, {}}};
  return run_stage(comm, run, work);
}

}  // namespace tessera::patchgen
