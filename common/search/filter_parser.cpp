#include "common/search/filter_parser.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "common/core/error.h"
#include "common/core/value_type.h"
#include "common/search/filter_lexer.h"

namespace tessera::search {

namespace {

class Parser {
 public:
  Parser(const std::string& text, const std::vector<ColumnSchema>& schema)
      : text_(text), schema_(schema) {}

  std::shared_ptr<Program> run() {
    program_ = std::make_shared<Program>();
    program_->text = text_;
    tokens_ = tokenize(text_);
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
  [[noreturn]] void error(size_t pos, const std::string& what) const {
    filter_error(text_, pos, what);
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

std::shared_ptr<Program> parse_program(const std::string& text,
                                       const std::vector<ColumnSchema>& schema) {
  return Parser(text, schema).run();
}

}  // namespace tessera::search
