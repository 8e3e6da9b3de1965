// Which generation an ingest run builds, from which embed parts: rank 0's decision, made from
// what is on disk (the embed parts and their completion, the output's catalog and generations,
// the options), with no MPI in it. run() broadcasts it to every rank as JSON.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/vector/catalog.h"
#include "stages/ingest/config.h"

namespace tessera::ingest {

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

// Which generation to build from which parts: a new index from every wanted embed part (each must
// be complete; with --overwrite the later generations and the catalog go first), or with --append
// the next generation from the wanted parts not in the index yet (those not complete are left for
// a later append), resuming an append that did not finish or finishing one listed before its
// _SUCCESS. Throws InvalidInput naming what to run or what differs; reads only (but for
// --overwrite's removals).
Decision decide(const Config& config);

nlohmann::json decision_json(const Decision& d);
// The decision decision_json wrote; `out` is the output folder its catalog resolves paths from.
Decision decision_from(const nlohmann::json& j, const std::string& out);

// Why the complete generation `generation` of `out` must be finished again: its catalog is
// missing, damaged or does not list it (a job killed between its _SUCCESS and the catalog, or a
// catalog deleted by hand); "" when the catalog lists it.
std::string catalog_gap(const std::string& out, int generation);

// The generation after those `out`'s catalog lists when it is complete but not listed (the
// catalog is being rebuilt generation by generation), else -1.
int next_unlisted_generation(const std::string& out);

// The number of parts of the embed output at `embed_root` (RUN/embed/<tag>): 1 when it is a stage
// directory itself, else Q of its part-PPPPP-of-QQQQQ folders. Throws InvalidInput when there is
// none, or when folders disagree on Q.
int discover_parts(const std::string& embed_root);

}  // namespace tessera::ingest
