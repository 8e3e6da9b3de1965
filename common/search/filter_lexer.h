// The tokens of a --filter expression (the token rules are filter.h's) and its error messages.
// Private to the filter.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/search/filter_program.h"

namespace tessera::search {

enum class Tok { kEnd, kLParen, kRParen, kComma, kOp, kBare, kQuoted };

struct Token {
  Tok kind = Tok::kEnd;
  size_t pos = 0;    // 0-based byte offset
  std::string text;  // as written (kOp, kBare) or decoded (kQuoted)
  Op op = Op::kEq;
  std::string keyword;  // "and", "or", "not", "in" for keyword bare tokens, else empty
};

// The tokens of `text`, ending with one kEnd token. Throws InvalidInput (filter_error) on a
// character no token starts with, bytes that are not UTF-8, a lone '!' or an unterminated string.
std::vector<Token> tokenize(const std::string& text);

// Throws InvalidInput: `what` at byte offset `pos` of the filter `text`, the message giving the
// 1-based character position and the filter with a caret under it.
[[noreturn]] void filter_error(const std::string& text, size_t pos, const std::string& what);

// A token as a message names it: 'x', the quoted string 'x', or the end of the filter.
std::string describe(const Token& t);

}  // namespace tessera::search
