#include "common/vector/catalog.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/layout.h"
#include "common/stage/lineage.h"
#include "common/vector/slide_catalog.h"

namespace tessera {

std::string shard_dir(int shard) { return fmt::format("shards/shard-{:05d}", shard); }
std::string shard_index_file(int shard) { return shard_dir(shard) + "/" + kShardIndexFile; }
std::string shard_meta_file(int shard) { return shard_dir(shard) + "/" + kShardMetaFile; }

namespace fs = std::filesystem;

namespace {

// Records without the seal's timings, so that catalogs of equal content are equal.
nlohmann::json record_json(const OutputRecord& r) {
  return {{"file", r.file}, {"bytes", r.bytes}, {"xxh3", r.xxh3}, {"xxh3_ends", r.xxh3_ends}};
}

}  // namespace

int64_t Catalog::rows() const {
  int64_t n = 0;
  for (const auto& s : shards) n += s.rows;
  return n;
}

std::vector<int> Catalog::parts_in() const {
  std::vector<int> parts;
  for (const auto& s : sources) parts.push_back(s.part);
  std::sort(parts.begin(), parts.end());
  return parts;
}

std::string Catalog::path(const std::string& relative) const {
  return (fs::path(dir) / relative).lexically_normal().string();
}

nlohmann::json Catalog::to_json() const {
  nlohmann::json j = {{"format_version", kCatalogFormatVersion},
                      {"tag", tag},
                      {"index", index_spec},
                      {"metric", metric},
                      {"normalize", normalize},
                      {"assign", assign},
                      {"dim", dim},
                      {"embed_parts", embed_parts},
                      {"default_nprobe", default_nprobe},
                      {"patch_size", patch_size},
                      {"mpp", mpp},
                      {"store_dtype", store_dtype},
                      {"model", model},
                      {"rows", rows()},
                      {"parts_in", parts_in()},
                      {"created", created},
                      {"updated", updated}};
  j["trained"] = nlohmann::json::array();
  for (const auto& t : trained) j["trained"].push_back(record_json(t));
  j["shards"] = nlohmann::json::array();
  for (size_t k = 0; k < shards.size(); ++k) {
    nlohmann::json segments = nlohmann::json::array();
    for (const auto& s : shards[k].segments) {
      segments.push_back({{"generation", s.generation},
                          {"rows", s.rows},
                          {"index", record_json(s.index)},
                          {"meta", record_json(s.meta)}});
    }
    j["shards"].push_back({{"shard", k}, {"rows", shards[k].rows}, {"segments", segments}});
  }
  j["sources"] = nlohmann::json::array();
  for (const auto& s : sources) {
    j["sources"].push_back({{"part", s.part},
                            {"generation", s.generation},
                            {"rows", s.rows},
                            {"embed_dir", s.embed_dir},
                            {"patchgen_dir", s.patchgen_dir},
                            {"embed_fingerprint", s.embed_fingerprint},
                            {"patchgen_fingerprint", s.patchgen_fingerprint}});
  }
  j["generations"] = nlohmann::json::array();
  for (const auto& g : generations) {
    j["generations"].push_back({{"generation", g.generation},
                                {"dir", g.dir},
                                {"parts", g.parts},
                                {"rows", g.rows},
                                {"config_fingerprint", g.config_fingerprint},
                                {"completed", g.completed}});
  }
  return j;
}

Catalog Catalog::from_json(const nlohmann::json& j, const std::string& dir, const std::string& what) {
  Catalog c;
  c.dir = dir;
  try {
    if (j.at("format_version").get<int64_t>() != kCatalogFormatVersion) {
      fail<IoError>("'{}' has catalog format version {}, this build reads {}", what,
                    j.at("format_version").get<int64_t>(), kCatalogFormatVersion);
    }
    c.tag = j.at("tag").get<std::string>();
    c.index_spec = j.at("index").get<std::string>();
    c.metric = j.at("metric").get<std::string>();
    c.normalize = j.at("normalize").get<bool>();
    c.assign = j.at("assign").get<std::string>();
    c.dim = j.at("dim").get<int>();
    c.embed_parts = j.at("embed_parts").get<int>();
    c.default_nprobe = j.at("default_nprobe").get<int>();
    c.patch_size = j.at("patch_size").get<int>();
    c.mpp = j.at("mpp").get<double>();
    c.store_dtype = j.at("store_dtype").get<std::string>();
    c.model = j.at("model");
    c.created = j.at("created").get<std::string>();
    c.updated = j.at("updated").get<std::string>();
    for (const auto& t : j.at("trained")) c.trained.push_back(OutputRecord::from_json(t));
    for (const auto& s : j.at("shards")) {
      CatalogShard shard;
      shard.rows = s.at("rows").get<int64_t>();
      for (const auto& g : s.at("segments")) {
        CatalogSegment seg;
        seg.generation = g.at("generation").get<int>();
        seg.rows = g.at("rows").get<int64_t>();
        seg.index = OutputRecord::from_json(g.at("index"));
        seg.meta = OutputRecord::from_json(g.at("meta"));
        shard.segments.push_back(std::move(seg));
      }
      c.shards.push_back(std::move(shard));
    }
    for (const auto& s : j.at("sources")) {
      CatalogSource src;
      src.part = s.at("part").get<int>();
      src.generation = s.at("generation").get<int>();
      src.rows = s.at("rows").get<int64_t>();
      src.embed_dir = s.at("embed_dir").get<std::string>();
      src.patchgen_dir = s.at("patchgen_dir").get<std::string>();
      src.embed_fingerprint = s.at("embed_fingerprint").get<std::string>();
      src.patchgen_fingerprint = s.at("patchgen_fingerprint").get<std::string>();
      c.sources.push_back(std::move(src));
    }
    for (const auto& g : j.at("generations")) {
      CatalogGeneration gen;
      gen.generation = g.at("generation").get<int>();
      gen.dir = g.at("dir").get<std::string>();
      gen.parts = g.at("parts").get<std::vector<int>>();
      gen.rows = g.at("rows").get<int64_t>();
      gen.config_fingerprint = g.at("config_fingerprint").get<std::string>();
      gen.completed = g.at("completed").get<std::string>();
      c.generations.push_back(std::move(gen));
    }
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("'{}' is not a valid catalog: {}", what, e.what());
  }
  if (c.dim < 1 || c.shards.empty()) {
    fail<IoError>("'{}' is not a valid catalog: dimension {} and {} shards", what, c.dim,
                  c.shards.size());
  }
  return c;
}

Catalog load_catalog(const std::string& dir) {
  const std::string path = (fs::path(dir) / kCatalogFile).string();
  if (!path_exists(path)) {
    if (path_exists((fs::path(dir) / kSlideCatalogFile).string())) {
      fail<InvalidInput>("'{}' is a slide- or patient-level index (ingest --level slide|patient), "
                         "not a patch index: search it with --similar-slide S or "
                         "--similar-patient P; --patch, --slide and --mosaic-vote search a patch "
                         "index (RUN/ingest/<tag>)",
                         dir);
    }
    fail<InvalidInput>("'{}' holds no catalog.json: not an ingest output, or its ingest has not "
                       "completed (run ingest first)",
                       dir);
  }
  const std::string text = read_file(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("'{}' is not valid JSON: {}", path, e.what());
  }
  Catalog c = Catalog::from_json(j, dir, path);
  const std::string seal = catalog_seal_problem(c, text);
  if (!seal.empty()) {
    fail<IoError>("{}: it was changed or damaged since ingest wrote it; rerun ingest (it rebuilds "
                  "the catalog from the generations)",
                  seal);
  }
  return c;
}

std::string catalog_text(const Catalog& catalog) { return catalog.to_json().dump(2) + "\n"; }

nlohmann::json catalog_seal(const std::string& text) {
  return seal_text(std::string("../") + kCatalogFile, text);
}

std::string catalog_seal_problem(const Catalog& catalog, const std::string& text) {
  if (catalog.generations.empty()) return "";
  const std::string gen = (fs::path(catalog.dir) / catalog.generations.back().dir).string();
  return check_text_seal(stage_file(gen, kSuccessFile), kCatalogSealField,
                         (fs::path(catalog.dir) / kCatalogFile).string(), text);
}

std::string catalog_stale_reason(const Catalog& catalog) {
  for (const auto& g : catalog.generations) {
    const std::string dir = (fs::path(catalog.dir) / g.dir).string();
    if (!path_exists(stage_file(dir, kSuccessFile))) {
      return fmt::format("generation '{}' is not complete (no {})", dir, kSuccessFile);
    }
    std::string why = stale_reason(dir);
    if (!why.empty()) return why;
  }
  return "";
}

void require_current(const Catalog& catalog) {
  const std::string why = catalog_stale_reason(catalog);
  if (!why.empty()) {
    fail<InvalidInput>("the index '{}' no longer matches its inputs: {}; rebuild it (ingest "
                       "--overwrite), or rerun the stages tessera-status lists",
                       catalog.dir, why);
  }
}

void write_catalog(const Catalog& catalog) {
  atomic_write_file((fs::path(catalog.dir) / kCatalogFile).string(), catalog_text(catalog));
}

std::vector<std::string> check_catalog_files(const Catalog& catalog, VerifyLevel level,
                                             const std::optional<std::vector<int>>& shards) {
  std::vector<std::string> problems;
  auto check = [&](const OutputRecord& r) {
    std::string why = check_output(catalog.dir, r, level);
    if (!why.empty()) problems.push_back(why);
  };
  for (const auto& t : catalog.trained) check(t);
  for (size_t k = 0; k < catalog.shards.size(); ++k) {
    if (shards && std::find(shards->begin(), shards->end(), static_cast<int>(k)) == shards->end()) {
      continue;
    }
    for (const auto& s : catalog.shards[k].segments) {
      check(s.index);
      check(s.meta);
    }
  }
  return problems;
}

}  // namespace tessera
