#include "stages/embed/embed.h"

#include <chrono>
#include <filesystem>

#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/marker.h"
#include "stages/embed/infer.h"
#include "stages/embed/merge.h"
#include "stages/embed/model.h"
#include "stages/embed/source.h"
#include "stages/embed/work.h"
#include "common/store/index.h"

namespace tessera::embed {

namespace fs = std::filesystem;

int run(const Config& config, Comm& comm) {
  const std::string start_time = utc_timestamp();
  const PatchIndex index = load_index(config.run);
  if (config.source == "wsi" && index.encoding != "raw" && comm.rank() == 0) {
    spdlog::warn("--source wsi reads the slides; the store is JPEG-encoded, so embeddings will "
                 "differ slightly from --source store");
  }
  const Model model = Model::load(model_spec(config, comm.local_rank()));
  const std::string stage_dir = (fs::path(config.run) / "embed" / config.tag).string();
  const std::string fingerprint =
      sha256_hex(config.fingerprint_ini + "model = " + model.fingerprint().dump() +
                 "\npatchgen = " + index.config_fingerprint + "\n");
  StageState state =
      prepare_stage(comm, "embed", stage_dir, config.config_ini, fingerprint, config.stage.overwrite);
  if (state.action == StageAction::kComplete) {
    if (comm.rank() == 0) {
      spdlog::info("'{}' is already complete for this configuration; nothing to do", stage_dir);
    }
    return kExitOk;
  }
  if (comm.rank() == 0) {
    spdlog::info("embed: {} patches, model {} (D={}, input {}), {} ranks, batch {}, {} {}, "
                 "source {}, output '{}' ({})",
                 index.size(), config.model, model.output_dim(), model.input_size(), comm.size(),
                 config.batch_size, config.device, config.precision, config.source, stage_dir,
                 state.action == StageAction::kResume ? "resuming" : "fresh");
  }
  const std::string shard_rel = "shards/" + rank_file_name(comm.rank(), ".h5");
  const std::string shard_path = (fs::path(stage_dir) / shard_rel).string();
  const std::string marker_path =
      (fs::path(stage_dir) / "markers" / rank_file_name(comm.rank(), ".json")).string();
  if (!rank_output_complete(state.action, marker_path, stage_dir, fingerprint, comm.size())) {
    const std::string rank_start = utc_timestamp();
    fs::create_directories(fs::path(shard_path).parent_path());
    fs::remove(marker_path);
    auto rows = rank_rows(static_cast<int64_t>(index.size()), comm.rank(), comm.size());
    auto source = make_source(config.source, index);
    InferStats stats = embed_rows(index, rows, model, *source, config, comm.rank(), shard_path,
                                  (fs::path(stage_dir) / "progress.jsonl").string());
    nlohmann::json marker = marker_base("embed", comm.rank(), comm.size(), fingerprint);
    marker["file"] = shard_rel;
    marker["file_bytes"] = file_size(shard_path).value_or(0);
    marker["file_sha256"] = sha256_file(shard_path);
    marker["rows"] = stats.patches;
    marker["model"] = model.fingerprint();
    marker["stats"] = stats.to_json();
    marker["start_time"] = rank_start;
    marker["end_time"] = utc_timestamp();
    atomic_write_file(marker_path, marker.dump(2) + "\n");
    spdlog::info("embedded {} patches in {:.1f}s ({:.1f}/s; read {:.1f}s, prepare {:.1f}s, "
                 "forward {:.1f}s, write {:.1f}s, waiting {:.1f}s)",
                 stats.patches, stats.total_s, stats.patches / std::max(1e-9, stats.total_s),
                 stats.read_s, stats.prepare_s, stats.forward_s, stats.write_s, stats.wait_s);
  }
  const double wait_s = timed_barrier(comm);
  std::string outcome;
  if (comm.rank() == 0) {
    auto summary = merge(index, config, model.fingerprint(), model.output_dim(), comm.size(),
                         stage_dir, fingerprint, start_time, wait_s);
    spdlog::info("embed complete: {} embeddings of dimension {} in '{}/embeddings.h5', {} slide "
                 "files in '{}/features'",
                 summary["patches"].get<int64_t>(), model.output_dim(), stage_dir,
                 summary["slides"].get<int64_t>(), stage_dir);
    outcome = "0";
  }
  outcome = comm.broadcast(outcome, 0);
  return std::stoi(outcome);
}

}  // namespace tessera::embed
