#include "stages/query/query.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/core/cpu.h"
#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/core/options.h"
#include "common/search/filter.h"
#include "common/search/lookup.h"
#include "common/search/round.h"
#include "common/search/shard_set.h"
#include "common/search/slide_search.h"
#include "common/search/votes.h"
#include "common/slide/slide.h"
#include "common/store/vector_meta.h"
#include "common/vector/catalog.h"
#include "common/vector/vector_index.h"
#include "stages/query/image_embedder.h"
#include "stages/query/inputs.h"
#include "stages/query/mosaic.h"
#include "stages/query/output.h"
#include "stages/query/report.h"
#include "stages/query/similar.h"

namespace tessera::query {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using search::exclusion_scope;
using search::filter_columns;
using search::Filter;
using search::gather_best_hits;
using search::Hit;
using search::MosaicPatch;
using search::MosaicRule;
using search::PatchLookup;
using search::query_batch_size;
using search::QueryScope;
using search::RerankCounters;
using search::SearchParams;
using search::ShardSet;
using search::slide_mosaic;
using search::SlideMosaic;
using search::StoredPatch;
using search::vote_patients;
using search::vote_slides;

namespace {

// The query vectors and what they stand for, resolved by rank 0.
struct Queries {
  int64_t n = 0;
  std::vector<float> vectors;  // n x dim
  std::vector<QueryInfo> info;
  std::vector<StoredPatch> stored;  // per query, patch_id -1 when not a stored patch
  Image8 image;                     // --image
};

int32_t slide_index(const VectorSlideTable& slides, const std::string& id) {
  const auto it = std::find(slides.slide_id.begin(), slides.slide_id.end(), id);
  if (it == slides.slide_id.end()) {
    fail<InvalidInput>("unknown slide '{}': the index's manifest has no such slide_id", id);
  }
  return static_cast<int32_t>(it - slides.slide_id.begin());
}

// Embeds --image with the model the catalog records, loaded as embed's config.ini describes it.
std::vector<float> embed_image(const Config& config, const Catalog& catalog, Image8& image) {
  if (image.width != image.height) {
    fail<InvalidInput>("'{}' is {} x {} pixels: give a square patch (it is resized to the index's "
                       "{} px patches at {} um/px)",
                       config.image, image.width, image.height, catalog.patch_size, catalog.mpp);
  }
  const int S = catalog.patch_size;
  if (image.width != S) {
    spdlog::warn("'{}' is {} px wide, the index's patches are {} px at {} um/px: resized", config.image,
                 image.width, S, catalog.mpp);
    Image8 resized{S, S, 3, std::vector<uint8_t>(static_cast<size_t>(S) * S * 3)};
    resize_patch(image.pixels.data(), image.width, resized.pixels.data(), S);
    image = std::move(resized);
  }
  return embed_patches(catalog, image.pixels.data(), 1, config.device, config.threads);
}

Queries resolve(const Config& config, const Catalog& catalog, const VectorSlideTable& slides,
                const PatchLookup& lookup, std::vector<MosaicPatch>* mosaic) {
  Queries q;
  auto stored = [&](const StoredPatch& p, std::string what) {
    std::vector<float> v = lookup.embedding(p);
    q.vectors.insert(q.vectors.end(), v.begin(), v.end());
    q.info.push_back({std::move(what), p.patch_id, p.slide, 0});
    q.stored.push_back(p);
    q.n = 1;
  };
  if (config.patch) {
    const auto p = lookup.find(*config.patch);
    if (!p) {
      fail<InvalidInput>("unknown patch id {}: no ingested part of '{}' holds it", *config.patch,
                         catalog.dir);
    }
    stored(*p, fmt::format("patch {} ({} at {}, {})", p->patch_id, slides.slide_id[p->slide], p->x,
                           p->y));
  } else if (config.mosaic_vote) {
    const int32_t s = slide_index(slides, config.slide);
    MosaicRule rule;
    rule.percent = config.mosaic_percent;
    rule.min_size = config.mosaic_min;
    SlideMosaic m = slide_mosaic(catalog, config.slide, rule, config.verify);
    q.n = static_cast<int64_t>(m.patches.size());
    q.vectors = std::move(m.vectors);
    for (const auto& p : m.patches) {
      q.info.push_back({fmt::format("mosaic of {}: patch at ({}, {})", config.slide, p.x, p.y), -1,
                        s, 0});
      q.stored.push_back({});
    }
    *mosaic = std::move(m.patches);
  } else if (!config.slide.empty()) {
    const StoredPatch p = lookup.nearest(slide_index(slides, config.slide), config.x, config.y);
    stored(p, fmt::format("slide {} at ({}, {}): patch {} at ({}, {})", config.slide, config.x,
                          config.y, p.patch_id, p.x, p.y));
  } else if (!config.vectors.empty()) {
    Matrix m = read_query_vectors(config.vectors);
    if (m.cols != catalog.dim) {
      fail<InvalidInput>("'{}' holds vectors of dimension {}, the index '{}' has dimension {}",
                         config.vectors, m.cols, catalog.dir, catalog.dim);
    }
    q.n = m.rows;
    q.vectors = std::move(m.values);
    for (int64_t i = 0; i < q.n; ++i) {
      q.info.push_back({fmt::format("{} row {}", config.vectors, i), -1, -1, 0});
      q.stored.push_back({});
    }
  } else {
    q.image = read_image(config.image);
    q.vectors = embed_image(config, catalog, q.image);
    q.n = 1;
    q.info.push_back({"image " + config.image, -1, -1, 0});
    q.stored.push_back({});
  }
  if (catalog.normalize) l2_normalize(q.vectors.data(), q.n, catalog.dim);
  return q;
}

std::string encode_queries(const Queries& q) {
  std::string bytes(sizeof(int64_t), '\0');
  std::memcpy(bytes.data(), &q.n, sizeof q.n);
  bytes.append(reinterpret_cast<const char*>(q.vectors.data()), q.vectors.size() * sizeof(float));
  for (const auto& i : q.info) bytes.append(reinterpret_cast<const char*>(&i.slide), sizeof i.slide);
  return bytes;
}

void decode_queries(const std::string& bytes, int dim, Queries& q) {
  std::memcpy(&q.n, bytes.data(), sizeof q.n);
  size_t at = sizeof q.n;
  q.vectors.resize(static_cast<size_t>(q.n) * dim);
  std::memcpy(q.vectors.data(), bytes.data() + at, q.vectors.size() * sizeof(float));
  at += q.vectors.size() * sizeof(float);
  q.info.resize(q.n);
  for (auto& i : q.info) {
    std::memcpy(&i.slide, bytes.data() + at, sizeof i.slide);
    at += sizeof i.slide;
  }
}

std::vector<QueryScope> scopes_for(const Config& config, const Queries& q,
                                   const VectorSlideTable& slides) {
  if (!config.exclude_same_slide && !config.exclude_same_patient && !config.mosaic_vote) return {};
  std::vector<QueryScope> scopes(q.n);
  for (int64_t i = 0; i < q.n; ++i) {
    const int32_t s = q.info[i].slide;
    if (s < 0) {
      fail<InvalidInput>("--exclude-same-slide and --exclude-same-patient need a query from a "
                         "stored patch (--patch or --slide), not {}",
                         config.vectors.empty() ? "--image" : "--vectors");
    }
    // A slide never votes for itself.
    scopes[i] = exclusion_scope(s, config.exclude_same_slide || config.mosaic_vote,
                                config.exclude_same_patient, slides);
  }
  return scopes;
}

std::vector<std::string> caption(const Hit& h, size_t rank, const VectorSlideTable& slides) {
  return {fmt::format("#{}  {:.4f}", rank + 1, h.score), slides.slide_id.at(h.slide),
          fmt::format("x={} y={}", h.x, h.y)};
}

// The mosaics of queries first .. first + hits.size() - 1.
void write_mosaics(const Config& config, const Queries& q, int64_t first,
                   const std::vector<std::vector<Hit>>& batch, const VectorSlideTable& slides,
                   const PatchLookup& lookup) {
  for (int64_t i = first; i < first + static_cast<int64_t>(batch.size()); ++i) {
    const std::vector<Hit>& hits = batch[i - first];
    std::string path = config.mosaic;
    if (q.n > 1) {
      const fs::path p(config.mosaic);
      path = (p.parent_path() / fmt::format("{}-q{:05d}{}", p.stem().string(), i,
                                            p.extension().string()))
                 .string();
    }
    MosaicTile query;
    if (!config.image.empty()) {
      query.image = q.image;
      query.caption = {fs::path(config.image).filename().string()};
    } else if (q.stored[i].patch_id >= 0) {
      const StoredPatch& p = q.stored[i];
      query.image = lookup.pixels(p);
      query.caption = {slides.slide_id.at(p.slide), fmt::format("x={} y={}", p.x, p.y)};
    } else {
      query.caption = {fmt::format("vector {}", i)};
    }
    std::vector<MosaicTile> tiles;
    for (size_t r = 0; r < hits.size(); ++r) {
      const Hit& h = hits[r];
      MosaicTile tile;
      tile.caption = caption(h, r, slides);
      if (const auto p = lookup.find(h.patch_id)) {
        std::string why;
        tile.image = lookup.pixels(*p, &why);
        if (tile.image.pixels.empty()) spdlog::warn("no pixels for patch {}: {}", h.patch_id, why);
      }
      tiles.push_back(std::move(tile));
    }
    write_mosaic(path, query, tiles);
    spdlog::info("mosaic of query {} in '{}'", i, path);
  }
}


// --mosaic-vote --mosaic OUT.png: one picture at OUT.png, the query slide's first mosaic patch
// (captioned with the slide and the mosaic's size), then each slide voted for, in vote order, as
// the pixels of its best-scoring hit with its votes and best score.
void write_vote_mosaic(const Config& config, const Queries& q,
                       const std::vector<MosaicPatch>& mosaic,
                       const std::vector<std::vector<Hit>>& vote_hits,
                       const std::vector<search::Vote>& ranked, const PatchLookup& lookup,
                       bool higher_is_better) {
  MosaicTile query;
  if (!mosaic.empty() && q.n > 0) {
    // The mosaic names its patches by position: the first one is found among its slide's.
    const search::SlidePatches own = lookup.slide_patches(q.info[0].slide);
    for (size_t i = 0; i < own.patch_id.size(); ++i) {
      if (own.coords[2 * i] != mosaic[0].x || own.coords[2 * i + 1] != mosaic[0].y) continue;
      if (const auto p = lookup.find(own.patch_id[i])) query.image = lookup.pixels(*p);
      break;
    }
  }
  query.caption = {config.slide, fmt::format("mosaic: {} patches", q.n),
                   fmt::format("top {} of each vote", config.k)};
  std::vector<MosaicTile> tiles;
  for (size_t r = 0; r < ranked.size() && static_cast<int>(r) < config.k; ++r) {
    const search::Vote& v = ranked[r];
    const Hit* best = nullptr;
    for (const auto& list : vote_hits) {
      for (const Hit& h : list) {
        if (h.slide != v.slide) continue;
        if (!best || (higher_is_better ? h.score > best->score : h.score < best->score)) best = &h;
      }
    }
    MosaicTile tile;
    tile.caption = {fmt::format("#{}  {} vote{}", r + 1, v.votes, v.votes == 1 ? "" : "s"), v.id,
                    fmt::format("best {:.4f}", v.best_score)};
    if (best) {
      if (const auto p = lookup.find(best->patch_id)) tile.image = lookup.pixels(*p);
    }
    tiles.push_back(std::move(tile));
  }
  write_mosaic(config.mosaic, query, tiles);
  spdlog::info("mosaic of the votes for {} in '{}'", config.slide, config.mosaic);
}

}  // namespace

int run(const Config& config, Comm& comm) {
  if (!config.output.empty()) check_output_path("--output", config.output, config.index);
  if (!config.mosaic.empty()) check_output_path("--mosaic", config.mosaic, config.index);
  if (!config.similar_slide.empty() || !config.similar_patient.empty()) {
    return run_similar(config, comm);
  }
  const Catalog catalog = load_catalog(config.index);
  require_current(catalog);
  const int K = static_cast<int>(catalog.shards.size());
  const std::vector<int> mine = search::owned_shards(K, comm.rank(), comm.size());
  if (comm.rank() == 0 && K < comm.size()) {
    spdlog::warn("{} ranks serve an index of {} shard(s): ranks {}..{} hold none", comm.size(), K,
                 K, comm.size() - 1);
  }
  // The slide table is the same in every shard; the filter is checked against its columns before
  // any index is loaded.
  const VectorSlideTable slides =
      read_vector_meta(catalog.path(catalog.shards.front().segments.at(0).meta.file), false).slides;
  std::optional<Filter> filter;
  std::string filter_problem;  // reported with the queries' own problems, all at once
  if (!config.filter.empty()) {
    try {
      filter = Filter::parse(config.filter, filter_columns(slides));
    } catch (const InvalidInput& e) {
      filter_problem = e.what();
    }
  }

  // Rank 0 resolves the queries (stored patches, files, an image) and tells the others.
  Queries queries;
  std::vector<MosaicPatch> mosaic;
  std::optional<PatchLookup> lookup;
  const std::string resolved = decided_by_root(comm, [&] {
    lookup.emplace(catalog, config.verify);
    try {
      queries = resolve(config, catalog, slides, *lookup, &mosaic);
    } catch (const InvalidInput& e) {
      if (filter_problem.empty()) throw;
      fail<InvalidInput>("{}\nand {}", filter_problem, e.what());
    }
    if (!filter_problem.empty()) fail<InvalidInput>("{}", filter_problem);
    return encode_queries(queries);
  });
  if (comm.rank() != 0) decode_queries(resolved, catalog.dim, queries);
  const std::vector<QueryScope> scopes = scopes_for(config, queries, slides);

  const int threads = thread_count(config.threads, "--threads");
  set_vector_threads(threads);
  const auto load_start = Clock::now();
  const ShardSet shards(catalog, mine, config.mmap, config.verify, filter, config.rerank);
  const double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
  const int64_t rows = comm.allreduce_sum(shards.rows());
  const int64_t matching = comm.allreduce_sum(shards.matching_rows());
  if (comm.rank() == 0) {
    spdlog::info("{} vectors in {} shard(s) over {} rank(s) loaded in {:.2f}s{}", rows, K,
                 comm.size(), load_s,
                 filter ? fmt::format("; the filter allows {}", matching) : std::string());
  }

  SearchParams params;
  params.k = config.k;
  params.nprobe = config.nprobe > 0 ? config.nprobe : catalog.default_nprobe;
  params.ef_search = config.ef_search;
  params.threads = threads;
  const int64_t batch = query_batch_size(config.batch_size, queries.n, config.k);
  Timing timing;
  timing.queries = queries.n;
  timing.batch_size = static_cast<int>(batch);
  const nlohmann::json search = {{"index", catalog.index_spec},
                                 {"metric", catalog.metric},
                                 {"normalize", catalog.normalize},
                                 {"shards", K},
                                 {"ranks", comm.size()},
                                 {"rows", rows},
                                 {"k", config.k},
                                 {"nprobe", params.nprobe},
                                 {"ef_search", params.ef_search},
                                 {"rerank", shards.rerank()},
                                 {"filter", config.filter},
                                 {"matching_rows", matching},
                                 {"load_s", round_decimals(load_s, 3)}};
  // Results go out batch by batch: memory holds one batch's hits (docs/operations.md). Mosaic
  // voting needs every mosaic patch's hits (a few percent of one slide's patches) for its votes.
  ReportStream report(config.format, slides, search, model_notice(catalog.model));
  std::optional<ResultSink> sink;
  std::vector<std::vector<Hit>> vote_hits;
  if (comm.rank() == 0) {
    sink.emplace(config.output);
    if (!config.mosaic_vote) sink->write(report.begin());
  }
  for (int64_t q0 = 0; q0 < queries.n; q0 += batch) {
    const int64_t m = std::min(batch, queries.n - q0);
    const auto start = Clock::now();
    std::vector<QueryScope> round_scopes;
    if (!scopes.empty()) round_scopes.assign(scopes.begin() + q0, scopes.begin() + q0 + m);
    std::vector<std::vector<Hit>> local = gather_best_hits(
        comm, shards.search(queries.vectors.data() + q0 * catalog.dim, m, round_scopes, params),
        std::vector<int>(static_cast<size_t>(m), config.k), catalog.metric == "ip");
    const double s = std::chrono::duration<double>(Clock::now() - start).count();
    timing.total_s += s;
    // A query's latency is the time until its results are known: its round's.
    for (int64_t q = 0; q < m; ++q) {
      timing.latency_ms.push_back(1000.0 * s);
      queries.info[q0 + q].latency_ms = 1000.0 * s;
    }
    if (comm.rank() != 0) continue;
    for (int64_t q = 0; q < m; ++q) {
      if (filter && static_cast<int64_t>(local[q].size()) < config.k) {
        spdlog::warn("query {}: {} hit(s) of {} asked: fewer vectors match the filter{}", q0 + q,
                     local[q].size(), config.k,
                     catalog.default_nprobe > 0 ? " within the probed lists (raise --nprobe)" : "");
      }
    }
    if (!config.mosaic.empty() && !config.mosaic_vote) {
      write_mosaics(config, queries, q0, local, slides, *lookup);
    }
    if (config.mosaic_vote) {
      for (auto& list : local) vote_hits.push_back(std::move(list));
      continue;
    }
    const std::vector<QueryInfo> infos(queries.info.begin() + q0, queries.info.begin() + q0 + m);
    sink->write(report.batch(q0, infos, local));
  }
  const RerankCounters reread = shards.rerank_counters();
  const int64_t reread_bytes = comm.allreduce_sum(reread.bytes);
  const int64_t reread_rows = comm.allreduce_sum(reread.rows);
  if (comm.rank() == 0 && shards.rerank() > 0) {
    spdlog::info("re-ranked {} x k candidates per shard: {} stored vectors read ({} bytes, {:.0f} "
                 "per query)",
                 shards.rerank(), reread_rows, reread_bytes,
                 static_cast<double>(reread_bytes) / std::max<int64_t>(1, queries.n));
  }
  if (comm.rank() != 0) return kExitOk;
  if (config.mosaic_vote) {
    const std::string notice = model_notice(catalog.model);
    if (config.format == "table" && !notice.empty()) sink->write(notice + "\n");
    const std::vector<search::Vote> ranked = vote_slides(vote_hits, slides, catalog.metric == "ip");
    if (!config.mosaic.empty()) {
      write_vote_mosaic(config, queries, mosaic, vote_hits, ranked, *lookup,
                        catalog.metric == "ip");
    }
    sink->write(format_vote_report(config.format, config.slide, mosaic, ranked,
                                   vote_patients(vote_hits, slides, catalog.metric == "ip"),
                                   slides, config.k, search));
  } else {
    sink->write(report.end(timing));
  }
  sink->commit();
  return kExitOk;
}

}  // namespace tessera::query
