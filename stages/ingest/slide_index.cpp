#include "stages/ingest/slide_index.h"

#include <algorithm>
#include <filesystem>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/layout.h"
#include "common/stage/skeleton.h"
#include "common/vector/catalog.h"
#include "common/vector/slide_catalog.h"
#include "common/vector/vector_index.h"
#include "common/store/slide_vectors.h"

namespace tessera::ingest {

namespace fs = std::filesystem;

namespace {

// The aggregate output to index: --slides, else the only one under RUN/slides (aggregate's
// folder) that holds a cohort file of `level`.
std::string resolve_source(const Config& config) {
  const RunLayout layout(config.run);
  if (!config.slides.empty()) return layout.stage_root(kAggregateStage, config.slides);
  std::vector<std::string> names;
  for (const auto& name : layout.names(kAggregateStage)) {
    const fs::path dir = layout.stage_root(kAggregateStage, name);
    if (path_exists((dir / cohort_file_name(config.level)).string())) names.push_back(name);
  }
  if (names.size() != 1) {
    fail<InvalidInput>("'{}' holds {} aggregate outputs at {} level ({}): name one with --slides",
                       layout.stage_base(kAggregateStage), names.size(),
                       config.level, fmt::join(names, ", "));
  }
  return layout.stage_root(kAggregateStage, names.front());
}

class SlideIndexWork final : public StageWork {
 public:
  SlideIndexWork(const Config& config, std::string source, std::string dir)
      : config_(config), source_(std::move(source)), dir_(std::move(dir)) {}

  std::optional<int> setup(Comm&, StageAction) override { return std::nullopt; }

  RankResult rank_work(const RankContext& context) override {
    RankResult result;
    if (context.rank != 0) return result;  // one index, built by rank 0
    CohortVectors cohort =
        read_cohort_vectors((fs::path(source_) / cohort_file_name(config_.level)).string());
    if (cohort.level != config_.level) {
      fail<InvalidInput>("'{}' holds {}-level vectors, not {}-level", source_, cohort.level,
                         config_.level);
    }
    const auto n = static_cast<int64_t>(cohort.size());
    if (n == 0) fail<InvalidInput>("'{}' holds no vectors: nothing to index", source_);
    if (config_.normalize) l2_normalize(cohort.features.data(), n, cohort.dim);
    VectorIndex index = VectorIndex::create(config_.index, cohort.dim, parse_metric(config_.metric));
    if (!index.is_trained()) index.train(cohort.features.data(), n);
    std::vector<int64_t> ids(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) ids[i] = i;
    index.add(cohort.features.data(), ids.data(), n);
    index.write(context.staging_path(kSlideVectorsFile));
    write_cohort_vectors(context.staging_path(kSlideEntriesFile), cohort);
    result.outputs = {kSlideVectorsFile, kSlideEntriesFile};
    result.fields = {{"rows", n}, {"output_dim", cohort.dim}, {"encoder", cohort.encoder}};
    return result;
  }

  nlohmann::json finish(Comm& comm, const std::vector<nlohmann::json>& markers) override {
    if (comm.rank() != 0) return {};
    const nlohmann::json& m = markers.at(0);  // also after a resume, when rank_work did not run
    SlideCatalog catalog;
    catalog.level = config_.level;
    catalog.source = fs::relative(source_, dir_).string();
    catalog.index_spec = config_.index;
    catalog.metric = config_.metric;
    catalog.normalize = config_.normalize;
    catalog.dim = m.at("output_dim").get<int>();
    catalog.rows = m.at("rows").get<int64_t>();
    catalog.encoder = m.at("encoder").get<std::string>();
    write_slide_catalog(dir_, catalog);
    spdlog::info("ingest: {} {} vectors of dimension {} indexed ({}) in '{}'",
                 m.at("rows").get<int64_t>(), config_.level, m.at("output_dim").get<int>(),
                 config_.index, dir_);
    // Sealed into _SUCCESS by the skeleton: damage to it is found like damage to the index.
    return {{"level", config_.level},
            {"rows", m.at("rows")},
            {"source", source_},
            {"outputs", {kSlideCatalogFile}}};
  }

 private:
  const Config& config_;
  std::string source_;
  std::string dir_;
};

}  // namespace

int run_slide_level(const Config& config, Comm& comm) {
  const std::string source = decided_by_root(comm, [&] { return resolve_source(config); });
  const std::string name = config.name.empty() ? fs::path(source).filename().string() : config.name;
  const std::string dir = RunLayout(config.run).stage_root(kIngestStage, name);
  decided_by_root(comm, [&] {
    if (path_exists((fs::path(dir) / kCatalogFile).string())) {
      fail<InvalidInput>("'{}' holds a patch-level index (catalog.json): give another --name",
                         dir);
    }
    parse_metric(config.metric);
    return std::string();
  });
  const std::optional<FileLock> lock = hold_input(comm, source, config.stage);
  const nlohmann::json source_run = check_stage_input(comm, source, config.stage.verify);
  const std::string fingerprint =
      sha256_hex(config.fingerprint_ini + "slides = " +
                 source_run.value("config_fingerprint", "") + "\n");
  SlideIndexWork work(config, source, dir);
  StageRun run{kIngestStage, dir, config.config_ini, fingerprint, config.stage,
               {{"level", config.level}, {"slides", fs::path(source).filename().string()}},
               {config.run, {source}}};
  return run_stage(comm, run, work);
}

}  // namespace tessera::ingest
