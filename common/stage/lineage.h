// Lineage: which stage directories each stage directory was made from, recorded when it starts
// and compared whenever it is used. A stage replaced by a fresh run marks every stage directory
// made from it stale, following the stage graph (layout.h) as far as it reaches; a directory whose
// input changed without marking (a folder swapped in by hand, a rerun from another run
// directory) is found stale by comparing the fingerprints it recorded. None of these functions is
// collective; they read (and mark_downstream_stale writes) small files only.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace tessera {

// What the stage directory `stage_dir` records of one input directory in its run.json
// ("inputs"): its stage, its path relative to `stage_dir` (so a moved run directory keeps its
// lineage), config fingerprint and the XXH3 of its _SUCCESS (which changes with every completed
// run of it). Throws IoError when the input has no run.json or _SUCCESS.
nlohmann::json input_record(const std::string& input_dir, const std::string& stage_dir);

// Why the outputs in `stage_dir` must not be used, or "" when they may: _STALE (with its reason),
// or an input recorded in its run.json that is stale itself, incomplete or changed since
// (recursively, through the inputs' own records). Directories without records (made before
// lineage was recorded) are judged by _STALE alone.
std::string stale_reason(const std::string& stage_dir);

// Marks stale (writes _STALE, atomically) every stage directory of a downstream stage of `stage`
// under `run` that was made from `replaced_dir` or from a directory marked here, and returns them.
// Directories without lineage records are marked when they belong to a downstream stage.
std::vector<std::string> mark_downstream_stale(const std::string& run, const std::string& stage,
                                               const std::string& replaced_dir,
                                               const std::string& reason);

}  // namespace tessera
