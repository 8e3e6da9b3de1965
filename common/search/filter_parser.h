// The --filter parser: tokens (filter_lexer.h) to a type-checked Program (filter_program.h), by
// the grammar and typing rules of filter.h. Private to the filter.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "common/search/filter_program.h"

namespace tessera::search {

// Parses `text` against the known columns `schema`. Throws InvalidInput as Filter::parse says.
std::shared_ptr<Program> parse_program(const std::string& text,
                                       const std::vector<ColumnSchema>& schema);

}  // namespace tessera::search
