// What tessera-status prints: the table, the --incomplete lines and the --json document of a
// scanned run (scan.h). Pure functions of a RunStatus.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "stages/status/state.h"

namespace tessera::status {

// The JSON document of `tessera-status --json` (schema in docs/operations.md, "--json").
nlohmann::json to_json(const RunStatus& status);

// The human-readable report: one table row per stage directory, then failed slides, the rows not
// complete with their ranks and last progress, running services, and the commands to run next.
std::string format_table(const RunStatus& status);

// One line per row that is not complete: "<stage> <tag|name|-> <part> <parts> <state>\n".
std::string format_incomplete(const RunStatus& status);

// Rank lists in ranges: {0,1,2,5,7,8} -> "0-2,5,7-8"; {} -> "-". Input sorted ascending.
std::string format_ranks(const std::vector<int>& ranks);

// The name column of a row: the folder's name of a named stage (embed's tag, aggregate's and
// ingest's name), "-" for stages without names.
std::string row_name(const StageStatus& s);

// The part column of a row: "1 of 2", "gen 3" for an ingest generation, the level ("slide",
// "patient") for a slide- or patient-level index.
std::string part_text(const StageStatus& s);

// A row in prose: "patchgen part 1 of 2", "embed vit-s16 part 0 of 1", "ingest vit-s16 gen 1",
// "ingest mean-vit-s16 slide".
std::string row_title(const StageStatus& s);

}  // namespace tessera::status
