// The --filter evaluator: a Program (filter_program.h) over column views, in chunks, with no
// string parsing or lookups per row. Private to the filter.
#pragma once

#include <cstdint>
#include <vector>

#include "common/search/filter_program.h"

namespace tessera::search {

// Writes 1 or 0 per row of `rows` rows to `out`. `views` holds one view per used column
// (program.columns order), each already checked against the program's type and row count.
// Throws InvalidInput when an index entry of an indirected view lies outside its values.
void evaluate_program(const Program& program, std::vector<const ColumnView*> views, int64_t rows,
                      uint8_t* out);

}  // namespace tessera::search
