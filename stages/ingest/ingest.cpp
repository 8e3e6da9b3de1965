#include "stages/ingest/ingest.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <unordered_set>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/store/files.h"
#include "common/core/clock.h"
#include "common/core/cpu.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/hash.h"
#include "common/core/progress.h"
#include "common/h5/h5.h"
#include "common/stage/lineage.h"
#include "common/stage/skeleton.h"
#include "common/store/embeddings.h"
#include "common/store/index.h"
#include "common/store/vector_meta.h"
#include "common/vector/catalog.h"
#include "common/vector/vector_index.h"
#include "stages/ingest/route.h"
#include "stages/ingest/slide_index.h"

namespace tessera::ingest {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

constexpr const char* kTrainedFile = "trained.faiss";
// Training samples runs of this many consecutive rows (embed's chunk of rows), so a sample of
// n rows reads about n / kTrainRun chunks instead of touching every chunk of the input.
constexpr int64_t kTrainRun = 256;

std::string shard_name(int shard) { return fmt::format("shard-{:05d}", shard); }
std::string index_file(int shard) { return "shards/" + shard_name(shard) + "/index.faiss"; }
std::string meta_file(int shard) { return "shards/" + shard_name(shard) + "/meta.h5"; }

// One embed part taken in, with its patch index.
struct Source {
  int part = 0;
  std::string embed_dir;
  std::string patchgen_dir;
  std::string embeddings_path;
  nlohmann::json embed_success;
  IndexInfo info;
};

// What rank 0 decided, broadcast to every rank.
struct Decision {
  std::string tag;
  std::string name;  // output folder
  int embed_parts = 1;
  int generation = 0;
  std::vector<int> parts;
  bool nothing_to_do = false;
  std::optional<Catalog> previous;  // the catalog this generation extends (append)
};

std::string resolve_tag(const Config& config) {
  if (!config.tag.empty()) return config.tag;
  const std::string embed = (fs::path(config.run) / kEmbedStage).string();
  std::vector<std::string> tags;
  for (const auto& name : RunLayout(config.run).names(kEmbedStage)) {
    if (is_safe_slide_id(name)) tags.push_back(name);
  }
  if (tags.size() == 1) return tags[0];
  if (tags.empty()) {
    fail<InvalidInput>("'{}' holds no embed output: run embed first", embed);
  }
  std::string list;
  for (const auto& t : tags) list += " " + t;
  fail<InvalidInput>("'{}' holds several embed outputs; choose one with --tag:{}", embed, list);
}

bool is_complete(const std::string& dir) {
  return path_exists(stage_file(dir, kSuccessFile)) && stale_reason(dir).empty();
}

std::string relative_to(const std::string& path, const std::string& base) {
  return fs::path(path).lexically_relative(fs::path(base)).string();
}

// The settings an --append must share with the output it extends.
void require_same_settings(const Config& config, const Catalog& c, const std::string& out) {
  std::vector<std::string> differ;
  auto cmp = [&](const char* name, const std::string& now, const std::string& then) {
    if (now != then) differ.push_back(fmt::format("--{} {} (the output has {})", name, now, then));
  };
  cmp("index", config.index, c.index_spec);
  cmp("metric", config.metric, c.metric);
  cmp("normalize", config.normalize ? "true" : "false", c.normalize ? "true" : "false");
  cmp("assign", to_string(config.assign), c.assign);
  cmp("shards", std::to_string(config.shards), std::to_string(c.shards.size()));
  if (!differ.empty()) {
    fail<InvalidInput>("ingest --append into '{}' with other settings: {}; append with the "
                       "output's settings, or ingest anew with --overwrite",
                       out, fmt::join(differ, ", "));
  }
}

// `c` as it was before generation `generation` was added; nullopt for generation 0.
std::optional<Catalog> catalog_before(const Catalog& c, int generation) {
  if (generation <= 0) return std::nullopt;
  Catalog before = c;
  for (CatalogShard& shard : before.shards) {
    shard.segments.erase(std::remove_if(shard.segments.begin(), shard.segments.end(),
                                        [&](const auto& s) { return s.generation >= generation; }),
                         shard.segments.end());
    shard.rows = 0;
    for (const auto& s : shard.segments) shard.rows += s.rows;
  }
  before.sources.erase(std::remove_if(before.sources.begin(), before.sources.end(),
                                      [&](const auto& s) { return s.generation >= generation; }),
                       before.sources.end());
  before.generations.erase(
      std::remove_if(before.generations.begin(), before.generations.end(),
                     [&](const auto& g) { return g.generation >= generation; }),
      before.generations.end());
  return before;
}

// Rank 0: why the complete generation `generation` of `out` must be finished again: its catalog
// is missing, damaged or does not list it (a job killed between its _SUCCESS and the catalog, or
// a catalog deleted by hand); "" when the catalog lists it.
std::string catalog_gap(const std::string& out, int generation) {
  if (!path_exists((fs::path(out) / kCatalogFile).string())) {
    return fmt::format("'{}/{}' is missing", out, kCatalogFile);
  }
  Catalog c;
  try {
    c = load_catalog(out);
  } catch (const Error& e) {
    return fmt::format("its catalog is damaged ({})", e.what());
  }
  for (const auto& g : c.generations) {
    if (g.generation == generation) return "";
  }
  return fmt::format("'{}/{}' does not list generation {}", out, kCatalogFile, generation);
}

// Rank 0: the generation after those `out`'s catalog lists when it is complete but not listed
// (the catalog is being rebuilt generation by generation), else -1.
int next_unlisted_generation(const std::string& out) {
  try {
    const int next = static_cast<int>(load_catalog(out).generations.size());
    return is_complete(generation_dir(out, next)) ? next : -1;
  } catch (const Error&) {
    return -1;
  }
}

// Rank 0: which generation to build from which parts.
Decision decide(const Config& config) {
  Decision d;
  d.tag = resolve_tag(config);
  d.name = config.name.empty() ? d.tag : config.name;
  const RunLayout layout(config.run);
  const std::string embed_root = layout.stage_root(kEmbedStage, d.tag);
  const std::string out = layout.stage_root(kIngestStage, d.name);
  d.embed_parts = discover_parts(embed_root);
  for (int p : config.embed_parts) {
    if (p >= d.embed_parts) {
      fail<InvalidInput>("invalid --embed-parts: '{}' has {} part(s), there is no part {}",
                         embed_root, d.embed_parts, p);
    }
  }
  std::vector<int> wanted = config.embed_parts;
  if (wanted.empty()) {
    for (int p = 0; p < d.embed_parts; ++p) wanted.push_back(p);
  }
  auto dir_of = [&](int p) { return part_dir(embed_root, p, d.embed_parts); };
  if (!config.append) {
    std::vector<std::string> missing;
    for (int p : wanted) {
      if (!is_complete(dir_of(p))) missing.push_back(dir_of(p));
    }
    if (!missing.empty()) {
      std::string list;
      for (const auto& m : missing) list += "\n  " + m;
      fail<InvalidInput>("{} of the embed parts to ingest are not complete (run or rerun embed "
                         "with --part p --parts {}, or ingest the complete ones with "
                         "--embed-parts and add the rest later with --append):{}",
                         missing.size(), d.embed_parts, list);
    }
    d.parts = wanted;
    if (config.stage.overwrite && path_exists(out)) {
      // Later generations extend generation 0, which is about to be replaced (the skeleton
      // replaces gen-00000 itself, under its lock).
      std::error_code ec;
      fs::remove(fs::path(out) / kCatalogFile, ec);
      for (const auto& name : list_subdirectories(out)) {
        const auto g = parse_generation_name(name);
        if (g && *g != 0) {
          remove_tree((fs::path(out) / name).string());
        }
      }
    }
    return d;
  }
  if (path_exists((fs::path(out) / kCatalogFile).string())) {
    try {
      d.previous = load_catalog(out);
    } catch (const Error& e) {
      // Rebuilt from the generations' own outputs, generation by generation (see run()).
      spdlog::warn("{}: rebuilding it from the generations", e.what());
    }
  }
  if (d.previous && !d.previous->generations.empty()) {
    const CatalogGeneration last = d.previous->generations.back();
    if (!path_exists((fs::path(generation_dir(out, last.generation)) / "_SUCCESS").string())) {
      // Listed before its _SUCCESS was written (ingest once wrote the catalog first): finish it
      // from the catalog it extended. (A stale generation is refused below, as any append to it.)
      d.generation = last.generation;
      d.parts = last.parts;
      d.previous = catalog_before(*d.previous, last.generation);
      spdlog::info("ingest --append: finishing generation {} (parts {}), listed in '{}' but not "
                   "complete",
                   d.generation, fmt::join(d.parts, ","), out);
      return d;
    }
  }
  d.generation = d.previous ? static_cast<int>(d.previous->generations.size()) : 0;
  const std::string gen_dir = generation_dir(out, d.generation);
  if (auto interrupted = read_json_file((fs::path(gen_dir) / "run.json").string())) {
    // An append that did not finish: finish it with the parts it started with.
    d.parts = interrupted->at("embed_parts").get<std::vector<int>>();
    spdlog::info("ingest --append: resuming the unfinished generation {} (parts {})", d.generation,
                 fmt::join(d.parts, ","));
    return d;
  }
  std::set<int> in;
  if (d.previous) {
    require_same_settings(config, *d.previous, out);
    // Appending to an index whose vectors were made from replaced inputs would extend a wrong
    // answer; every generation must still be current.
    for (int g = 0; g < d.generation; ++g) {
      const std::string why = stale_reason(generation_dir(out, g));
      if (!why.empty()) {
        fail<InvalidInput>("cannot append to '{}': {}; ingest anew with --overwrite", out, why);
      }
    }
    for (int p : d.previous->parts_in()) in.insert(p);
    if (d.previous->embed_parts != d.embed_parts) {
      fail<InvalidInput>("'{}' was made from {} embed part(s), '{}' now has {}: the embed output "
                         "was replaced; ingest it anew with --overwrite",
                         out, d.previous->embed_parts, embed_root, d.embed_parts);
    }
  }
  std::vector<std::string> waiting;
  for (int p : wanted) {
    if (in.count(p)) continue;
    if (is_complete(dir_of(p))) {
      d.parts.push_back(p);
    } else {
      waiting.push_back(dir_of(p));
    }
  }
  if (!waiting.empty()) {
    spdlog::info("ingest --append: {} part(s) not complete yet, left for a later --append: {}",
                 waiting.size(), fmt::join(waiting, ", "));
  }
  if (d.parts.empty()) {
    if (!d.previous) {
      fail<InvalidInput>("no part of '{}' is complete: run embed first", embed_root);
    }
    d.nothing_to_do = true;
  }
  return d;
}

nlohmann::json decision_json(const Decision& d) {
  nlohmann::json j = {{"tag", d.tag},
                      {"name", d.name},
                      {"embed_parts", d.embed_parts},
                      {"generation", d.generation},
                      {"parts", d.parts},
                      {"nothing_to_do", d.nothing_to_do}};
  if (d.previous) j["previous"] = d.previous->to_json();
  return j;
}

Decision decision_from(const nlohmann::json& j, const std::string& out) {
  Decision d;
  d.tag = j.at("tag").get<std::string>();
  d.name = j.at("name").get<std::string>();
  d.embed_parts = j.at("embed_parts").get<int>();
  d.generation = j.at("generation").get<int>();
  d.parts = j.at("parts").get<std::vector<int>>();
  d.nothing_to_do = j.at("nothing_to_do").get<bool>();
  if (j.contains("previous")) d.previous = Catalog::from_json(j.at("previous"), out, out);
  return d;
}

// Reads and checks one chunk of a source: rows [first, first + n) of embeddings.h5 and index.h5.
struct Chunk {
  std::vector<float> values;
  VectorRows rows;
};

class SourceReader {
 public:
  explicit SourceReader(const Source& source)
      : source_(source),
        file_(h5::File::open(source.embeddings_path, h5::Mode::kRead)),
        embeddings_(file_.open_dataset(embedding_names::kEmbeddings)),
        ids_(file_.open_dataset(embedding_names::kPatchId)),
        index_(source.info.path) {
    dim_ = static_cast<int>(embeddings_.dims().at(1));
  }
  int dim() const { return dim_; }

  void read(int64_t first, int64_t n, Chunk& chunk) {
    chunk.values.resize(static_cast<size_t>(n) * dim_);
    embeddings_.read_rows_as_floats(chunk.values.data(), first, n);
    std::vector<int64_t> ids(n);
    ids_.read_rows(ids.data(), first, n);
    IndexRows rows = index_.read_range(first, n);
    for (int64_t i = 0; i < n; ++i) {
      if (ids[i] != rows.patch_id[i]) {
        fail<IoError>("'{}' row {} holds patch {}, but row {} of '{}' is patch {}: the embeddings "
                      "do not belong to this patch index (rerun embed)",
                      source_.embeddings_path, first + i, ids[i], first + i, source_.info.path,
                      rows.patch_id[i]);
      }
    }
    chunk.rows.patch_id = std::move(rows.patch_id);
    chunk.rows.slide = std::move(rows.slide);
    chunk.rows.coords = std::move(rows.coords);
    chunk.rows.tissue = std::move(rows.tissue);
  }

 private:
  const Source& source_;
  h5::File file_;
  h5::Dataset embeddings_, ids_;
  IndexReader index_;
  int dim_ = 0;
};

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
      make_directories((fs::path(dir_) / "shards" / shard_name(k)).string());
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
                        (fs::path(dir_) / "progress.jsonl").string());
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
      b.index->write(context.staging_path(index_file(b.shard)));
      b.index.reset();
      VectorMetaWriter meta(context.staging_path(meta_file(b.shard)), b.shard,
                            sources_.front().info.patch_size, sources_.front().info.mpp);
      meta.append(b.meta, 0, b.meta.size());
      b.meta = {};
      meta.close(slides);
      result.outputs.push_back(index_file(b.shard));
      result.outputs.push_back(meta_file(b.shard));
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
    const std::string gen = fs::path(dir_).filename().string();
    auto in_out = [&](OutputRecord r) {
      r.file = gen + "/" + r.file;
      return r;
    };
    Catalog c = decision_.previous ? *decision_.previous : Catalog{};
    c.dir = out_;
    const std::string now = utc_timestamp();
    if (!decision_.previous) {
      c.tag = decision_.tag;
      c.index_spec = config_.index;
      c.metric = config_.metric;
      c.normalize = config_.normalize;
      c.assign = to_string(config_.assign);
      c.dim = dim_;
      c.embed_parts = decision_.embed_parts;
      c.patch_size = sources_.front().info.patch_size;
      c.mpp = sources_.front().info.mpp;
      c.store_dtype = sources_.front().embed_success.value("store_dtype", "fp32");
      c.model = sources_.front().embed_success.at("model");
      c.default_nprobe = template_->default_nprobe();
      c.created = now;
      c.shards.assign(config_.shards, {});
      if (path_exists((fs::path(dir_) / kTrainedFile).string())) {
        c.trained.push_back(in_out(seal_output(dir_, kTrainedFile)));
      }
    }
    c.updated = now;
    std::vector<std::optional<CatalogSegment>> segments(config_.shards);
    nlohmann::json totals = {{"read_s", 0.0}, {"add_s", 0.0}, {"write_s", 0.0}, {"total_s", 0.0}};
    nlohmann::json max_rss = nlohmann::json::array();
    for (const auto& m : markers) {
      std::map<std::string, OutputRecord> records;
      for (const auto& o : m.at("outputs")) {
        OutputRecord r = OutputRecord::from_json(o);
        records[r.file] = r;
      }
      for (const auto& s : m.at("shards")) {
        const int k = s.at("shard").get<int>();
        CatalogSegment seg;
        seg.generation = decision_.generation;
        seg.rows = s.at("rows").get<int64_t>();
        seg.index = in_out(records.at(index_file(k)));
        seg.meta = in_out(records.at(meta_file(k)));
        segments[k] = seg;
      }
      for (auto& [key, value] : totals.items()) {
        value = value.get<double>() + m.at("stats").at(key).get<double>();
      }
      max_rss.push_back(m.at("stats").at("max_rss_bytes"));
    }
    int64_t rows = 0;
    for (int k = 0; k < config_.shards; ++k) {
      TESSERA_CHECK(segments[k].has_value(), "ingest: no rank reported shard {}", k);
      c.shards[k].rows += segments[k]->rows;
      c.shards[k].segments.push_back(*segments[k]);
      rows += segments[k]->rows;
    }
    for (const Source& s : sources_) {
      CatalogSource src;
      src.part = s.part;
      src.generation = decision_.generation;
      src.rows = s.info.rows;
      src.embed_dir = relative_to(s.embed_dir, out_);
      src.patchgen_dir = relative_to(s.patchgen_dir, out_);
      src.embed_fingerprint = s.embed_success.value("config_fingerprint", "");
      src.patchgen_fingerprint = s.info.config_fingerprint;
      c.sources.push_back(src);
    }
    c.generations.push_back({decision_.generation, gen, decision_.parts, rows, fingerprint_, now});
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
    const int64_t runs = (total + kTrainRun - 1) / kTrainRun;
    const int64_t wanted = std::min(runs, (config_.train_size + kTrainRun - 1) / kTrainRun);
    // Floyd's sampling of `wanted` distinct runs out of `runs`, seeded.
    std::mt19937_64 rng(config_.seed);
    std::unordered_set<int64_t> chosen;
    for (int64_t j = runs - wanted; j < runs; ++j) {
      const int64_t t = std::uniform_int_distribution<int64_t>(0, j)(rng);
      chosen.insert(chosen.count(t) ? j : t);
    }
    std::vector<int64_t> order(chosen.begin(), chosen.end());
    std::sort(order.begin(), order.end());
    std::vector<float> sample;
    size_t s = 0;
    int64_t base = 0;  // sequence number of the first row of sources_[s]
    std::optional<SourceReader> reader;
    Chunk chunk;
    for (int64_t run : order) {
      int64_t first = run * kTrainRun;
      int64_t n = std::min(kTrainRun, total - first);
      while (n > 0) {
        while (first >= base + sources_[s].info.rows) {
          base += sources_[s].info.rows;
          ++s;
          reader.reset();
        }
        if (!reader) reader.emplace(sources_[s]);
        const int64_t m = std::min(n, base + sources_[s].info.rows - first);
        reader->read(first - base, m, chunk);
        sample.insert(sample.end(), chunk.values.begin(), chunk.values.end());
        first += m;
        n -= m;
      }
    }
    int64_t rows = static_cast<int64_t>(sample.size()) / dim_;
    if (rows > config_.train_size) {
      rows = config_.train_size;
      sample.resize(static_cast<size_t>(rows) * dim_);
    }
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

}  // namespace

int discover_parts(const std::string& embed_root) {
  if (path_exists((fs::path(embed_root) / "run.json").string())) return 1;
  int parts = 0;
  for (const auto& name : list_subdirectories(embed_root)) {
    const auto part = parse_part_name(name);
    if (!part) continue;
    const int q = part->parts;
    if (parts != 0 && q != parts) {
      fail<InvalidInput>("'{}' holds parts of {} and of {} parts: remove the folders of the "
                         "earlier split",
                         embed_root, parts, q);
    }
    parts = q;
  }
  if (parts == 0) {
    fail<InvalidInput>("'{}' holds no embed output: run embed first", embed_root);
  }
  return parts;
}

namespace {

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
    s.embed_success = read_json_file((fs::path(s.embed_dir) / "_SUCCESS").string()).value();
    s.embeddings_path = (fs::path(s.embed_dir) / kEmbeddingsFile).string();
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
  (void)VectorIndex::create(config.index, dim, metric);
  if (decision.generation == 0) {
    int64_t total = 0;
    for (const Source& s : sources) total += s.info.rows;
    if (config.shards > std::max<int64_t>(total, 1)) {
      fail<InvalidInput>("--shards {} is more than the {} embedding(s) to ingest: at least {} "
                         "shard(s) would stay empty; give at most {} shards",
                         config.shards, total, config.shards - total, std::max<int64_t>(total, 1));
    }
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
