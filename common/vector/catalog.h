// catalog.json of an ingest output (RUN/ingest/<tag>/, layout in docs/formats.md): what query
// needs to find, check and search every shard. Written by ingest's rank 0 after every rank's
// marker was checked, read by query. Every path in it is relative to the catalog's directory,
// so a moved run directory still serves.
//
// An ingest output is a list of generations: the first ingest is generation 0, each
// `ingest --append` adds one (its own stage directory gen-NNNNN/), holding one segment per
// shard: an index file and its metadata. A shard is the union of its segments; all segments share
// generation 0's trained quantizer and codebooks, so their scores compare.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/stage/marker.h"

namespace tessera {

inline constexpr int64_t kCatalogFormatVersion = 1;
inline constexpr const char* kCatalogFile = "catalog.json";

// The files of a generation's directory (gen-NNNNN/), relative to it: one segment per shard, an
// index file and its metadata (common/store/vector_meta.h), and generation 0's trained, empty
// index when the index needs training.
inline constexpr const char* kTrainedFile = "trained.faiss";
inline constexpr const char* kShardIndexFile = "index.faiss";
inline constexpr const char* kShardMetaFile = "meta.h5";
std::string shard_dir(int shard);         // shards/shard-KKKKK
std::string shard_index_file(int shard);  // shards/shard-KKKKK/index.faiss
std::string shard_meta_file(int shard);   // shards/shard-KKKKK/meta.h5

struct CatalogSegment {
  int generation = 0;
  int64_t rows = 0;
  OutputRecord index;  // file relative to the catalog directory
  OutputRecord meta;
};

struct CatalogShard {
  int64_t rows = 0;
  std::vector<CatalogSegment> segments;
};

// One embed part taken in.
struct CatalogSource {
  int part = 0;
  int generation = 0;        // the generation that added it
  int64_t rows = 0;
  std::string embed_dir;     // relative to the catalog directory
  std::string patchgen_dir;  // relative to the catalog directory
  std::string embed_fingerprint;
  std::string patchgen_fingerprint;
};

struct CatalogGeneration {
  int generation = 0;
  std::string dir;  // relative: gen-NNNNN
  std::vector<int> parts;
  int64_t rows = 0;
  std::string config_fingerprint;
  std::string completed;  // UTC time
};

struct Catalog {
  std::string dir;  // the directory of catalog.json (not stored)
  std::string tag;
  std::string index_spec;  // FAISS index_factory string
  std::string metric;      // "ip" or "l2"
  bool normalize = false;
  std::string assign;      // "by-slide" or "cyclic"
  int dim = 0;
  int embed_parts = 1;     // parts of the embed output (all or some of them taken in)
  int default_nprobe = 0;  // IVF: lists probed when query is not told; 0 otherwise
  int patch_size = 0;
  double mpp = 0;
  std::string store_dtype;
  nlohmann::json model;     // embed's model fingerprint
  std::vector<OutputRecord> trained;  // the trained empty index, when the index needs training
  std::vector<CatalogShard> shards;
  std::vector<CatalogSource> sources;
  std::vector<CatalogGeneration> generations;
  std::string created, updated;

  int64_t rows() const;
  std::vector<int> parts_in() const;  // ascending
  std::string path(const std::string& relative) const;  // dir / relative
  nlohmann::json to_json() const;
  // Throws IoError naming `what` when a field is missing or of the wrong type.
  static Catalog from_json(const nlohmann::json& j, const std::string& dir, const std::string& what);
};

// Reads DIR/catalog.json. Throws InvalidInput when it does not exist ("run ingest first"),
// IoError when it is malformed, of another format version, or differs from its seal (below).
Catalog load_catalog(const std::string& dir);

// The seal of catalog.json. The catalog is written after the _SUCCESS of the generation that
// makes it (so it never lists an unfinished generation); that _SUCCESS records, under
// kCatalogSealField, the size and XXH3 of the catalog text about to be written. A catalog is
// checked against the seal in the _SUCCESS of the last generation it lists: a job killed between
// the two leaves the previous catalog, which the previous generation's seal matches.
inline constexpr const char* kCatalogSealField = "catalog";

// The text write_catalog writes for `catalog`.
std::string catalog_text(const Catalog& catalog);

// The seal of `text` (marker.h seal_text): {"file": "../catalog.json", "bytes", "xxh3"}.
nlohmann::json catalog_seal(const std::string& text);

// Why DIR/catalog.json, whose bytes are `text` and which lists `catalog`'s generations, must not
// be trusted: its size or XXH3 differs from the seal of its last generation, naming the file;
// "" when they match, or when there is no seal to compare (no generation, its _SUCCESS is missing
// or was written before catalogs were sealed).
std::string catalog_seal_problem(const Catalog& catalog, const std::string& text);

// Why the index must not be searched, or "" when it may: a generation the catalog lists that is
// not complete, is stale, or was made from inputs that changed since (lineage.h). Reads small
// files only.
std::string catalog_stale_reason(const Catalog& catalog);

// Throws InvalidInput with catalog_stale_reason and what to run, when it is not "".
void require_current(const Catalog& catalog);

// Writes DIR/catalog.json atomically.
void write_catalog(const Catalog& catalog);

// Checks every file the catalog lists (segments and the trained index) at `level` (kCheap: sizes
// and the files' ends; kFull: every byte). Returns one line per damaged or missing file, naming it;
// empty when all are intact. `shards` limits the check to those shards (all when not given).
std::vector<std::string> check_catalog_files(
    const Catalog& catalog, VerifyLevel level,
    const std::optional<std::vector<int>>& shards = std::nullopt);

}  // namespace tessera
