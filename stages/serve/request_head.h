// The framing of an HTTP/1.1 request as serve's edge (http_edge.h) checks it before anything else
// sees the request: where its head ends, how long its body is, and whether it is within the limits
// on head size, header count, ranges and body size. Pure functions of the bytes received so far,
// so every limit is tested without sockets.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessera::serve {

struct HeadLimits {
  size_t max_head_bytes = 32u << 10;  // request line, headers and the blank line
  int max_headers = 100;
  int max_ranges = 4;                  // ranges in one Range header
  size_t max_body_bytes = 8u << 20;    // a body of either framing
  size_t max_request_line = 8192;      // cpp-httplib's own limit (414 beyond)
};

enum class Framing { kNone, kLength, kChunked };

// What is known of a request once its head has arrived.
struct RequestHead {
  size_t head_bytes = 0;      // through the blank line that ends the head
  Framing framing = Framing::kNone;
  uint64_t content_length = 0;  // with kLength
  bool expect_continue = false;
  size_t expect_begin = 0, expect_end = 0;  // the Expect line's bytes (to drop once answered)
};

struct HeadScan {
  enum State { kIncomplete, kComplete, kRefused } state = kIncomplete;
  RequestHead head;    // with kComplete
  int status = 0;      // with kRefused: 400, 413, 414, 416, 431 or 501
  std::string reason;  // with kRefused: a message for the error body
};

// Scans the start of `bytes` (a connection's unconsumed input) for one request head. kIncomplete
// while no blank line has arrived and no limit is exceeded yet; kRefused for a head over
// max_head_bytes or max_headers (431), a request line over max_request_line (414), a Range header
// with more than max_ranges ranges (416), a Content-Length over max_body_bytes (413), a malformed,
// repeated or conflicting Content-Length / Transfer-Encoding (400), a Transfer-Encoding other than
// chunked (501). Lines may end in CRLF or LF.
HeadScan scan_head(std::string_view bytes, const HeadLimits& limits);

// The state of a chunked body scanned as it arrives.
struct ChunkedScan {
  size_t pos = 0;         // bytes of the body scanned (relative to its start)
  uint64_t data = 0;      // chunk data seen
  bool trailers = false;  // the last chunk has been seen
};

// Continues scanning the chunked body `body` (every byte after the head received so far). Returns
// 1 when the body is complete (`state.pos` is then its length), 0 when more is needed, or a
// status: 413 when the chunk data exceed `limits.max_body_bytes`, 431 for trailers over
// limits.max_head_bytes, 400 for a malformed chunk.
int scan_chunked(std::string_view body, ChunkedScan& state, const HeadLimits& limits);

}  // namespace tessera::serve
