#include "stages/ingest/generation.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/layout.h"
#include "common/stage/lineage.h"
#include "common/stage/skeleton.h"
#include "common/store/files.h"

namespace tessera::ingest {

namespace fs = std::filesystem;

namespace {


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

}  // namespace

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

int next_unlisted_generation(const std::string& out) {
  try {
    const int next = static_cast<int>(load_catalog(out).generations.size());
    return is_complete(generation_dir(out, next)) ? next : -1;
  } catch (const Error&) {
    return -1;
  }
}

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
    if (!path_exists(stage_file(generation_dir(out, last.generation), kSuccessFile))) {
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
  if (auto interrupted = read_json_file(stage_file(gen_dir, kRunFile))) {
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

int discover_parts(const std::string& embed_root) {
  if (path_exists(stage_file(embed_root, kRunFile))) return 1;
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

}  // namespace tessera::ingest
