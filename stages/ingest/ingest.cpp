#include "stages/ingest/ingest.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <filesystem>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/store/files.h"
#include "common/core/clock.h"
#include "common/core/cpu.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/core/progress.h"
#include "common/stage/layout.h"
#include "common/stage/lineage.h"
#include "common/stage/skeleton.h"
#include "common/store/embeddings.h"
#include "common/store/index.h"
#include "common/store/vector_meta.h"
#include "common/vector/catalog.h"
#include "common/vector/vector_index.h"
#include "stages/ingest/catalog_update.h"
#include "stages/ingest/generation.h"
#include "stages/ingest/sources.h"
#include "stages/ingest/route.h"
#include "stages/ingest/slide_index.h"

namespace tessera::ingest {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {



// The rows of one shard being built: its index, its metadata, its counts. Nothing is allocated
// for a shard until it receives rows (an empty shard costs a few hundred bytes, so a rank may own
// many): its index is copied from the template at its first row, and its metadata rows (28 bytes
// a row) are written to meta.h5 when the shard is written.
struct ShardBuild {
  int shard = 0;
  std::optional<VectorIndex> index;
  VectorRows meta;
  int64_t rows = 0;
  // Rows routed to this shard from the current chunk, added in one call.
  std::vector<float> values;
  VectorRows pending;
};

class IngestWork final : public StageWork {
 public:
  IngestWork(const Config& config, const Decision& decision, std::vector<Source>& sources,
             std::string dir, std::string out, std::string fingerprint, int dim)
      : config_(config),
        decision_(decision),
        sources_(sources),
        dir_(std::move(dir)),
        out_(std::move(out)),
        fingerprint_(std::move(fingerprint)),
        dim_(dim) {}

  std::optional<int> setup(Comm& comm, StageAction) override {
    set_vector_threads(thread_count(config_.threads, "--threads"));
    const Metric metric = parse_metric(config_.metric);
    if (decision_.previous && !decision_.previous->trained.empty()) {
      template_.emplace(VectorIndex::read(decision_.previous->path(decision_.previous->trained[0].file),
                                          false));
      return std::nullopt;
    }
    VectorIndex index = VectorIndex::create(config_.index, dim_, metric);
    if (index.is_trained()) {
      template_.emplace(std::move(index));
      return std::nullopt;
    }
    const std::string trained = (fs::path(dir_) / kTrainedFile).string();
    // Ranks sleep in the barrier while rank 0 trains, leaving it the cores; a training error
    // keeps its type (bad input, or an I/O failure writing trained.faiss).
    done_by_root(
        comm, [&] {
          if (!path_exists(trained)) train(index, trained);
        },
        /*wait_in_barrier=*/true);
    template_.emplace(VectorIndex::read(trained, false));
    return std::nullopt;
  }

  RankResult rank_work(const RankContext& context) override {
    const auto start = Clock::now();
    const int K = config_.shards;
    std::vector<ShardBuild> builds;
    std::vector<int> slot(K, -1);  // shard -> index into builds, -1 when not this rank's
    for (const int k : rank_shards(K, context.rank, context.world_size)) {
      make_directories((fs::path(dir_) / shard_dir(k)).string());
      ShardBuild& b = builds.emplace_back();
      b.shard = k;
      slot[k] = static_cast<int>(builds.size()) - 1;
    }
    double read_s = 0, add_s = 0;
    int64_t added = 0;
    if (!builds.empty()) {
      std::vector<int64_t> fill = previous_fill();
      std::vector<std::vector<int>> placed;
      if (config_.assign == Assign::kBySlide) placed = assign_by_slide(part_slides(), fill);
      int64_t sequence = decision_.previous ? decision_.previous->rows() : 0;
      // Rows this rank reads: its shards' slides (by-slide) or every row (cyclic).
      std::vector<std::vector<RowRange>> ranges(sources_.size());
      int64_t to_read = 0;
      for (size_t s = 0; s < sources_.size(); ++s) {
        const IndexInfo& info = sources_[s].info;
        ranges[s] = rank_row_ranges(config_.assign, part_slides_of(info.slides),
                                    placed.empty() ? std::vector<int>() : placed[s],
                                    info.slide_offset, info.rows, slot);
        for (const RowRange& r : ranges[s]) to_read += r.count;
      }
      Progress progress("ingest", to_read, {context.rank, 0, 1}, context.rank == 0,
                        stage_file(dir_, kProgressFile));
      Chunk chunk;
      for (size_t s = 0; s < sources_.size(); ++s) {
        const Source& source = sources_[s];
        SourceReader reader(source);
        if (reader.dim() != dim_) {
          fail<IoError>("'{}' holds embeddings of dimension {}, part {} has {}",
                        source.embeddings_path, reader.dim(), sources_.front().part, dim_);
        }
        for (const auto& [first, count, shard] : ranges[s]) {
          for (int64_t at = first; at < first + count; at += config_.chunk_rows) {
            const int64_t n = std::min(config_.chunk_rows, first + count - at);
            auto t = Clock::now();
            reader.read(at, n, chunk);
            read_s += seconds_since(t);
            if (config_.normalize) l2_normalize(chunk.values.data(), n, dim_);
            t = Clock::now();
            if (shard >= 0) {
              add_rows(builds[slot[shard]], chunk, 0, n);
            } else {
              route_cyclic(builds, slot, chunk, sequence + at - first, n);
            }
            add_s += seconds_since(t);
            added += n;
            progress.update(added);
            maybe_die(context.rank, added);
          }
          if (shard < 0) sequence += count;
        }
      }
      progress.finish(added);
    }
    RankResult result;
    nlohmann::json shards = nlohmann::json::array();
    const auto write_start = Clock::now();
    VectorSlideTable slides = slide_table();
    int64_t rows = 0;
    for (ShardBuild& b : builds) {
      // One shard at a time: an empty shard's index exists only while it is written.
      if (!b.index) b.index.emplace(template_->empty_copy());
      b.index->write(context.staging_path(shard_index_file(b.shard)));
      b.index.reset();
      VectorMetaWriter meta(context.staging_path(shard_meta_file(b.shard)), b.shard,
                            sources_.front().info.patch_size, sources_.front().info.mpp);
      meta.append(b.meta, 0, b.meta.size());
      b.meta = {};
      meta.close(slides);
      result.outputs.push_back(shard_index_file(b.shard));
      result.outputs.push_back(shard_meta_file(b.shard));
      shards.push_back({{"shard", b.shard}, {"rows", b.rows}});
      rows += b.rows;
    }
    const double write_s = seconds_since(write_start);
    const double total_s = seconds_since(start);
    if (!builds.empty()) {
      spdlog::info("ingest: {} vectors into {} shard(s) in {:.1f}s ({:.0f}/s; read {:.1f}s, add "
                   "{:.1f}s, write {:.1f}s)",
                   rows, builds.size(), total_s, rows / std::max(1e-9, total_s), read_s, add_s,
                   write_s);
    }
    struct rusage usage {};
    getrusage(RUSAGE_SELF, &usage);  // ru_maxrss is in KiB on Linux
    result.fields = {{"rows", rows},
                     {"shards", shards},
                     {"stats",
                      {{"read_s", read_s}, {"add_s", add_s}, {"write_s", write_s},
                       {"total_s", total_s}, {"max_rss_bytes", static_cast<int64_t>(usage.ru_maxrss) * 1024}}}};
    return result;
  }

  nlohmann::json finish(Comm& comm, const std::vector<nlohmann::json>& markers) override {
    if (comm.rank() != 0) return {};
    const std::string now = utc_timestamp();
    nlohmann::json totals = {{"read_s", 0.0}, {"add_s", 0.0}, {"write_s", 0.0}, {"total_s", 0.0}};
    nlohmann::json max_rss = nlohmann::json::array();
    for (const auto& m : markers) {
      for (auto& [key, value] : totals.items()) {
        value = value.get<double>() + m.at("stats").at(key).get<double>();
      }
      max_rss.push_back(m.at("stats").at("max_rss_bytes"));
    }
    const GenerationBuilt g{out_, dir_, fingerprint_, dim_, template_->default_nprobe(), now};
    const Catalog c = with_generation(config_, decision_, sources_, markers, g);
    const int64_t rows = c.generations.back().rows;
    // Committed by run() once _SUCCESS is written: the catalog never lists an unfinished
    // generation.
    built_ = c;
    spdlog::info("ingest complete: {} vectors in this generation, {} in {} shard(s) of '{}' ({}, "
                 "{}{})",
                 rows, c.rows(), config_.shards, out_, config_.index, config_.metric,
                 config_.normalize ? ", normalised" : "");
    nlohmann::json shard_rows = nlohmann::json::array();
    for (const auto& s : c.shards) shard_rows.push_back(s.rows);
    return {{"tag", decision_.tag},
            {kCatalogSealField, catalog_seal(catalog_text(c))},
            {"status", "completed"},
            {"generation", decision_.generation},
            {"embed_parts", decision_.parts},
            {"rows", rows},
            {"rows_total", c.rows()},
            {"shard_rows", shard_rows},
            {"index", config_.index},
            {"seconds_summed_over_ranks", totals},
            {"max_rss_bytes_per_rank", max_rss}};
  }

 private:
  // Rows per shard before this generation.
  std::vector<int64_t> previous_fill() const {
    std::vector<int64_t> fill(config_.shards, 0);
    if (decision_.previous) {
      for (int k = 0; k < config_.shards; ++k) fill[k] = decision_.previous->shards[k].rows;
    }
    return fill;
  }

  std::vector<PartSlides> part_slides() const {
    std::vector<PartSlides> parts;
    for (const Source& s : sources_) parts.push_back(part_slides_of(s.info.slides));
    return parts;
  }

  VectorSlideTable slide_table() const {
    VectorSlideTable t = vector_slide_table(sources_.front().info);
    for (size_t s = 1; s < sources_.size(); ++s) {
      merge_slide_table(t, vector_slide_table(sources_[s].info), sources_[s].info.path);
    }
    return t;
  }

  void add_rows(ShardBuild& b, const Chunk& chunk, size_t first, size_t n) {
    if (n == 0) return;
    if (!b.index) b.index.emplace(template_->empty_copy());
    b.index->add(chunk.values.data() + first * dim_, chunk.rows.patch_id.data() + first,
                 static_cast<int64_t>(n));
    append_rows(b.meta, chunk.rows, first, n);
    b.rows += static_cast<int64_t>(n);
  }

  static void append_rows(VectorRows& to, const VectorRows& from, size_t first, size_t n) {
    to.patch_id.insert(to.patch_id.end(), from.patch_id.begin() + first,
                       from.patch_id.begin() + first + n);
    to.slide.insert(to.slide.end(), from.slide.begin() + first, from.slide.begin() + first + n);
    to.coords.insert(to.coords.end(), from.coords.begin() + 2 * first,
                     from.coords.begin() + 2 * (first + n));
    to.tissue.insert(to.tissue.end(), from.tissue.begin() + first,
                     from.tissue.begin() + first + n);
  }

  void route_cyclic(std::vector<ShardBuild>& builds, const std::vector<int>& slot,
                    const Chunk& chunk, int64_t sequence, int64_t n) {
    for (ShardBuild& b : builds) {
      b.values.clear();
      b.pending.clear();
    }
    for (int64_t i = 0; i < n; ++i) {
      const int k = cyclic_shard(sequence + i, config_.shards);
      if (slot[k] < 0) continue;
      ShardBuild& b = builds[slot[k]];
      b.values.insert(b.values.end(), chunk.values.begin() + i * dim_,
                      chunk.values.begin() + (i + 1) * dim_);
      b.pending.patch_id.push_back(chunk.rows.patch_id[i]);
      b.pending.slide.push_back(chunk.rows.slide[i]);
      b.pending.coords.push_back(chunk.rows.coords[2 * i]);
      b.pending.coords.push_back(chunk.rows.coords[2 * i + 1]);
      b.pending.tissue.push_back(chunk.rows.tissue[i]);
    }
    for (ShardBuild& b : builds) {
      const size_t m = b.pending.size();
      if (m == 0) continue;
      if (!b.index) b.index.emplace(template_->empty_copy());
      b.index->add(b.values.data(), b.pending.patch_id.data(), static_cast<int64_t>(m));
      append_rows(b.meta, b.pending, 0, m);
      b.rows += static_cast<int64_t>(m);
    }
  }

  void maybe_die(int rank, int64_t added) const {
    config_.stage.faults.point(rank, added, "vectors added");
  }

  // Rank 0: trains `index` on a deterministic sample of this generation's rows and writes the
  // trained, empty index to `path`.
  void train(VectorIndex& index, const std::string& path) {
    const auto start = Clock::now();
    int64_t total = 0;
    for (const Source& s : sources_) total += s.info.rows;
    if (total == 0) fail<InvalidInput>("ingest: no embeddings to train '{}' on", config_.index);
    std::vector<float> sample = training_sample(sources_, config_.train_size, config_.seed);
    const int64_t rows = static_cast<int64_t>(sample.size()) / dim_;
    if (config_.normalize) l2_normalize(sample.data(), rows, dim_);
    spdlog::info("ingest: training {} on {} of {} vectors (seed {})", config_.index, rows, total,
                 config_.seed);
    // The other ranks sleep in set-up's barrier meanwhile: training may use every core this
    // rank can run on, whatever --threads says for the adds.
    set_vector_threads(std::max(usable_cores(), thread_count(config_.threads, "--threads")));
    index.train(sample.data(), rows);
    set_vector_threads(thread_count(config_.threads, "--threads"));
    const std::string tmp = path + ".tmp";
    index.write(tmp);
    commit_file(tmp, path);
    spdlog::info("ingest: trained in {:.1f}s", seconds_since(start));
  }

  const Config& config_;
  const Decision& decision_;
  std::vector<Source>& sources_;
  std::string dir_;
  std::string out_;
  std::string fingerprint_;
  int dim_;
  std::optional<VectorIndex> template_;  // empty, trained when the index needs training

 public:
  // Rank 0, after finish(): the catalog with this generation, to commit; nullopt when finish()
  // did not run.
  const std::optional<Catalog>& built() const { return built_; }

 private:
  std::optional<Catalog> built_;
};

// Builds, resumes or finishes one generation (the one decide() picks).
int run_generation(const Config& config, Comm& comm, std::string& ingest_dir_out) {
  // Rank 0 decides; the others receive the decision (or the error).
  const nlohmann::json decided = nlohmann::json::parse(
      decided_by_root(comm, [&] { return decision_json(decide(config)).dump(); }));
  const RunLayout layout(config.run);
  const std::string ingest_dir = layout.stage_root(kIngestStage, decided.at("name").get<std::string>());
  const Decision decision = decision_from(decided, ingest_dir);
  ingest_dir_out = ingest_dir;
  if (decision.nothing_to_do) {
    if (comm.rank() == 0) {
      spdlog::info("ingest --append: every complete embed part is already in '{}' (parts {})",
                   ingest_dir, fmt::join(decision.previous->parts_in(), ","));
    }
    return kExitOk;
  }
  // Every index string FAISS refuses is refused here, before anything is written.
  const Metric metric = parse_metric(config.metric);

  const std::string embed_root = layout.stage_root(kEmbedStage, decision.tag);
  const std::string patchgen_root = layout.stage_root(kPatchgenStage);
  std::vector<std::optional<FileLock>> locks;
  std::vector<std::string> inputs;
  std::vector<Source> sources;
  for (int p : decision.parts) {
    Source s;
    s.part = p;
    s.embed_dir = part_dir(embed_root, p, decision.embed_parts);
    s.patchgen_dir = part_dir(patchgen_root, p, decision.embed_parts);
    locks.push_back(hold_input(comm, s.embed_dir, config.stage));
    locks.push_back(hold_input(comm, s.patchgen_dir, config.stage));
    check_stage_input(comm, s.embed_dir, config.stage.verify);
    // The patch index's slide table goes into every shard's meta.h5 (sealed there): it is
    // checked against patchgen's _SUCCESS first, so that damage is not sealed in.
    done_by_root(comm, [&] {
      const std::string why = finish_output_problem(s.patchgen_dir, kIndexFile, config.stage.verify);
      if (!why.empty()) {
        fail<IoError>("input patchgen is damaged: {}; rerun patchgen with --verify full", why);
      }
    });
    inputs.insert(inputs.end(), {s.embed_dir, s.patchgen_dir});
    s.embed_success = read_json_file(stage_file(s.embed_dir, kSuccessFile)).value();
    s.embeddings_path = embeddings_path(s.embed_dir);
    s.info = load_index_info(s.patchgen_dir);
    if (s.embed_success.value("patchgen_fingerprint", "") != s.info.config_fingerprint) {
      fail<InvalidInput>("'{}' was embedded from another patch run than '{}' holds now: rerun "
                         "embed for part {}",
                         s.embed_dir, s.patchgen_dir, p);
    }
    sources.push_back(std::move(s));
  }
  const nlohmann::json& model = sources.front().embed_success.at("model");
  const int dim = sources.front().embed_success.at("output_dim").get<int>();
  for (const Source& s : sources) {
    if (s.embed_success.at("model") != model) {
      fail<InvalidInput>("'{}' was embedded with another model than '{}': one index holds one "
                         "model's embeddings",
                         s.embed_dir, sources.front().embed_dir);
    }
  }
  if (decision.previous && decision.previous->model != model) {
    fail<InvalidInput>("'{}' was embedded with another model than the vectors in '{}'",
                       sources.front().embed_dir, ingest_dir);
  }
  // Every problem of the options against these rows, at once, before any directory is made.
  int64_t total = 0;
  for (const Source& s : sources) total += s.info.rows;
  std::vector<std::string> problems;
  const bool trained_before = decision.previous && !decision.previous->trained.empty();
  const int64_t need = VectorIndex::create(config.index, dim, metric).training_rows_needed();
  const int64_t sample = std::min(config.train_size, total);
  if (!trained_before && need > sample) {
    problems.push_back(fmt::format(
        "--index {} is trained on at least {} vectors, and {}: give an index with fewer "
        "centroids (IVF{},Flat: about sqrt of the rows) or Flat",
        config.index, need,
        sample < total ? fmt::format("--train-size is {}", config.train_size)
                       : fmt::format("this generation has {}", total),
        std::max<int64_t>(1, static_cast<int64_t>(std::sqrt(static_cast<double>(sample))))));
  }
  if (decision.generation == 0 && config.shards > std::max<int64_t>(total, 1)) {
    problems.push_back(fmt::format("--shards {} is more than the {} embedding(s) to ingest: at "
                                   "least {} shard(s) would stay empty; give at most {} shards",
                                   config.shards, total, config.shards - total,
                                   std::max<int64_t>(total, 1)));
  }
  if (!problems.empty()) {
    fail<InvalidInput>("ingest into '{}' (nothing written): {}", ingest_dir,
                       fmt::join(problems, "; "));
  }

  std::string identity = config.fingerprint_ini;
  identity += fmt::format("resolved-tag = {}\nresolved-name = {}\ngeneration = {}\nparts = {}\n", decision.tag,
                          decision.name, decision.generation, fmt::join(decision.parts, ","));
  for (const Source& s : sources) {
    identity += fmt::format("embed {} = {}\n", s.part,
                            s.embed_success.value("config_fingerprint", ""));
  }
  if (decision.previous) {
    identity += "extends = " + decision.previous->generations.front().config_fingerprint + "\n";
  }
  const std::string fingerprint = sha256_hex(identity);
  const std::string dir = generation_dir(ingest_dir, decision.generation);
  IngestWork work(config, decision, sources, dir, ingest_dir, fingerprint, dim);
  StageRun stage_run{kIngestStage,
                     dir,
                     config.config_ini,
                     fingerprint,
                     config.stage,
                     {{"tag", decision.tag},
                      {"name", decision.name},
                      {"generation", decision.generation},
                      {"embed_parts", decision.parts}},
                     {config.run, inputs}};
  stage_run.refinish_reason = [ingest_dir, generation = decision.generation] {
    return catalog_gap(ingest_dir, generation);
  };
  if (comm.rank() == 0 && decision.generation == 0) make_directories(ingest_dir);
  const int code = run_stage(comm, stage_run, work);
  if (comm.rank() == 0 && work.built()) write_catalog(*work.built());
  return code;
}

}  // namespace

int run(const Config& config, Comm& comm) {
  if (config.level != "patch") return run_slide_level(config, comm);
  Config next = config;
  int finished = -1;
  for (;;) {
    std::string out;
    const int code = run_generation(next, comm, out);
    if (code != kExitOk) return code;
    // A catalog rebuilt from generation 0 on (deleted or damaged): the complete generations after
    // it are listed again one by one, each resumed and finished as its --append would be.
    const int unlisted = std::stoi(
        decided_by_root(comm, [&] { return std::to_string(next_unlisted_generation(out)); }));
    if (unlisted <= finished) return code;
    finished = unlisted;
    next.append = true;
    next.stage.overwrite = false;
  }
}

}  // namespace tessera::ingest
