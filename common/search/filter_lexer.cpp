#include "common/search/filter_lexer.h"

#include <fmt/format.h>

#include "common/core/error.h"
#include "common/core/utf8.h"

namespace tessera::search {

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

// `pos` is a byte offset; the message counts characters (UTF-8 continuation bytes add none).
void filter_error(const std::string& text, size_t pos, const std::string& what) {
  std::string shown = text;
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
  throw InvalidInput(fmt::format("filter \"{}\": at position {}: {}\n  {}\n  {}", text, position,
                                 what, shown, caret));
}

std::string describe(const Token& t) {
  switch (t.kind) {
    case Tok::kEnd:
      return "the end of the filter";
    case Tok::kQuoted:
      return fmt::format("the quoted string '{}'", t.text);
    default:
      return fmt::format("'{}'", t.text);
  }
}

std::vector<Token> tokenize(const std::string& text) {
  std::vector<Token> tokens;
  const auto error = [&](size_t pos, const std::string& what) { filter_error(text, pos, what); };
  size_t i = 0;
  const size_t n = text.size();
  while (true) {
    while (i < n && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) {
      ++i;
    }
    Token t;
    t.pos = i;
    if (i == n) {
      tokens.push_back(std::move(t));
      return tokens;
    }
    const char c = text[i];
    if (c == '(' || c == ')' || c == ',') {
      t.kind = c == '(' ? Tok::kLParen : c == ')' ? Tok::kRParen : Tok::kComma;
      t.text = std::string(1, c);
      ++i;
    } else if (c == '=' || c == '!' || c == '<' || c == '>') {
      t.kind = Tok::kOp;
      const char d = i + 1 < n ? text[i + 1] : '\0';
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
      t.text = text.substr(i, len);
      i += len;
    } else if (c == '\'' || c == '"') {
      t.kind = Tok::kQuoted;
      ++i;
      bool closed = false;
      while (i < n) {
        const char x = text[i];
        if (x == c) {
          if (i + 1 < n && text[i + 1] == c) {
            t.text += c;
            i += 2;
            continue;
          }
          ++i;
          closed = true;
          break;
        }
        if (x == '\\' && i + 1 < n && (text[i + 1] == c || text[i + 1] == '\\')) {
          t.text += text[i + 1];
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
      while (i < n && is_bare_char(text[i])) ++i;
      t.text = text.substr(start, i - start);
      const std::string low = lower(t.text);
      if (low == "and" || low == "or" || low == "not" || low == "in") t.keyword = low;
    } else if (static_cast<unsigned char>(c) >= 0x80) {
      // The whole character, not its first byte.
      const size_t len = utf8_sequence_length(text, i);
      if (len == 0) {
        error(i, fmt::format("byte 0x{:02x} is not valid UTF-8", static_cast<unsigned char>(c)));
      }
      error(i, fmt::format("unexpected character '{}' (column names and unquoted values are "
                           "A-Z a-z 0-9 _ . : / + -; quote values with other characters)",
                           text.substr(i, len)));
    } else {
      error(i, fmt::format("unexpected character '{}'", c));
    }
    tokens.push_back(std::move(t));
  }
}

}  // namespace tessera::search
