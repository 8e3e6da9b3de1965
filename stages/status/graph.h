// `tessera-status --graph`: the stage graph of common/stage/layout.h as JSON, for launchers and
// scripts, so that they take the stages' order, folders and executables from the one declaration
// instead of spelling them. Pure.
#pragma once

#include <nlohmann/json.hpp>

namespace tessera::status {

// {"format_version": 1, "stages": [{"name", "folder", "kind", "name_option", "reads",
// "executable"}, ...]} with the stages in chain order (every stage after the stages it reads).
// `folder` is the stage's folder relative to the run directory, as RunLayout builds it; `kind`
// is "parts", "named_parts" or "named_generations" (DirKind); `name_option` the option that
// names a named stage's folder, null for stages without names. Schema in docs/operations.md.
nlohmann::json graph_json();

}  // namespace tessera::status
