#include "stages/aggregate/aggregate.h"

#include <filesystem>
#include <optional>

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/core/csv.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/stage/layout.h"
#include "common/stage/skeleton.h"
#include "common/store/index.h"
#include "common/store/slide_vectors.h"
#include "stages/aggregate/items.h"
#include "stages/aggregate/pooling.h"
#include "stages/aggregate/slide_encoder.h"
#include "common/store/pt_tensor.h"
#include "common/store/slide_features.h"

namespace tessera::aggregate {

namespace fs = std::filesystem;

namespace {

std::string vectors_file(int rank) { return "vectors/" + rank_file_name(rank, ".h5"); }

// Everything the work needs, derived identically on every rank.
struct Plan {
  std::string tag;
  std::string dir;             // RUN/slides/<name>
  std::string encoder;         // slide encoder name
  std::string patch_encoder;   // TRIDENT name of the patch encoder
  std::string method;          // pooling or "torchscript"
  std::string files_prefix;    // "slide" or "patient"
  ItemList items;
};

class AggregateWork final : public StageWork {
 public:
  // `encoder`: rank 0's slide encoder, loaded before the stage folder was made; the other ranks
  // load theirs in setup().
  AggregateWork(const Config& config, const Plan& plan, std::optional<SlideEncoder> encoder)
      : config_(config), plan_(plan), encoder_(std::move(encoder)) {}

  std::optional<int> setup(Comm& comm, StageAction) override {
    if (!config_.slide_encoder.empty() && !encoder_) {
      encoder_.emplace(SlideEncoder::load(config_.slide_encoder, config_.device));
    }
    if (comm.rank() == 0) {
      size_t skipped = 0;
      for (const auto& item : plan_.items.items) skipped += !item.skip_reason.empty();
      spdlog::info("aggregate: {} {}s ({} skipped) of '{}' by {} into '{}'",
                   plan_.items.items.size(), plan_.files_prefix, skipped, plan_.tag,
                   plan_.method, plan_.dir);
    }
    return std::nullopt;
  }

  RankResult rank_work(const RankContext& context) override {
    const std::string features_dir = plan_.files_prefix + "_features_" + plan_.encoder;
    const std::string tensors_dir = plan_.files_prefix + "_embeddings";
    for (const auto& sub : {std::string("vectors"), features_dir, tensors_dir}) {
      std::error_code ec;
      fs::create_directories(fs::path(context.dir) / sub, ec);
      if (ec) fail<IoError>("cannot create '{}/{}': {}", context.dir, sub, ec.message());
    }
    RankResult result;
    std::vector<int64_t> item_rows, patch_counts;
    std::vector<float> vectors;
    int dim = 0;
    const auto& items = plan_.items.items;
    for (size_t i = static_cast<size_t>(context.rank); i < items.size();
         i += static_cast<size_t>(context.world_size)) {
      const Item& item = items[i];
      if (!item.skip_reason.empty()) continue;
      std::vector<float> features;
      std::vector<int64_t> coords;
      CoordsAttributes attributes;
      int patch_dim = 0;
      for (size_t k = 0; k < item.slides.size(); ++k) {
        SlideFeatures s = read_slide_features(item.slides[k].features_path);
        if (s.rows != item.slides[k].patches) {
          fail<IoError>("'{}' holds {} patches, the patch index {}: the embed output does not "
                        "match its patch run",
                        item.slides[k].features_path, s.rows, item.slides[k].patches);
        }
        if (k == 0) {
          attributes = s.attributes;
          patch_dim = s.dim;
        }
        features.insert(features.end(), s.features.begin(), s.features.end());
        coords.insert(coords.end(), s.coords.begin(), s.coords.end());
      }
      const int64_t rows = static_cast<int64_t>(coords.size() / 2);
      std::vector<float> vector;
      if (encoder_) {
        vector = encoder_->encode(features, rows, patch_dim, coords, attributes.patch_size_level0,
                                  plan_.files_prefix + " " + item.id);
      } else {
        Pooler pooler(config_.pooling, patch_dim);
        pooler.add(features.data(), rows);
        vector = pooler.result();
      }
      if (dim == 0) dim = static_cast<int>(vector.size());
      if (static_cast<int>(vector.size()) != dim) {
        fail<InvalidInput>("the slide encoder returned {} values for {} and {} for an earlier "
                           "one",
                           vector.size(), item.id, dim);
      }
      const std::string h5_file = features_dir + "/" + item.id + ".h5";
      const std::string pt_file = tensors_dir + "/" + item.id + ".pt";
      write_trident_slide_file(context.staging_path(h5_file), item.id,
                               (fs::path(context.dir) / features_dir).string(), vector, coords,
                               attributes,
                               {{"format_version", int64_t{1}},
                                {"level", plan_.files_prefix},
                                {"encoder", plan_.encoder},
                                {"patch_encoder", plan_.patch_encoder},
                                {"method", plan_.method},
                                {"patches", rows},
                                {"slides", fmt::format("{}", fmt::join(item.slide_ids, "|"))}});
      write_pt_tensor(context.staging_path(pt_file), vector, 1,
                             static_cast<int64_t>(vector.size()));
      result.outputs.push_back(h5_file);
      result.outputs.push_back(pt_file);
      item_rows.push_back(static_cast<int64_t>(i));
      patch_counts.push_back(rows);
      vectors.insert(vectors.end(), vector.begin(), vector.end());
    }
    write_rank_vectors(context.staging_path(vectors_file(context.rank)),
                       {item_rows, patch_counts, vectors, dim});
    result.outputs.push_back(vectors_file(context.rank));
    result.fields = {{"rows", static_cast<int64_t>(item_rows.size())}, {"output_dim", dim}};
    return result;
  }

  nlohmann::json finish(Comm& comm, const std::vector<nlohmann::json>&) override {
    if (comm.rank() != 0) return {};
    const auto& items = plan_.items.items;
    CohortVectors cohort;
    cohort.level = plan_.files_prefix;
    cohort.encoder = plan_.encoder;
    cohort.patch_encoder = plan_.patch_encoder;
    cohort.method = plan_.method;
    cohort.embed_tag = plan_.tag;
    cohort.label_columns = plan_.items.label_columns;
    cohort.labels.resize(cohort.label_columns.size());
    std::vector<int64_t> row_of(items.size(), -1);
    std::vector<std::vector<float>> vectors(items.size());
    std::vector<int64_t> patches(items.size(), 0);
    for (int r = 0; r < comm.size(); ++r) {
      const std::string path = (fs::path(plan_.dir) / vectors_file(r)).string();
      const RankVectors rank_vectors = read_rank_vectors(path);
      const auto& item_rows = rank_vectors.items;
      const auto& counts = rank_vectors.n_patches;
      const auto& values = rank_vectors.vectors;
      const int dim = rank_vectors.dim;
      if (item_rows.empty()) continue;
      if (cohort.dim != 0 && dim != cohort.dim) {
        fail<InvalidInput>("the slide encoder gave {} values on rank {} and {} on another rank",
                           dim, r, cohort.dim);
      }
      cohort.dim = dim;
      for (size_t k = 0; k < item_rows.size(); ++k) {
        const auto i = static_cast<size_t>(item_rows[k]);
        if (i >= items.size() || !vectors[i].empty()) {
          fail<IoError>("'{}' lists item {} that is not this rank's or was seen twice", path, i);
        }
        vectors[i].assign(values.begin() + static_cast<int64_t>(k) * dim,
                          values.begin() + static_cast<int64_t>(k + 1) * dim);
        patches[i] = counts[k];
      }
    }
    std::string skipped_csv = csv_record({"id", "reason"});
    nlohmann::json skipped = nlohmann::json::array();
    for (size_t i = 0; i < items.size(); ++i) {
      const Item& item = items[i];
      if (!item.skip_reason.empty()) {
        cohort.skipped_ids.push_back(item.id);
        cohort.skipped_reasons.push_back(item.skip_reason);
        skipped.push_back({{"id", item.id}, {"reason", item.skip_reason}});
        skipped_csv += csv_record({item.id, item.skip_reason});
        continue;
      }
      if (vectors[i].empty()) fail<IoError>("no rank wrote the vector of {}", item.id);
      cohort.ids.push_back(item.id);
      cohort.patient_id.push_back(item.patient_id);
      cohort.slides.push_back(fmt::format("{}", fmt::join(item.slide_ids, "|")));
      cohort.n_patches.push_back(patches[i]);
      for (size_t c = 0; c < cohort.label_columns.size(); ++c) {
        cohort.labels[c].push_back(item.labels[c]);
      }
      cohort.features.insert(cohort.features.end(), vectors[i].begin(), vectors[i].end());
    }
    const std::string cohort_name = cohort_file_name(cohort.level);
    write_cohort_vectors((fs::path(plan_.dir) / cohort_name).string(), cohort);
    atomic_write_file((fs::path(plan_.dir) / "skipped.csv").string(), skipped_csv);
    for (const auto& s : skipped) {
      spdlog::warn("aggregate: {} {} skipped: {}", plan_.files_prefix,
                   s.at("id").get<std::string>(), s.at("reason").get<std::string>());
    }
    const bool none = cohort.ids.empty();
    spdlog::info("aggregate complete: {} {} vectors of dimension {} in '{}/{}', {} skipped",
                 cohort.ids.size(), plan_.files_prefix, cohort.dim, plan_.dir, cohort_name,
                 skipped.size());
    return {{"status", none ? "completed_without_vectors" : "completed"},
            {"exit_code", none ? kExitSlidesFailed : kExitOk},
            {"level", plan_.files_prefix},
            {"encoder", plan_.encoder},
            {"patch_encoder", plan_.patch_encoder},
            {"method", plan_.method},
            {"tag", plan_.tag},
            {"output_dim", cohort.dim},
            {"items", items.size()},
            {"vectors", cohort.ids.size()},
            {"cohort_file", cohort_name},
            {"skipped", skipped},
            // Sealed into _SUCCESS: ingest --level reads the cohort file through these checks.
            {"outputs", {cohort_name, "skipped.csv"}}};
  }

 private:
  const Config& config_;
  const Plan& plan_;
  std::optional<SlideEncoder> encoder_;
};

}  // namespace

std::string resolve_tag(const std::string& run, const std::string& tag) {
  if (!tag.empty()) return tag;
  const std::vector<std::string> tags = RunLayout(run).names(kEmbedStage);
  if (tags.size() != 1) {
    fail<InvalidInput>("'{}' holds {} embed outputs ({}): name one with --tag",
                       RunLayout(run).stage_root(kEmbedStage), tags.size(), fmt::join(tags, ", "));
  }
  return tags.front();
}

std::vector<std::string> embed_part_dirs(const std::string& embed_root) {
  if (path_exists(stage_file(embed_root, kRunFile))) return {embed_root};
  int parts = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(embed_root, ec)) {
    const std::string name = entry.path().filename().string();
    const std::string prefix = "part-00000-of-";
    if (name.rfind(prefix, 0) != 0) continue;
    try {
      const int q = std::stoi(name.substr(prefix.size()));
      if (q >= 1 && part_dir(embed_root, 0, q) == entry.path().string()) parts = q;
    } catch (const std::logic_error&) {
    }
  }
  if (parts == 0) {
    fail<InvalidInput>("'{}' is not an embed output (no run.json, no part folders): run embed "
                       "first",
                       embed_root);
  }
  require_all_parts(embed_root, parts);
  std::vector<std::string> dirs;
  for (int p = 0; p < parts; ++p) dirs.push_back(part_dir(embed_root, p, parts));
  return dirs;
}

int run(const Config& config, Comm& comm) {
  Plan plan;
  plan.tag = decided_by_root(comm, [&] { return resolve_tag(config.run, config.tag); });
  const std::string embed_root = RunLayout(config.run).stage_root(kEmbedStage, plan.tag);
  const std::vector<std::string> part_dirs = nlohmann::json::parse(decided_by_root(comm, [&] {
    return nlohmann::json(embed_part_dirs(embed_root)).dump();
  })).get<std::vector<std::string>>();
  const int parts = static_cast<int>(part_dirs.size());

  std::vector<std::optional<FileLock>> locks;
  std::vector<IndexInfo> infos;
  std::string fingerprint_text = config.fingerprint_ini;
  for (int p = 0; p < parts; ++p) {
    locks.push_back(hold_input(comm, part_dirs[p], config.stage));
    const nlohmann::json embed_run = check_stage_input(comm, part_dirs[p], config.stage.verify);
    const nlohmann::json embed_success = nlohmann::json::parse(decided_by_root(comm, [&] {
      auto s = read_json_file(stage_file(part_dirs[p], kSuccessFile));
      if (!s) fail<InvalidInput>("'{}' has no _SUCCESS: run embed first", part_dirs[p]);
      return s->dump();
    }));
    const std::string patchgen_dir =
        RunLayout(config.run).stage_dir(kPatchgenStage, "", p, parts);
    infos.push_back(load_index_info(patchgen_dir));
    if (embed_success.value("patchgen_fingerprint", "") != infos.back().config_fingerprint) {
      fail<InvalidInput>("'{}' was made from another patch run than '{}' holds now (patchgen was "
                         "rerun): rerun embed",
                         part_dirs[p], patchgen_dir);
    }
    if (p == 0) plan.patch_encoder = embed_success.value("encoder", plan.tag);
    fingerprint_text += "embed = " + embed_run.value("config_fingerprint", "") + "\n";
  }
  std::vector<PartSlides> part_slides;
  for (int p = 0; p < parts; ++p) part_slides.push_back({part_dirs[p], &infos[p].slides});
  plan.items = make_items(part_slides, config.level);

  plan.encoder = default_encoder_name(config, plan.patch_encoder);
  plan.method = config.slide_encoder.empty() ? config.pooling : "torchscript";
  plan.files_prefix = to_string(config.level);
  plan.dir =
      RunLayout(config.run).stage_dir(kAggregateStage, default_name(config, plan.encoder), 0, 1);
  if (!config.slide_encoder.empty()) {
    fingerprint_text += "slide_encoder_sha256 = " + decided_by_root(comm, [&] {
      return sha256_file(config.slide_encoder);
    }) + "\nlibtorch = " + SlideEncoder::torch_version() + "\n";
  }
  const std::string fingerprint = sha256_hex(fingerprint_text);
  // A slide encoder that cannot be loaded is bad input, refused on every rank before the stage
  // folder, its lock or run.json exist (issue 30: a refused run left a folder status listed).
  std::optional<SlideEncoder> encoder;
  if (!config.slide_encoder.empty()) {
    done_by_root(comm, [&] { encoder.emplace(SlideEncoder::load(config.slide_encoder, config.device)); });
  }
  AggregateWork work(config, plan, std::move(encoder));
  std::vector<std::string> inputs = part_dirs;
  for (const auto& info : infos) inputs.push_back(info.stage_dir);
  StageRun run{kAggregateStage, plan.dir, config.config_ini, fingerprint, config.stage,
               {{"tag", plan.tag}, {"level", plan.files_prefix}, {"embed_parts", parts}},
               {config.run, inputs}};
  return run_stage(comm, run, work);
}

}  // namespace tessera::aggregate
