#include "stages/serve/request_head.h"

#include <algorithm>
#include <cctype>

namespace tessera::serve {

namespace {

bool header_name_is(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

// Digits only, at most 18 of them (below 2^63): anything else is not a length.
bool parse_content_length(std::string_view s, uint64_t& out) {
  if (s.empty() || s.size() > 18) return false;
  out = 0;
  for (const char c : s) {
    if (c < '0' || c > '9') return false;
    out = out * 10 + static_cast<uint64_t>(c - '0');
  }
  return true;
}

HeadScan refused_head(int status, std::string reason) {
  HeadScan s;
  s.state = HeadScan::kRefused;
  s.status = status;
  s.reason = std::move(reason);
  return s;
}

}  // namespace

HeadScan scan_head(std::string_view bytes, const HeadLimits& limits) {
  RequestHead head;
  int headers = 0, ranges = 0, lengths = 0, encodings = 0;
  bool chunked = false;
  size_t pos = 0;
  for (bool first = true;; first = false) {
    const size_t eol = bytes.find('\n', pos);
    const size_t end = eol == std::string_view::npos ? bytes.size() : eol + 1;
    if (first && end - pos > limits.max_request_line) {
      return refused_head(414, "the request line is too long");
    }
    if (end > limits.max_head_bytes) {
      return refused_head(431, "the request head is over " + std::to_string(limits.max_head_bytes) +
                              " bytes");
    }
    if (eol == std::string_view::npos) return {};
    const std::string_view line = bytes.substr(pos, eol - pos);
    const size_t line_begin = pos;
    pos = end;
    if (first) continue;
    if (trim_blanks(line).empty()) break;
    if (++headers > limits.max_headers) {
      return refused_head(431, "more than " + std::to_string(limits.max_headers) + " headers");
    }
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;  // cpp-httplib skips it, as before
    const std::string_view name = line.substr(0, colon);
    const std::string_view value = trim_blanks(line.substr(colon + 1));
    if (header_name_is(name, "Content-Length")) {
      ++lengths;
      if (!parse_content_length(value, head.content_length)) {
        return refused_head(400, "Content-Length is not a length");
      }
    } else if (header_name_is(name, "Transfer-Encoding")) {
      ++encodings;
      if (!header_name_is(value, "chunked")) {
        return refused_head(501, "Transfer-Encoding other than chunked is not supported");
      }
      chunked = true;
    } else if (header_name_is(name, "Range")) {
      ranges += 1 + static_cast<int>(std::count(value.begin(), value.end(), ','));
    } else if (header_name_is(name, "Expect")) {
      head.expect_continue = header_name_is(value, "100-continue");
      head.expect_begin = line_begin;
      head.expect_end = end;
    }
  }
  if (lengths > 1 || encodings > 1 || (lengths == 1 && encodings == 1)) {
    return refused_head(400, "the body's length is given more than once");
  }
  if (ranges > limits.max_ranges) {
    HeadScan s = refused_head(416, "more than " + std::to_string(limits.max_ranges) + " ranges");
    return s;
  }
  if (lengths == 1 && head.content_length > limits.max_body_bytes) {
    return refused_head(413, "the request body is over the limit of " +
                            std::to_string(limits.max_body_bytes) + " bytes");
  }
  head.head_bytes = pos;
  head.framing = chunked ? Framing::kChunked : lengths == 1 ? Framing::kLength : Framing::kNone;
  HeadScan s;
  s.state = HeadScan::kComplete;
  s.head = head;
  return s;
}

int scan_chunked(std::string_view body, ChunkedScan& state, const HeadLimits& limits) {
  constexpr size_t kMaxSizeLine = 1024;  // hex digits and chunk extensions
  while (true) {
    const size_t eol = body.find('\n', state.pos);
    if (eol == std::string_view::npos) {
      const size_t pending = body.size() - state.pos;
      if (!state.trailers && pending > kMaxSizeLine) return 400;
      if (state.trailers && state.pos + pending > limits.max_body_bytes + limits.max_head_bytes) {
        return 431;
      }
      return 0;
    }
    const std::string_view line = body.substr(state.pos, eol - state.pos);
    if (state.trailers) {
      state.pos = eol + 1;
      if (trim_blanks(line).empty()) return 1;
      if (state.pos > limits.max_body_bytes + limits.max_head_bytes) return 431;
      continue;
    }
    if (line.size() > kMaxSizeLine) return 400;
    const std::string_view digits = trim_blanks(line.substr(0, line.find(';')));
    if (digits.empty() || digits.size() > 15) return 400;
    uint64_t size = 0;
    for (const char c : digits) {
      const int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                    : c >= 'a' && c <= 'f'                       ? c - 'a' + 10
                    : c >= 'A' && c <= 'F'                       ? c - 'A' + 10
                                                                 : -1;
      if (v < 0) return 400;
      size = size * 16 + static_cast<uint64_t>(v);
    }
    if (size > limits.max_body_bytes || state.data + size > limits.max_body_bytes) return 413;
    if (size == 0) {
      state.trailers = true;
      state.pos = eol + 1;
      continue;
    }
    // The data and its CRLF must have arrived before the next size line is read.
    const size_t data_begin = eol + 1;
    if (body.size() < data_begin + size + 1) return 0;
    size_t after = data_begin + size;
    if (body[after] == '\r') {
      if (body.size() < after + 2) return 0;
      ++after;
    }
    if (body[after] != '\n') return 400;
    state.data += size;
    state.pos = after + 1;
  }
}

}  // namespace tessera::serve
