#include "benchmarks/ingest/synthetic_stages.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <optional>
#include <utility>

#include "benchmarks/bench_report.h"
#include "benchmarks/synthetic_run.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/mpi/comm.h"
#include "common/stage/partition.h"
#include "common/stage/skeleton.h"
#include "common/store/embeddings.h"
#include "common/store/files.h"
#include "common/store/index.h"
#include "common/store/store.h"
#include "stages/embed/config.h"
#include "stages/embed/merge.h"
#include "stages/patchgen/config.h"
#include "stages/patchgen/consolidate.h"
#include "stages/patchgen/extract.h"
#include "stages/patchgen/manifest.h"
#include "stages/patchgen/plan.h"

namespace tessera::ingest_bench {

using nlohmann::json;

namespace {

namespace fs = std::filesystem;
using bench::Stopwatch;
using bench::synthetic_manifest;
using bench::synthetic_plan;

// patchgen through the stage skeleton: every rank writes the plans of its slides, then a
// ShardWriter shard of 1-pixel-wide blank patches; rank 0 consolidates index.h5.
class SyntheticPatchgen final : public StageWork {
 public:
  SyntheticPatchgen(const patchgen::Manifest& manifest, const patchgen::PartPlan& part,
                    const patchgen::Config& config, std::string dir, std::string fingerprint)
      : manifest_(manifest), part_(part), config_(config), dir_(std::move(dir)),
        fingerprint_(std::move(fingerprint)) {}

  std::optional<int> setup(Comm& comm, StageAction) override {
    make_directories((fs::path(dir_) / kPlansDir).string());
    make_directories((fs::path(dir_) / kShardsDir).string());
    for (size_t k = static_cast<size_t>(comm.rank()); k < manifest_.slides.size();
         k += static_cast<size_t>(comm.size())) {
      write_plan(patchgen::plan_path(dir_, manifest_.slides[k].slide_id),
                 synthetic_plan(0, static_cast<int>(k), part_.counts[k]), manifest_.slides[k],
                 fingerprint_);
    }
    comm.barrier();
    return std::nullopt;
  }

  RankResult rank_work(const RankContext& context) override {
    Stopwatch total;
    const patchgen::PatchOrder order = part_.order();
    const Partition partition(config_.partition, order.total(), context.world_size);
    patchgen::ExtractStats stats;
    stats.planned = partition.count(context.rank);
    const std::string file = patchgen::shard_file(context.rank);
    ShardWriter writer(context.staging_path(file), config_.layout, context.rank,
                       context.world_size);
    const std::vector<uint8_t> pixel(3 * config_.layout.patch_size * config_.layout.patch_size);
    std::optional<patchgen::SlidePlan> plan;
    int open = -1;
    for (int64_t j = 0; j < partition.count(context.rank); ++j) {
      const auto [position, ordinal] = order.locate(partition.global_index(context.rank, j));
      const int slide = part_.slides[position];
      if (open != position) {
        plan = synthetic_plan(0, slide, part_.counts[position]);
        open = position;
      }
      const patchgen::GridPatch& g = plan->patches[ordinal];
      writer.add(patchgen::make_patch_id(slide, ordinal), slide, g.x, g.y, g.tissue, pixel.data());
      ++stats.patches;
    }
    writer.close();
    stats.write_s = writer.write_seconds();
    stats.total_s = total.seconds();
    return {{file}, {{"rows", stats.patches}, {"stats", stats.to_json()}}};
  }

  json finish(Comm& comm, const std::vector<json>& markers) override {
    if (comm.rank() != 0) return {};
    json summary = patchgen::consolidate(manifest_, part_, config_, dir_, fingerprint_, markers);
    summary["outputs"] = json::array({kIndexFile});  // sealed in _SUCCESS, as patchgen does
    return summary;
  }

 private:
  const patchgen::Manifest& manifest_;
  const patchgen::PartPlan& part_;
  const patchgen::Config& config_;
  std::string dir_;
  std::string fingerprint_;
};

// embed through the stage skeleton: each rank reads its rows of index.h5 and appends their
// mixture rows to an EmbeddingShardWriter shard; rank 0 writes embeddings.h5.
class SyntheticEmbed final : public StageWork {
 public:
  SyntheticEmbed(const IndexInfo& info, const Mixture& mixture, const embed::Config& config,
                 json model, std::string dir, std::string fingerprint)
      : info_(info), mixture_(mixture), config_(config), model_(std::move(model)),
        dir_(std::move(dir)), fingerprint_(std::move(fingerprint)) {}

  std::optional<int> setup(Comm&, StageAction) override { return std::nullopt; }

  RankResult rank_work(const RankContext& context) override {
    Stopwatch total;
    make_directories((fs::path(dir_) / kShardsDir).string());
    const Partition partition(config_.partition, info_.rows, context.world_size);
    const std::string file = embedding_shard_file(context.rank);
    EmbeddingShardWriter writer(context.staging_path(file), mixture_.dim(),
                                config_.store_dtype == "fp16", context.rank, model_.dump());
    IndexReader index(info_.path);
    const int64_t first = partition.count(context.rank) ? partition.global_index(context.rank, 0) : 0;
    const int64_t count = partition.count(context.rank);
    std::vector<float> values;
    double values_s = 0, write_s = 0;
    for (int64_t at = first; at < first + count; at += kBlockRows) {
      const int64_t n = std::min(kBlockRows, first + count - at);
      const IndexRows rows = index.read_range(at, n);
      Stopwatch fill;
      values.resize(static_cast<size_t>(n) * mixture_.dim());
      for (int64_t i = 0; i < n; ++i) {
        mixture_.row(rows.patch_id[i], values.data() + static_cast<size_t>(i) * mixture_.dim());
      }
      values_s += fill.seconds();
      Stopwatch write;
      writer.append(rows.patch_id.data(), rows.slide.data(), rows.coords.data(), values.data(),
                    static_cast<size_t>(n));
      write_s += write.seconds();
    }
    writer.close();
    return {{file},
            {{"rows", writer.rows()},
             {"model", model_},
             {"stats", {{"values_s", values_s}, {"write_s", write_s}, {"total_s", total.seconds()}}}}};
  }

  json finish(Comm& comm, const std::vector<json>&) override {
    if (comm.rank() != 0) return {};
    const Partition partition(config_.partition, info_.rows, comm.size());
    embed::write_embeddings_file(info_, partition, mixture_.dim(), config_, model_, dir_,
                                 fingerprint_);
    return {{"tag", kTag},
            {"status", "completed"},
            {"exit_code", 0},
            {"patches", info_.rows},
            {"output_dim", mixture_.dim()},
            {"store_dtype", config_.store_dtype},
            {"source", "synthetic"},
            {"partition", config_.partition.to_string()},
            {"model", model_},
            {"patchgen_fingerprint", info_.config_fingerprint},
            {"outputs", json::array({kEmbeddingsFile})}};  // sealed in _SUCCESS, as embed does
  }

 private:
  const IndexInfo& info_;
  const Mixture& mixture_;
  const embed::Config& config_;
  json model_;
  std::string dir_;
  std::string fingerprint_;
};

}  // namespace

json generate(const Options& o, const Size& size, const Mixture& mixture, const std::string& run) {
  SerialComm comm;
  remove_tree(run);
  make_directories(run);
  const std::string patchgen_dir = (fs::path(run) / "patchgen").string();
  const std::string embed_dir = (fs::path(run) / "embed" / kTag).string();
  const patchgen::Manifest manifest = synthetic_manifest(o.slides, run);
  patchgen::PartPlan part;
  for (int k = 0; k < o.slides; ++k) {
    part.slides.push_back(k);
    part.counts.push_back(size.rows / o.slides + (k < size.rows % o.slides ? 1 : 0));
    part.failed.push_back(0);
  }
  patchgen::Config pconfig;
  pconfig.patch_size = 8;
  pconfig.layout.patch_size = 8;
  pconfig.layout.encoding = "raw";
  pconfig.layout.chunk_patches = 1024;
  pconfig.partition = Partition::Spec::parse("contiguous", "--partition");
  const std::string pfingerprint = sha256_hex(
      fmt::format("ingest_bench patchgen slides={} rows={}", o.slides, size.rows));
  StageOptions stage;
  Stopwatch pwatch;
  SyntheticPatchgen pwork(manifest, part, pconfig, patchgen_dir, pfingerprint);
  if (run_stage(comm, {"patchgen", patchgen_dir, "# synthetic (ingest_bench)\n", pfingerprint,
                       stage, {{"part", 0}, {"parts", 1}}, {}},
                pwork) != 0) {
    fail<Error>("the synthetic patchgen stage failed");
  }
  const double patchgen_s = pwatch.seconds();
  const IndexInfo info = load_index_info(patchgen_dir);

  embed::Config econfig;
  econfig.tag = kTag;
  econfig.store_dtype = "fp32";
  econfig.partition = Partition::Spec::parse("contiguous", "--partition");
  const json model = {{"name", "synthetic-gaussian-mixture"}, {"output_dim", size.dim},
                      {"clusters", o.clusters}, {"spread", o.spread}, {"seed", o.seed}};
  const std::string efingerprint =
      sha256_hex("ingest_bench embed model = " + model.dump() + "\npatchgen = " +
                 info.config_fingerprint + "\n");
  Stopwatch ewatch;
  SyntheticEmbed ework(info, mixture, econfig, model, embed_dir, efingerprint);
  if (run_stage(comm, {"embed", embed_dir, "# synthetic (ingest_bench)\n", efingerprint, stage,
                       {{"part", 0}, {"parts", 1}}, {}},
                ework) != 0) {
    fail<Error>("the synthetic embed stage failed");
  }
  const double embed_s = ewatch.seconds();
  spdlog::info("generated {} rows of D = {} in {:.1f} s (patchgen {:.1f} s, embed {:.1f} s)",
               size.rows, size.dim, patchgen_s + embed_s, patchgen_s, embed_s);
  return {{"patchgen_s", patchgen_s},
          {"embed_s", embed_s},
          {"rows", info.rows},
          {"embeddings_bytes", file_size((fs::path(embed_dir) / embedding_shard_file(0)).string()).value_or(0)},
          {"patchgen_fingerprint", info.config_fingerprint},
          {"embed_fingerprint", efingerprint}};
}

}  // namespace tessera::ingest_bench
