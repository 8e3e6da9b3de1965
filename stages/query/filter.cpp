#include "stages/query/filter.h"

#include <fmt/format.h>

#include <algorithm>
#include <type_traits>
#include <utility>

#include "common/core/error.h"
#include "common/core/utf8.h"
#include "common/core/value_type.h"

namespace tessera::query {

enum class Op { kEq, kNe, kLt, kLe, kGt, kGe, kIn };

// How a leaf compares: the column's values as int64 against int64 literals, as double against
// double literals, or as text.
enum class Mode { kInt, kFloat, kString };

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
  int leaf = -1;
  std::vector<int> children;
};

struct Program {
  std::string text;
  std::vector<ColumnSchema> columns;  // used columns, in order of first appearance
  std::vector<Leaf> leaves;
  std::vector<Node> nodes;
  int root = -1;
};

const char* column_type_name(ColumnType type) {
  switch (type) {
    case ColumnType::kInt:
      return "int";
    case ColumnType::kFloat:
      return "float";
    case ColumnType::kString:
      return "string";
  }
  return "?";
}

namespace {

bool is_bare_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == ':' || c == '/' || c == '+' || c == '-';
}

std::string lower(std::string s) {
  for (char& c : s) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return s;
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// Parsing

namespace {

enum class Tok { kEnd, kLParen, kRParen, kComma, kOp, kBare, kQuoted };

struct Token {
  Tok kind = Tok::kEnd;
  size_t pos = 0;    // 0-based byte offset
  std::string text;  // as written (kOp, kBare) or decoded (kQuoted)
  Op op = Op::kEq;
  std::string keyword;  // "and", "or", "not", "in" for keyword bare tokens, else empty
};

class Parser {
 public:
  Parser(const std::string& text, const std::vector<ColumnSchema>& schema)
      : text_(text), schema_(schema) {}

  std::shared_ptr<Program> run() {
    program_ = std::make_shared<Program>();
    program_->text = text_;
    tokenize();
    if (tokens_.front().kind == Tok::kEnd) error(0, "the filter is empty");
    program_->root = parse_or();
    const Token& t = peek();
    if (t.kind == Tok::kRParen) error(t.pos, "unmatched ')'");
    if (t.kind != Tok::kEnd) {
      error(t.pos, fmt::format("unexpected {}; expected 'and', 'or' or the end of the filter{}",
                               describe(t),
                               t.kind == Tok::kBare ? " (quote values that contain spaces)" : ""));
    }
    return std::move(program_);
  }

 private:
  // `pos` is a byte offset; the message counts characters (UTF-8 continuation bytes add none).
  [[noreturn]] void error(size_t pos, const std::string& what) const {
    std::string shown = text_;
    std::string caret;
    size_t position = 1;
    for (size_t i = 0; i < shown.size(); ++i) {
      if (shown[i] == '\n' || shown[i] == '\r') shown[i] = ' ';
      if (i < pos && (static_cast<unsigned char>(shown[i]) & 0xC0) != 0x80) {
        caret += shown[i] == '\t' ? '\t' : ' ';
        ++position;
      }
    }
    caret += '^';
    throw InvalidInput(fmt::format("filter \"{}\": at position {}: {}\n  {}\n  {}", text_, position,
                                   what, shown, caret));
  }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case Tok::kEnd:
        return "the end of the filter";
      case Tok::kQuoted:
        return fmt::format("the quoted string '{}'", t.text);
      default:
        return fmt::format("'{}'", t.text);
    }
  }

  void tokenize() {
    size_t i = 0;
    const size_t n = text_.size();
    while (true) {
      while (i < n &&
             (text_[i] == ' ' || text_[i] == '\t' || text_[i] == '\n' || text_[i] == '\r')) {
        ++i;
      }
      Token t;
      t.pos = i;
      if (i == n) {
        tokens_.push_back(std::move(t));
        return;
      }
      const char c = text_[i];
      if (c == '(' || c == ')' || c == ',') {
        t.kind = c == '(' ? Tok::kLParen : c == ')' ? Tok::kRParen : Tok::kComma;
        t.text = std::string(1, c);
        ++i;
      } else if (c == '=' || c == '!' || c == '<' || c == '>') {
        t.kind = Tok::kOp;
        const char d = i + 1 < n ? text_[i + 1] : '\0';
        size_t len = 1;
        if (c == '=') {
          t.op = Op::kEq;
          if (d == '=') len = 2;
        } else if (c == '!') {
          if (d != '=') error(i, "unexpected character '!'; did you mean '!='?");
          t.op = Op::kNe;
          len = 2;
        } else if (c == '<') {
          t.op = d == '=' ? Op::kLe : d == '>' ? Op::kNe : Op::kLt;
          if (d == '=' || d == '>') len = 2;
        } else {
          t.op = d == '=' ? Op::kGe : Op::kGt;
          if (d == '=') len = 2;
        }
        t.text = text_.substr(i, len);
        i += len;
      } else if (c == '\'' || c == '"') {
        t.kind = Tok::kQuoted;
        ++i;
        bool closed = false;
        while (i < n) {
          const char x = text_[i];
          if (x == c) {
            if (i + 1 < n && text_[i + 1] == c) {
              t.text += c;
              i += 2;
              continue;
            }
            ++i;
            closed = true;
            break;
          }
          if (x == '\\' && i + 1 < n && (text_[i + 1] == c || text_[i + 1] == '\\')) {
            t.text += text_[i + 1];
            i += 2;
            continue;
          }
          t.text += x;
          ++i;
        }
        if (!closed) error(t.pos, fmt::format("unterminated string: no closing {}", c));
      } else if (is_bare_char(c)) {
        t.kind = Tok::kBare;
        const size_t start = i;
        while (i < n && is_bare_char(text_[i])) ++i;
        t.text = text_.substr(start, i - start);
        const std::string low = lower(t.text);
        if (low == "and" || low == "or" || low == "not" || low == "in") t.keyword = low;
      } else if (static_cast<unsigned char>(c) >= 0x80) {
        // The whole character, not its first byte.
        const size_t len = utf8_sequence_length(text_, i);
        if (len == 0) {
          error(i, fmt::format("byte 0x{:02x} is not valid UTF-8", static_cast<unsigned char>(c)));
        }
        error(i, fmt::format("unexpected character '{}' (column names and unquoted values are "
                             "A-Z a-z 0-9 _ . : / + -; quote values with other characters)",
                             text_.substr(i, len)));
      } else {
        error(i, fmt::format("unexpected character '{}'", c));
      }
      tokens_.push_back(std::move(t));
    }
  }

  const Token& peek() const { return tokens_[next_]; }
  const Token& take() { return tokens_[next_ < tokens_.size() - 1 ? next_++ : next_]; }
  bool at_keyword(const char* keyword) const {
    return peek().kind == Tok::kBare && peek().keyword == keyword;
  }

  int add_node(Node node) {
    program_->nodes.push_back(std::move(node));
    return static_cast<int>(program_->nodes.size()) - 1;
  }

  int parse_or() {
    Node node;
    node.kind = Node::kOr;
    node.children.push_back(parse_and());
    while (at_keyword("or")) {
      take();
      node.children.push_back(parse_and());
    }
    return node.children.size() == 1 ? node.children[0] : add_node(std::move(node));
  }

  int parse_and() {
    Node node;
    node.kind = Node::kAnd;
    node.children.push_back(parse_unary());
    while (at_keyword("and")) {
      take();
      node.children.push_back(parse_unary());
    }
    return node.children.size() == 1 ? node.children[0] : add_node(std::move(node));
  }

  // Entered for each '(' and 'not': the parser and the evaluator recurse once per level, so the
  // depth is bounded before it can exhaust the stack.
  void descend(size_t pos) {
    if (++depth_ > kMaxFilterDepth) {
      error(pos, fmt::format("the filter nests deeper than {} levels of '(' and 'not'",
                             kMaxFilterDepth));
    }
  }

  int parse_unary() {
    if (at_keyword("not")) {
      descend(peek().pos);
      take();
      Node node;
      node.kind = Node::kNot;
      node.children.push_back(parse_unary());
      --depth_;
      return add_node(std::move(node));
    }
    return parse_primary();
  }

  int parse_primary() {
    const Token& t = take();
    if (t.kind == Tok::kLParen) {
      descend(t.pos);
      const int inner = parse_or();
      const Token& close = peek();
      if (close.kind == Tok::kEnd) {
        error(close.pos, fmt::format("missing ')' to close the '(' at position {}", t.pos + 1));
      }
      if (close.kind != Tok::kRParen) {
        error(close.pos,
              fmt::format("unexpected {}; expected 'and', 'or' or ')'", describe(close)));
      }
      take();
      --depth_;
      return inner;
    }
    if (t.kind != Tok::kBare || !t.keyword.empty()) {
      error(t.pos, fmt::format("expected a column name or '(', got {}", describe(t)));
    }
    const int column = resolve_column(t);
    const ColumnSchema& schema = program_->columns[column];

    Leaf leaf;
    leaf.column = column;
    const Token& op = take();
    if (op.kind == Tok::kOp) {
      leaf.op = op.op;
      const Token& value = take();
      check_value(value, fmt::format("after '{}'", op.text));
      check_text_order(leaf, schema, value);
      set_scalar(leaf, schema, value);
    } else if (op.kind == Tok::kBare && (op.keyword == "in" || op.keyword == "not")) {
      if (op.keyword == "not") {
        if (!at_keyword("in")) error(peek().pos, "expected 'in' after 'not'");
        take();
        leaf.negate = true;
      }
      leaf.op = Op::kIn;
      const Token& open = take();
      if (open.kind != Tok::kLParen) error(open.pos, "expected '(' after 'in'");
      std::vector<const Token*> items;
      if (peek().kind == Tok::kRParen) error(peek().pos, "empty list after 'in'");
      while (true) {
        const Token& value = take();
        check_value(value, items.empty() ? "after '('" : "after ','");
        items.push_back(&value);
        const Token& sep = take();
        if (sep.kind == Tok::kRParen) break;
        if (sep.kind == Tok::kEnd) {
          error(sep.pos, fmt::format("missing ')' to close the list at position {}", open.pos + 1));
        }
        if (sep.kind != Tok::kComma) {
          error(sep.pos, fmt::format("expected ',' or ')' in the list, got {}", describe(sep)));
        }
      }
      set_list(leaf, schema, items);
    } else {
      error(op.pos, fmt::format("expected an operator (=, ==, !=, <>, <, <=, >, >=, in, not in) "
                                "after column '{}', got {}",
                                t.text, describe(op)));
    }
    program_->leaves.push_back(std::move(leaf));
    Node node;
    node.kind = Node::kLeaf;
    node.leaf = static_cast<int>(program_->leaves.size()) - 1;
    return add_node(std::move(node));
  }

  // An unquoted number ordered against a string column would compare bytes ("10" < "9"), which
  // is never what it looks like; the reverse mismatch (a word against a number column) is
  // refused too. Quoting the number asks for the text comparison.
  void check_text_order(const Leaf& leaf, const ColumnSchema& schema, const Token& value) const {
    const bool ordering = leaf.op == Op::kLt || leaf.op == Op::kLe || leaf.op == Op::kGt ||
                          leaf.op == Op::kGe;
    if (schema.type != ColumnType::kString || !ordering || value.kind != Tok::kBare ||
        !is_decimal_number(value.text)) {
      return;
    }
    error(value.pos, fmt::format("column '{}' is string but {} is a number: ordering text by a "
                                 "number compares bytes (\"10\" < \"9\"); quote it ('{}') to "
                                 "compare text",
                                 schema.name, value.text, value.text));
  }

  void check_value(const Token& value, const std::string& where) const {
    if (value.kind == Tok::kQuoted || (value.kind == Tok::kBare && value.keyword.empty())) return;
    std::string hint;
    if (value.kind == Tok::kBare)
      hint = fmt::format(" (quote '{}' to use it as a value)", value.text);
    error(value.pos, fmt::format("expected a value {}, got {}{}", where, describe(value), hint));
  }

  int resolve_column(const Token& t) {
    for (size_t i = 0; i < program_->columns.size(); ++i) {
      if (program_->columns[i].name == t.text) return static_cast<int>(i);
    }
    for (const ColumnSchema& c : schema_) {
      if (c.name == t.text) {
        program_->columns.push_back(c);
        return static_cast<int>(program_->columns.size()) - 1;
      }
    }
    std::string names;
    for (const ColumnSchema& c : schema_) names += (names.empty() ? "" : ", ") + c.name;
    error(t.pos,
          fmt::format("unknown column '{}' (columns: {})", t.text, names.empty() ? "none" : names));
  }

  // The numeric value of a literal for a numeric column: sets *integer when it is an int64.
  double number_of(const Token& value, const ColumnSchema& schema,
                   std::optional<int64_t>* integer) {
    *integer = parse_int64(value.text);
    if (*integer) return static_cast<double>(**integer);
    if (const auto f = parse_double(value.text)) return *f;
    if (is_decimal_number(value.text)) {
      error(value.pos, fmt::format("number {} is out of range", value.text));
    }
    const char c = value.text.empty() ? ' ' : value.text[0];
    const bool numberish = (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.';
    if (numberish && value.kind == Tok::kBare) {
      error(value.pos, fmt::format("bad number '{}' for {} column '{}'", value.text,
                                   column_type_name(schema.type), schema.name));
    }
    error(value.pos, fmt::format("column '{}' is {} but {} is not a number", schema.name,
                                 column_type_name(schema.type), describe(value)));
  }

  void set_scalar(Leaf& leaf, const ColumnSchema& schema, const Token& value) {
    if (schema.type == ColumnType::kString) {
      leaf.mode = Mode::kString;
      leaf.string_value = value.text;
      return;
    }
    std::optional<int64_t> integer;
    const double number = number_of(value, schema, &integer);
    if (schema.type == ColumnType::kInt && integer) {
      leaf.mode = Mode::kInt;
      leaf.int_value = *integer;
    } else {
      leaf.mode = Mode::kFloat;
      leaf.float_value = number;
    }
  }

  void set_list(Leaf& leaf, const ColumnSchema& schema, const std::vector<const Token*>& items) {
    if (schema.type == ColumnType::kString) {
      leaf.mode = Mode::kString;
      for (const Token* t : items) leaf.string_list.push_back(t->text);
      std::sort(leaf.string_list.begin(), leaf.string_list.end());
      return;
    }
    bool all_int = schema.type == ColumnType::kInt;
    for (const Token* t : items) {
      std::optional<int64_t> integer;
      leaf.float_list.push_back(number_of(*t, schema, &integer));
      if (integer) leaf.int_list.push_back(*integer);
      all_int = all_int && integer;
    }
    leaf.mode = all_int ? Mode::kInt : Mode::kFloat;
    if (all_int)
      leaf.float_list.clear();
    else
      leaf.int_list.clear();
    std::sort(leaf.int_list.begin(), leaf.int_list.end());
    std::sort(leaf.float_list.begin(), leaf.float_list.end());
  }

  const std::string& text_;
  const std::vector<ColumnSchema>& schema_;
  std::vector<Token> tokens_;
  size_t next_ = 0;
  size_t depth_ = 0;
  std::shared_ptr<Program> program_;
};

}  // namespace

Filter Filter::parse(const std::string& text, const std::vector<ColumnSchema>& columns) {
  return Filter(Parser(text, columns).run());
}

const std::string& Filter::text() const { return program_->text; }

std::vector<std::string> Filter::columns_used() const {
  std::vector<std::string> names;
  for (const ColumnSchema& c : program_->columns) names.push_back(c.name);
  return names;
}

// ------------------------------------------------------------------------------------------------
// Evaluation

namespace {

constexpr int64_t kChunk = 16384;

template <typename T, typename Pred>
void apply(const T* v, int64_t n, uint8_t* out, Pred pred) {
  for (int64_t i = 0; i < n; ++i) out[i] = pred(v[i]) ? 1 : 0;
}

template <typename T, typename L>
void compare(const T* v, int64_t n, Op op, const L& lit, uint8_t* out) {
  switch (op) {
    case Op::kEq:
      return apply(v, n, out, [&](const T& x) { return x == lit; });
    case Op::kNe:
      return apply(v, n, out, [&](const T& x) { return !(x == lit); });
    case Op::kLt:
      return apply(v, n, out, [&](const T& x) { return x < lit; });
    case Op::kLe:
      return apply(v, n, out, [&](const T& x) { return x <= lit; });
    case Op::kGt:
      return apply(v, n, out, [&](const T& x) { return x > lit; });
    case Op::kGe:
      return apply(v, n, out, [&](const T& x) { return x >= lit; });
    case Op::kIn:
      break;
  }
}

template <typename T, typename L>
void member(const T* v, int64_t n, const std::vector<L>& sorted, bool negate, uint8_t* out) {
  const uint8_t hit = negate ? 0 : 1;
  if (sorted.size() <= 8) {
    apply(v, n, out, [&](const T& x) {
      bool found = false;
      for (const L& s : sorted) found |= (x == s);
      return found == static_cast<bool>(hit);
    });
  } else {
    apply(v, n, out, [&](const T& x) {
      const auto it = std::lower_bound(sorted.begin(), sorted.end(), x,
                                       [](const L& a, const T& b) { return a < b; });
      const bool found = it != sorted.end() && *it == x;
      return found == static_cast<bool>(hit);
    });
  }
}

template <typename T>
void eval_typed(const Leaf& leaf, const T* v, int64_t n, uint8_t* out) {
  if constexpr (std::is_same_v<T, std::string>) {
    if (leaf.op == Op::kIn) return member(v, n, leaf.string_list, leaf.negate, out);
    return compare(v, n, leaf.op, leaf.string_value, out);
  } else {
    if (leaf.mode == Mode::kInt) {
      if (leaf.op == Op::kIn) return member(v, n, leaf.int_list, leaf.negate, out);
      return compare(v, n, leaf.op, leaf.int_value, out);
    }
    if (leaf.op == Op::kIn) return member(v, n, leaf.float_list, leaf.negate, out);
    return compare(v, n, leaf.op, leaf.float_value, out);
  }
}

// Evaluates `leaf` on entries [begin, begin + n) of the column's own array (no indirection).
void eval_direct(const Leaf& leaf, const ColumnView& c, int64_t begin, int64_t n, uint8_t* out) {
  switch (c.type) {
    case ColumnType::kInt:
      return eval_typed(leaf, c.ints + begin, n, out);
    case ColumnType::kFloat:
      return eval_typed(leaf, c.floats + begin, n, out);
    case ColumnType::kString:
      return eval_typed(leaf, c.strings + begin, n, out);
  }
}

class Evaluator {
 public:
  Evaluator(const Program& program, std::vector<const ColumnView*> views)
      : program_(program), views_(std::move(views)), tables_(program.leaves.size()) {
    for (size_t i = 0; i < program.leaves.size(); ++i) {
      const Leaf& leaf = program.leaves[i];
      const ColumnView& c = *views_[leaf.column];
      if (c.index == nullptr) continue;
      tables_[i].resize(static_cast<size_t>(c.values));
      eval_direct(leaf, c, 0, c.values, tables_[i].data());
    }
  }

  void run(int64_t rows, uint8_t* out) {
    for (int64_t begin = 0; begin < rows; begin += kChunk) {
      eval(program_.root, begin, std::min(kChunk, rows - begin), out + begin, 0);
    }
  }

 private:
  uint8_t* scratch(size_t depth) {
    if (scratch_.size() <= depth) scratch_.resize(depth + 1);
    if (scratch_[depth].empty()) scratch_[depth].resize(kChunk);
    return scratch_[depth].data();
  }

  void eval(int node_id, int64_t begin, int64_t n, uint8_t* out, size_t depth) {
    const Node& node = program_.nodes[node_id];
    switch (node.kind) {
      case Node::kLeaf:
        return eval_leaf(node.leaf, begin, n, out);
      case Node::kNot:
        eval(node.children[0], begin, n, out, depth);
        for (int64_t i = 0; i < n; ++i) out[i] ^= 1;
        return;
      case Node::kAnd:
      case Node::kOr: {
        const bool is_and = node.kind == Node::kAnd;
        eval(node.children[0], begin, n, out, depth);
        uint8_t* tmp = scratch(depth);
        for (size_t k = 1; k < node.children.size(); ++k) {
          // Skip the remaining terms once the chunk is decided.
          uint8_t any = 0, all = 1;
          for (int64_t i = 0; i < n; ++i) {
            any |= out[i];
            all &= out[i];
          }
          if (is_and ? !any : all) return;
          eval(node.children[k], begin, n, tmp, depth + 1);
          if (is_and) {
            for (int64_t i = 0; i < n; ++i) out[i] &= tmp[i];
          } else {
            for (int64_t i = 0; i < n; ++i) out[i] |= tmp[i];
          }
        }
        return;
      }
    }
  }

  void eval_leaf(int leaf_id, int64_t begin, int64_t n, uint8_t* out) {
    const Leaf& leaf = program_.leaves[leaf_id];
    const ColumnView& c = *views_[leaf.column];
    if (c.index == nullptr) return eval_direct(leaf, c, begin, n, out);
    const uint8_t* table = tables_[leaf_id].data();
    const int32_t* index = c.index + begin;
    const uint64_t limit = static_cast<uint64_t>(c.values);
    if (limit == 0) {
      fail<InvalidInput>("filter: column '{}': row {} has index {} but the column has no values",
                         c.name, begin, index[0]);
    }
    bool bad = false;
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t e = static_cast<uint64_t>(static_cast<int64_t>(index[i]));
      bad |= e >= limit;
      out[i] = table[e < limit ? e : 0];
    }
    if (bad) {
      for (int64_t i = 0; i < n; ++i) {
        if (index[i] < 0 || index[i] >= c.values) {
          fail<InvalidInput>("filter: column '{}': row {} has index {} outside [0, {})", c.name,
                             begin + i, index[i], c.values);
        }
      }
    }
  }

  const Program& program_;
  std::vector<const ColumnView*> views_;       // per used column
  std::vector<std::vector<uint8_t>> tables_;   // per leaf on an indirected column
  std::vector<std::vector<uint8_t>> scratch_;  // per depth
};

}  // namespace

std::vector<uint8_t> Filter::evaluate(const std::vector<ColumnView>& columns, int64_t rows) const {
  const Program& p = *program_;
  TESSERA_CHECK(rows >= 0, "filter \"{}\": negative row count {}", p.text, rows);
  std::vector<const ColumnView*> views;
  for (const ColumnSchema& used : p.columns) {
    const ColumnView* view = nullptr;
    for (const ColumnView& c : columns) {
      if (c.name == used.name) view = &c;
    }
    if (view == nullptr) {
      fail<InvalidInput>("filter \"{}\": column '{}' is not available", p.text, used.name);
    }
    if (view->type != used.type) {
      fail<InvalidInput>("filter \"{}\": column '{}' is {}, but the filter was parsed for {}",
                         p.text, used.name, column_type_name(view->type),
                         column_type_name(used.type));
    }
    const bool has_array = (view->type == ColumnType::kInt && view->ints) ||
                           (view->type == ColumnType::kFloat && view->floats) ||
                           (view->type == ColumnType::kString && view->strings);
    if (!has_array && (rows > 0 || view->values > 0)) {
      fail<InvalidInput>("filter \"{}\": column '{}' has no {} values", p.text, used.name,
                         column_type_name(used.type));
    }
    if (view->index == nullptr && view->values < rows) {
      fail<InvalidInput>("filter \"{}\": column '{}' has {} values for {} rows", p.text, used.name,
                         view->values, rows);
    }
    views.push_back(view);
  }
  std::vector<uint8_t> out(static_cast<size_t>(rows));
  Evaluator(p, std::move(views)).run(rows, out.data());
  return out;
}

}  // namespace tessera::query
