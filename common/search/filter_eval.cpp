#include "common/search/filter_eval.h"

#include <algorithm>
#include <string>
#include <type_traits>
#include <utility>

#include "common/core/error.h"

namespace tessera::search {

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

void evaluate_program(const Program& program, std::vector<const ColumnView*> views, int64_t rows,
                      uint8_t* out) {
  Evaluator(program, std::move(views)).run(rows, out);
}

}  // namespace tessera::search
