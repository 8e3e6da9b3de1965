// The `--filter` expression language of the query tool: a boolean predicate over metadata columns
// (per-patch or per-slide) that selects which rows of a search take part, e.g.
//   patient_id != P01 and site = lung
//   slide_id in (a, b)
//   tissue >= 0.5 and not (x < 1000)
//   label = 'tumor grade 2' or age > 60
//   site not in ("lung", colon)
//
// Grammar (keywords `and`, `or`, `not`, `in` are case-insensitive; `and` binds tighter than `or`):
//   expr     := and_expr ("or" and_expr)*
//   and_expr := unary ("and" unary)*
//   unary    := "not" unary | primary
//   primary  := "(" expr ")" | column op literal
//             | column ["not"] "in" "(" literal ("," literal)* ")"
//   op       := = | == | != | <> | < | <= | > | >=
// Tokens:
//   - A bare token is a maximal run of the characters [A-Za-z0-9_.:/+-]. Bare tokens spelled
//     `and`, `or`, `not`, `in` (any case) are keywords; quote them to use them as values.
//   - A column is a bare token naming one of the known columns exactly (case-sensitive).
//   - A literal is a bare token or a quoted string. A bare token is a *number* when it is entirely
//     a decimal number (common/core/value_type.h, the rule metadata columns are typed by):
//     optional sign, digits with an optional fraction (or a fraction alone, `.5`), optional
//     exponent `e[+-]digits`; otherwise it is a *word* (`lung`, `P01`,
//     `2024-01-05`, `tumor_2`, `inf`). A number without fraction and exponent that fits in int64 is
//     an integer.
//   - Quoted strings use '...' or "..."; inside, the quote is written doubled ('it''s') or
//     backslash-escaped ('it\'s'), `\\` is one backslash, and any other backslash is kept as is
//     (so 'C:\data' is C:\data).
// Semantics, by the column's type:
//   - string columns compare text, byte-wise (`<` and `>` are lexicographic in byte order). A
//     number literal compares as the text it was written as (`patient_id = 007` is "007") with
//     `=`, `!=` and `in`; ordered against a string column (`site > 3`) an unquoted number is an
//     error, as a word is against a numeric column: quote it (`site > '3'`) to order text.
//   - int64 and float64 columns need a literal that is a number (quoted or not); anything else is
//     an error. Int columns compared with an integer compare exactly; any other numeric pairing
//     compares as double (exact up to 2^53). NaN values (empty float entries) are unequal to
//     everything: only `!=` and `not in` hold for them.
// Parentheses and `not` nest at most kMaxFilterDepth levels deep.
// Errors are tessera::InvalidInput, with the 1-based byte position and the expression underlined:
//   filter "site = = lung": at position 8: expected a value after '='
//     site = = lung
//            ^
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/core/value_type.h"

namespace tessera::search {

// A column's type: the type metadata columns are stored with (MetaType, common/store).
using ColumnType = ValueType;

// The deepest nesting of '(' and 'not' a filter may have (parsing and evaluation recurse per
// level; deeper filters are refused, naming the limit).
inline constexpr size_t kMaxFilterDepth = 64;

// "int", "float", "string".
const char* column_type_name(ColumnType type);

// A column of a table being filtered. Row r's value is values[index ? index[r] : r] of the array
// of its type: `index` lets a per-row view use a per-slide column (slide-level metadata) without
// copying it per row. Without an index the array must hold at least `rows` entries; with one,
// every index entry must lie in [0, values). The view does not own the arrays.
struct ColumnView {
  std::string name;
  ColumnType type = ColumnType::kString;
  const int64_t* ints = nullptr;         // kInt
  const double* floats = nullptr;        // kFloat
  const std::string* strings = nullptr;  // kString
  const int32_t* index = nullptr;        // optional indirection, one entry per row
  int64_t values = 0;                    // number of entries in ints/floats/strings
};

// A column the filter may name, and its type.
struct ColumnSchema {
  std::string name;
  ColumnType type = ColumnType::kString;
};

struct Program;  // the compiled predicate (filter_program.h), private to the filter

// A parsed and type-checked filter. Immutable; copies share the compiled program. Thread-safe:
// evaluate may run concurrently on one Filter.
class Filter {
 public:
  // Parses `text` against the known `columns` (names are unique). Throws InvalidInput when the
  // text is empty or malformed (unbalanced parentheses, trailing input, a missing value or
  // operator, an unterminated string, an empty `in ()` list), names an unknown column (the
  // message lists the known ones), compares a numeric column with a value that is not a number,
  // orders a string column by an unquoted number, or nests deeper than kMaxFilterDepth. Every message quotes the filter and gives the position.
  static Filter parse(const std::string& text, const std::vector<ColumnSchema>& columns);

  // The text it was parsed from.
  const std::string& text() const;

  // The columns the filter names, each once, in order of first appearance.
  std::vector<std::string> columns_used() const;

  // Evaluates the filter on every row of a table of `rows` rows. `columns` must hold a view for
  // every used column (others are ignored) with the type it was parsed against and the array of
  // that type set; otherwise, or when an index entry is out of range, throws InvalidInput.
  // Returns one byte per row: 1 when the row matches, else 0. Works in chunks with no string
  // parsing or lookups per row; a predicate on an indirected column is computed once per
  // distinct entry (per slide) and gathered per row. Memory: O(rows + entries of indirected
  // columns).
  std::vector<uint8_t> evaluate(const std::vector<ColumnView>& columns, int64_t rows) const;

 private:
  explicit Filter(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace tessera::search
