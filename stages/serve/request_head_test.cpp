#include "stages/serve/request_head.h"

#include <gtest/gtest.h>

#include <string>

namespace tessera::serve {
namespace {

HeadLimits small_limits() {
  HeadLimits l;
  l.max_head_bytes = 1024;
  l.max_headers = 8;
  l.max_ranges = 4;
  l.max_body_bytes = 100;
  l.max_request_line = 256;
  return l;
}

TEST(RequestHead, FindsTheEndOfTheHeadAndTheBodyFraming) {
  const HeadLimits l = small_limits();
  EXPECT_EQ(scan_head("GET / HTTP/1.1\r\nHost: x\r\n", l).state, HeadScan::kIncomplete);
  HeadScan s = scan_head("GET / HTTP/1.1\r\nHost: x\r\n\r\nGET /next", l);
  ASSERT_EQ(s.state, HeadScan::kComplete);
  EXPECT_EQ(s.head.head_bytes, 27u);
  EXPECT_EQ(s.head.framing, Framing::kNone);
  s = scan_head("POST /a HTTP/1.1\ncontent-length:  12 \n\n", l);
  ASSERT_EQ(s.state, HeadScan::kComplete);
  EXPECT_EQ(s.head.framing, Framing::kLength);
  EXPECT_EQ(s.head.content_length, 12u);
  s = scan_head("POST /a HTTP/1.1\r\nTransfer-Encoding: Chunked\r\nExpect: 100-continue\r\n\r\n", l);
  ASSERT_EQ(s.state, HeadScan::kComplete);
  EXPECT_EQ(s.head.framing, Framing::kChunked);
  EXPECT_TRUE(s.head.expect_continue);
  EXPECT_EQ(s.head.expect_begin, 46u);
  EXPECT_EQ(s.head.expect_end, 68u);
}

// Issue 30, item 10: heads, ranges and bodies are bounded before anything is allocated for them.
TEST(RequestHead, RefusesWhatIsOverALimit) {
  const HeadLimits l = small_limits();
  auto status = [&](const std::string& head) {
    const HeadScan s = scan_head(head, l);
    return s.state == HeadScan::kRefused ? s.status : 0;
  };
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 9; ++i) many += "X-" + std::to_string(i) + ": 1\r\n";
  EXPECT_EQ(status(many), 431);  // before the head is complete
  EXPECT_EQ(status("GET / HTTP/1.1\r\nX: " + std::string(2000, 'a')), 431);
  EXPECT_EQ(status("GET /" + std::string(300, 'a')), 414);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nRange: bytes=0-,0-,0-,0-,0-\r\n\r\n"), 416);
  EXPECT_EQ(status("GET / HTTP/1.1\r\nRange: bytes=0-1,2-3\r\n\r\n"), 0);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 101\r\n\r\n"), 413);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\n"), 400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n"),
            400);
  EXPECT_EQ(status("POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), 501);
}

TEST(RequestHead, ScansAChunkedBodyAsItArrives) {
  const HeadLimits l = small_limits();
  const std::string body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer: x\r\n\r\nNEXT";
  ChunkedScan s;
  for (size_t n = 0; n + 4 < body.size(); ++n) {
    ChunkedScan partial = s;
    EXPECT_EQ(scan_chunked(std::string_view(body).substr(0, n), partial, l), 0) << n;
  }
  ASSERT_EQ(scan_chunked(body, s, l), 1);
  EXPECT_EQ(s.pos, body.size() - 4);
  EXPECT_EQ(s.data, 11u);
}

TEST(RequestHead, RefusesAChunkedBodyOverTheLimitBeforeItsData) {
  const HeadLimits l = small_limits();
  ChunkedScan s;
  EXPECT_EQ(scan_chunked("12c\r\n", s, l), 413);  // 300 bytes declared, none sent yet
  ChunkedScan t;
  std::string body;
  for (int i = 0; i < 30; ++i) body += "8\r\n12345678\r\n";
  EXPECT_EQ(scan_chunked(body, t, l), 413);
  ChunkedScan u;
  EXPECT_EQ(scan_chunked("zz\r\n", u, l), 400);
  ChunkedScan v;
  EXPECT_EQ(scan_chunked("3\r\nabcX", v, l), 400);
}

}  // namespace
}  // namespace tessera::serve
