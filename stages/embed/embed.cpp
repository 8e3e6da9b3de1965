#include "stages/embed/embed.h"

#include <filesystem>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/layout.h"
#include "common/stage/lineage.h"
#include "common/stage/skeleton.h"
#include "common/store/embeddings.h"
#include "common/store/files.h"
#include "stages/embed/infer.h"
#include "stages/embed/merge.h"
#include "stages/embed/model.h"
#include "stages/embed/source.h"

namespace tessera::embed {

namespace fs = std::filesystem;

namespace {

class EmbedWork final : public StageWork {
 public:
  EmbedWork(const Config& config, const IndexInfo& info, nlohmann::json model_fingerprint,
            std::string stage_dir, std::string fingerprint, int local_rank)
      : config_(config),
        info_(info),
        model_fingerprint_(std::move(model_fingerprint)),
        dir_(std::move(stage_dir)),
        fingerprint_(std::move(fingerprint)),
        local_rank_(local_rank) {}

  // The model is built only once the skeleton knows there is work, with the fingerprint rank 0
  // computed (a TorchScript file is hashed once per job).
  std::optional<int> setup(Comm& comm, StageAction) override {
    model_.emplace(Model::load(model_spec(config_, local_rank_), model_fingerprint_));
    if (comm.rank() == 0) {
      spdlog::info("embed: {} patches, model {} (D={}, input {}), batch {}, {} {}, source {}, "
                   "partition {}",
                   info_.rows, config_.model, model_->output_dim(), model_->input_size(),
                   config_.batch_size, config_.device, config_.precision, config_.source,
                   config_.partition.to_string());
    }
    return std::nullopt;
  }

  RankResult rank_work(const RankContext& context) override {
    const int rank = context.rank;
    const int world_size = context.world_size;
    std::error_code ec;
    const fs::path shards = fs::path(dir_) / kShardsDir;
    fs::create_directories(shards, ec);
    if (ec) fail<IoError>("cannot create '{}': {}", shards.string(), ec.message());
    const Partition partition(config_.partition, info_.rows, world_size);
    IndexReader index(info_.path);
    auto source = make_source(config_.source, info_, config_.reader);
    InferStats stats =
        embed_rows(info_, index, partition, rank, *model_, *source, config_,
                   context.staging_path(embedding_shard_file(rank)),
                   stage_file(dir_, kProgressFile));
    spdlog::info("embedded {} patches in {:.1f}s ({:.1f}/s; read {:.1f}s, prepare {:.1f}s, "
                 "forward {:.1f}s, write {:.1f}s, waiting {:.1f}s)",
                 stats.patches, stats.total_s, stats.patches / std::max(1e-9, stats.total_s),
                 stats.read_s, stats.prepare_s, stats.forward_s, stats.write_s, stats.wait_s);
    RankResult result;
    result.outputs = {embedding_shard_file(rank)};
    result.fields = {{"rows", stats.patches},
                     {"model", model_fingerprint_},
                     {"stats", stats.to_json()}};
    return result;
  }

  // Rank 0 maps embeddings.h5 onto the shards; then every rank writes its share of the per-slide
  // feature files through it.
  nlohmann::json finish(Comm& comm, const std::vector<nlohmann::json>& markers) override {
    const Partition partition(config_.partition, info_.rows, comm.size());
    done_by_root(comm, [&] {
      // The patch run must still be the one embedded (lineage.h): a patchgen --overwrite
      // meanwhile would leave embeddings that belong to another index.
      const std::string changed = stale_reason(dir_);
      if (!changed.empty()) {
        fail<IoError>("{} while embed ran; its embeddings are not written: rerun embed", changed);
      }
      write_embeddings_file(info_, partition, model_->output_dim(), config_, model_fingerprint_,
                            dir_, fingerprint_);
    });
    IndexReader index(info_.path);
    SlideFilesSpec spec;
    spec.peers = config_.peer_layouts;
    spec.encoder = trident_encoder_name(model_fingerprint_, config_.tag);
    spec.overlap = info_.overlap;
    std::vector<std::string> outputs;
    const int64_t slides = comm.allreduce_sum(write_slide_features(
        info_, index, comm.rank(), comm.size(), model_fingerprint_, spec, dir_, &outputs));
    if (comm.rank() != 0) return {{"outputs", outputs}};
    write_status_table(info_, dir_);
    outputs.insert(outputs.begin(), {kEmbeddingsFile, kSlideStatusFile});
    int64_t empty_slides = 0;
    for (size_t s = 0; s < info_.slides.size(); ++s) {
      if (slide_outcome(info_.slides, s) == SlideOutcome::kEmpty) ++empty_slides;
    }
    nlohmann::json totals = {{"read_s", 0.0},  {"prepare_s", 0.0}, {"forward_s", 0.0},
                             {"write_s", 0.0}, {"wait_s", 0.0},    {"total_s", 0.0}};
    for (const auto& m : markers) {
      for (auto& [key, value] : totals.items()) {
        value = value.get<double>() + m.at("stats").at(key).get<double>();
      }
    }
    spdlog::info("embed complete: {} embeddings of dimension {} in '{}/embeddings.h5', {} slide "
                 "files in '{}/features' ({} without patches), peer layouts {}",
                 info_.rows, model_->output_dim(), dir_, slides, dir_, empty_slides,
                 config_.peer_layouts.to_string());
    const bool empty = info_.rows == 0;
    if (empty) {
      spdlog::error("the patch run '{}' has no patches: every one of its {} slides failed (see "
                    "its _SUCCESS); nothing was embedded",
                    info_.stage_dir, info_.success.value("slides", 0));
    }
    return {{"tag", config_.tag},
            {"status", empty ? "completed_without_patches" : "completed"},
            {"exit_code", empty ? kExitSlidesFailed : kExitOk},
            {"patches", info_.rows},
            {"slides", slides},
            {"empty_slides", empty_slides},
            {"peer_layouts", config_.peer_layouts.to_string()},
            {"encoder", spec.encoder},
            {"output_dim", model_->output_dim()},
            {"store_dtype", config_.store_dtype},
            {"source", config_.source},
            {"partition", config_.partition.to_string()},
            {"model", model_fingerprint_},
            {"patchgen_fingerprint", info_.config_fingerprint},
            {"seconds_summed_over_ranks", totals},
            {"outputs", outputs}};
  }

 private:
  const Config& config_;
  const IndexInfo& info_;
  nlohmann::json model_fingerprint_;
  std::string dir_;
  std::string fingerprint_;
  int local_rank_;
  std::optional<Model> model_;
};

}  // namespace

int run(const Config& config, Comm& comm) {
  const RunLayout layout(config.run);
  const std::string patchgen_dir =
      layout.stage_dir(kPatchgenStage, "", config.stage.part, config.stage.parts);
  // Held shared until embed ends: patchgen cannot replace the run meanwhile.
  const std::optional<FileLock> input_lock = hold_input(comm, patchgen_dir, config.stage);
  check_stage_input(comm, patchgen_dir, config.stage.verify);
  const IndexInfo info = load_index_info(patchgen_dir);
  if (config.partition.kind != PartitionKind::kContiguous &&
      info.rows / config.partition.block > 100000 && comm.rank() == 0) {
    // HDF5 1.10 keeps a strided virtual-dataset mapping as one block per run of rows.
    spdlog::warn("--partition {} over {} rows maps embeddings.h5 onto the shards in {} pieces, "
                 "which HDF5 opens slowly; --partition contiguous maps one piece per rank",
                 config.partition.to_string(), info.rows, info.rows / config.partition.block);
  }
  if (config.source == "wsi" && info.encoding != "raw" && comm.rank() == 0) {
    spdlog::warn("--source wsi reads the slides; the store is JPEG-encoded, so embeddings will "
                 "differ slightly from --source store");
  }
  // Rank 0 checks the patches against the preset's recommendations (refusing, before anything is
  // written, what would embed at the wrong scale) and describes the model (hashing a TorchScript
  // file) for the fingerprint; the others receive the description.
  const nlohmann::json model_fingerprint = nlohmann::json::parse(decided_by_root(comm, [&] {
    const ModelSpec spec = model_spec(config, comm.local_rank());
    enforce_preset(Model::preset_of(spec), info.patch_size, info.mpp, config.precision,
                   config.force_preset_mismatch);
    return Model::describe(spec).dump();
  }));
  const std::string stage_dir =
      layout.stage_dir(kEmbedStage, config.tag, config.stage.part, config.stage.parts);
  const std::string fingerprint =
      sha256_hex(config.fingerprint_ini + "model = " + model_fingerprint.dump() +
                 "\npatchgen = " + info.config_fingerprint + "\n");
  EmbedWork work(config, info, model_fingerprint, stage_dir, fingerprint, comm.local_rank());
  StageRun run{kEmbedStage, stage_dir, config.config_ini, fingerprint, config.stage,
               {{"part", config.stage.part}, {"parts", config.stage.parts}},
               {config.run, {patchgen_dir}}};
  return run_stage(comm, run, work);
}

}  // namespace tessera::embed
