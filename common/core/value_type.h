// The one rule for numbers written as text in tables (manifest metadata, the slide manifest's
// mpp, --filter literals) and the one inference of a text column's type from its values. The
// metadata store (common/store/vector_meta.h, MetaType) and the query filter
// (common/search/filter.h, ColumnType) both use it, so a column is typed the same everywhere.
//
// A decimal number is, as the whole text: an optional sign, digits with an optional fraction
// (`5.`, `5.25`) or a fraction alone (`.5`), and an optional exponent `e[+-]digits` (either
// case). No blanks, no hex (`0x1A`), no `inf` or `nan`, no digit separators; the locale plays
// no part.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tessera {

enum class ValueType { kInt, kFloat, kString };

// Whether `text` is a decimal number by the rule above (syntax only: its value may not fit).
bool is_decimal_number(std::string_view text);

// The value of `text` when it is a decimal number without fraction or exponent that fits in
// int64; nullopt otherwise.
std::optional<int64_t> parse_int64(std::string_view text);

// The value of `text` when it is a decimal number whose value is finite (subnormals included,
// nearest double); nullopt otherwise (also when it overflows, or underflows to zero from a
// non-zero mantissa).
std::optional<double> parse_double(std::string_view text);

// The type of a column from its text values, empty values ignored: kInt when every non-empty
// value satisfies parse_int64, else kFloat when every one satisfies parse_double, else kString.
// A column with no non-empty value is kString. Readers convert empty values to 0 (int) or NaN
// (float).
ValueType infer_value_type(const std::vector<std::string>& values);

}  // namespace tessera
