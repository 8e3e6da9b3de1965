// The compiled form of a --filter expression, shared by its parser (filter_parser.h) and its
// evaluator (filter_eval.h); private to the filter (filter.h is the interface).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/search/filter.h"

namespace tessera::search {

enum class Op { kEq, kNe, kLt, kLe, kGt, kGe, kIn };

// How a leaf compares: the column's values as int64 against int64 literals, as double against
// double literals, or as text.
enum class Mode { kInt, kFloat, kString };

// One comparison `column op literal` or `column [not] in (literals)`.
struct Leaf {
  int column = 0;  // index into Program::columns
  Op op = Op::kEq;
  bool negate = false;  // `not in`
  Mode mode = Mode::kString;
  int64_t int_value = 0;
  double float_value = 0;
  std::string string_value;
  std::vector<int64_t> int_list;  // sorted, for kIn
  std::vector<double> float_list;
  std::vector<std::string> string_list;
};

struct Node {
  enum Kind { kLeaf, kAnd, kOr, kNot } kind = kLeaf;
  int leaf = -1;              // kLeaf: index into Program::leaves
  std::vector<int> children;  // kAnd, kOr (two or more), kNot (one): indexes into Program::nodes
};

struct Program {
  std::string text;
  std::vector<ColumnSchema> columns;  // used columns, in order of first appearance
  std::vector<Leaf> leaves;
  std::vector<Node> nodes;
  int root = -1;  // index into nodes
};

}  // namespace tessera::search
