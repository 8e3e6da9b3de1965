#include "stages/ingest/catalog_update.h"

#include <filesystem>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/marker.h"

namespace tessera::ingest {

namespace fs = std::filesystem;

Catalog with_generation(const Config& config, const Decision& decision,
                        const std::vector<Source>& sources,
                        const std::vector<nlohmann::json>& markers, const GenerationBuilt& g) {
  const std::string gen = fs::path(g.dir).filename().string();
  auto in_out = [&](OutputRecord r) {
    r.file = gen + "/" + r.file;
    return r;
  };
  const auto relative_to_out = [&](const std::string& path) {
    return fs::path(path).lexically_relative(fs::path(g.out)).string();
  };
  Catalog c = decision.previous ? *decision.previous : Catalog{};
  c.dir = g.out;
  if (!decision.previous) {
    c.tag = decision.tag;
    c.index_spec = config.index;
    c.metric = config.metric;
    c.normalize = config.normalize;
    c.assign = to_string(config.assign);
    c.dim = g.dim;
    c.embed_parts = decision.embed_parts;
    c.patch_size = sources.front().info.patch_size;
    c.mpp = sources.front().info.mpp;
    c.store_dtype = sources.front().embed_success.value("store_dtype", "fp32");
    c.model = sources.front().embed_success.at("model");
    c.default_nprobe = g.default_nprobe;
    c.created = g.now;
    c.shards.assign(config.shards, {});
    if (path_exists((fs::path(g.dir) / kTrainedFile).string())) {
      c.trained.push_back(in_out(seal_output(g.dir, kTrainedFile)));
    }
  }
  c.updated = g.now;
  std::vector<std::optional<CatalogSegment>> segments(config.shards);
  for (const auto& m : markers) {
    std::map<std::string, OutputRecord> records;
    for (const auto& o : m.at("outputs")) {
      OutputRecord r = OutputRecord::from_json(o);
      records[r.file] = r;
    }
    for (const auto& s : m.at("shards")) {
      const int k = s.at("shard").get<int>();
      CatalogSegment seg;
      seg.generation = decision.generation;
      seg.rows = s.at("rows").get<int64_t>();
      seg.index = in_out(records.at(shard_index_file(k)));
      seg.meta = in_out(records.at(shard_meta_file(k)));
      segments[k] = seg;
    }
  }
  int64_t rows = 0;
  for (int k = 0; k < config.shards; ++k) {
    TESSERA_CHECK(segments[k].has_value(), "ingest: no rank reported shard {}", k);
    c.shards[k].rows += segments[k]->rows;
    c.shards[k].segments.push_back(*segments[k]);
    rows += segments[k]->rows;
  }
  for (const Source& s : sources) {
    CatalogSource src;
    src.part = s.part;
    src.generation = decision.generation;
    src.rows = s.info.rows;
    src.embed_dir = relative_to_out(s.embed_dir);
    src.patchgen_dir = relative_to_out(s.patchgen_dir);
    src.embed_fingerprint = s.embed_success.value("config_fingerprint", "");
    src.patchgen_fingerprint = s.info.config_fingerprint;
    c.sources.push_back(src);
  }
  c.generations.push_back({decision.generation, gen, decision.parts, rows, g.fingerprint, g.now});
  return c;
}

}  // namespace tessera::ingest
