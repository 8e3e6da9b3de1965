// `tessera-status --graph`: the stage graph of common/stage/layout.h as JSON, for launchers and
// scripts, so that they take the stages' order, folders and executables from the one declaration
// instead of spelling them. Pure.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "common/stage/layout.h"

namespace tessera::status {

// The folder of `decl`'s directories relative to a run directory, as RunLayout builds it
// ("patchgen", "embed", ...; a named stage's roots are <folder>/<name>).
std::string stage_folder(const StageDecl& decl);

// {"format_version": 1, "stages": [{"name", "folder", "kind", "name_option", "reads",
// "executable"}, ...]} with the stages in chain order (every stage after the stages it reads).
// `folder` is the stage's folder relative to the run directory, as RunLayout builds it; `kind`
// is "parts", "named_parts" or "named_generations" (DirKind); `name_option` the option that
// names a named stage's folder, null for stages without names. Schema in docs/operations.md.
nlohmann::json graph_json();

}  // namespace tessera::status
