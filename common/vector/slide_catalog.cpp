#include "common/vector/slide_catalog.h"

#include <filesystem>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/core/error.h"
#include "common/core/fs.h"
#include "common/stage/layout.h"
#include "common/stage/lineage.h"
#include "common/stage/skeleton.h"

namespace tessera {

namespace fs = std::filesystem;

std::string SlideCatalog::path(const std::string& relative) const {
  return (fs::path(dir) / relative).lexically_normal().string();
}

bool has_slide_catalog(const std::string& dir) {
  return path_exists((fs::path(dir) / kSlideCatalogFile).string());
}

void write_slide_catalog(const std::string& dir, const SlideCatalog& c) {
  const nlohmann::json j = {{"format_version", kSlideCatalogFormatVersion},
                            {"level", c.level},
                            {"source", c.source},
                            {"index", c.index_spec},
                            {"metric", c.metric},
                            {"normalize", c.normalize},
                            {"dim", c.dim},
                            {"rows", c.rows},
                            {"encoder", c.encoder},
                            {"index_file", c.index_file},
                            {"entries_file", c.entries_file}};
  atomic_write_file((fs::path(dir) / kSlideCatalogFile).string(), j.dump(2) + "\n");
}

SlideCatalog load_slide_catalog(const std::string& dir, VerifyLevel level) {
  const std::string file = (fs::path(dir) / kSlideCatalogFile).string();
  std::optional<nlohmann::json> j;
  try {
    j = read_json_file(file);
  } catch (const InvalidInput& e) {
    throw IoError(e.what());
  }
  if (!j) {
    fail<InvalidInput>("'{}' has no {}: run ingest --level slide (or patient) first", dir,
                       kSlideCatalogFile);
  }
  SlideCatalog c;
  c.dir = dir;
  try {
    if (j->at("format_version").get<int64_t>() != kSlideCatalogFormatVersion) {
      fail<IoError>("'{}' is of format version {}, not {}", file,
                    j->at("format_version").get<int64_t>(), kSlideCatalogFormatVersion);
    }
    c.level = j->at("level").get<std::string>();
    c.source = j->at("source").get<std::string>();
    c.index_spec = j->at("index").get<std::string>();
    c.metric = j->at("metric").get<std::string>();
    c.normalize = j->at("normalize").get<bool>();
    c.dim = j->at("dim").get<int>();
    c.rows = j->at("rows").get<int64_t>();
    c.encoder = j->at("encoder").get<std::string>();
    c.index_file = j->at("index_file").get<std::string>();
    c.entries_file = j->at("entries_file").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    fail<IoError>("'{}' is malformed: {}", file, e.what());
  }
  if (!path_exists(stage_file(dir, kSuccessFile))) {
    fail<InvalidInput>("the index '{}' is not complete (no {}): rerun ingest --level {}", dir,
                       kSuccessFile, c.level);
  }
  const std::string why = stale_reason(dir);
  if (!why.empty()) {
    fail<InvalidInput>("the index '{}' no longer matches its inputs: {}; rebuild it (ingest "
                       "--level {} --overwrite)",
                       dir, why, c.level);
  }
  // Its files (and slide_catalog.json, sealed in _SUCCESS) against their records: a flipped
  // vectors.faiss gave other scores with exit 0.
  const std::string damage = stage_outputs_problem(dir, level);
  if (!damage.empty()) {
    fail<IoError>("the index '{}' is damaged: {}; rebuild it (ingest --level {} --verify full)",
                  dir, damage, c.level);
  }
  return c;
}

}  // namespace tessera
