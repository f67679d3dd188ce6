#include "gateway/http1.h"

#include <gtest/gtest.h>

namespace gpugeek::gateway {
namespace {

TEST(Http1Framer, RequestHeadThenChunkedBodyByteExact) {
  RequestFramer f(FramingLimits{.max_head_bytes = 1024, .max_body_bytes = 1000});
  const std::string head = "POST /v1/predict?x=1 HTTP/1.1\r\nHost: gpt\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = "5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nTrailer-X: 1\r\n\r\n";
  const std::string next = "GET / HTTP/1.1\r\n\r\n";
  const std::string all = head + body + next;
  auto n = f.ParseHead(all);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*n, head.size());
  EXPECT_EQ(f.head().method, "POST");
  EXPECT_EQ(f.head().target, "/v1/predict?x=1");
  EXPECT_TRUE(f.head().chunked);
  EXPECT_TRUE(f.head().keep_alive);
  ASSERT_NE(f.head().Find("HOST"), nullptr);
  EXPECT_EQ(*f.head().Find("host"), "gpt");
  auto m = f.ParseBody(std::string_view(all).substr(*n));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(*m, body.size());  // the body's wire bytes, trailer included, and not the next request
  EXPECT_TRUE(f.done());
  EXPECT_EQ(f.body_bytes(), 8u);  // "hello" + "abc"
}

TEST(Http1Framer, HeadArrivingInPiecesNeedsMore) {
  RequestFramer f;
  auto first = f.ParseHead("GET / HTTP/1.1\r\nHo");
  ASSERT_TRUE(first.ok());
  EXPECT_FALSE(f.head_done());
  const std::string rest = std::string("GET / HTTP/1.1\r\nHost: a\r\n\r\n").substr(*first);
  auto n = f.ParseHead(rest);
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(*first + *n, 27u);
  EXPECT_TRUE(f.head_done());
  EXPECT_TRUE(f.done());  // no body
}

TEST(Http1Framer, LimitsAndMalformedAreNamed) {
  RequestFramer small(FramingLimits{.max_head_bytes = 64, .max_body_bytes = 10});
  const std::string big = "GET / HTTP/1.1\r\nX: " + std::string(100, 'a') + "\r\n\r\n";
  auto n = small.ParseHead(big);
  ASSERT_FALSE(n.ok());
  EXPECT_TRUE(absl::IsResourceExhausted(n.status())) << n.status();

  RequestFramer body_limit(FramingLimits{.max_head_bytes = 1024, .max_body_bytes = 10});
  auto h = body_limit.ParseHead("POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n");
  EXPECT_FALSE(h.ok());  // Beast refuses a declared length above the limit at once
  EXPECT_TRUE(absl::IsOutOfRange(h.status())) << h.status();

  RequestFramer bad;
  auto b = bad.ParseHead("GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n");
  ASSERT_FALSE(b.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(b.status()));
  RequestFramer smuggle;
  auto s = smuggle.ParseHead("POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n");
  EXPECT_FALSE(s.ok()) << "two lengths are refused (request smuggling)";
}

TEST(Http1Framer, ResponsesToHeadAndUntilEof) {
  ResponseFramer f;
  f.Reset(/*head_request=*/true);
  auto n = f.ParseHead("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(f.done()) << "a response to HEAD has no body";

  f.Reset();
  n = f.ParseHead("HTTP/1.1 200 OK\r\n\r\nabc");
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 19u);
  EXPECT_TRUE(f.head().body_until_eof);
  EXPECT_EQ(*f.ParseBody("abc"), 3u);
  EXPECT_FALSE(f.done());
  EXPECT_TRUE(f.Eof().ok());
  EXPECT_TRUE(f.done());

  f.Reset();
  n = f.ParseHead("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n");
  ASSERT_TRUE(n.ok());
  EXPECT_TRUE(f.head().upgrade);

  f.Reset();
  auto h10 = f.ParseHead("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n");
  ASSERT_TRUE(h10.ok()) << h10.status();
  EXPECT_EQ(*f.ParseBody("12345"), 5u);
  EXPECT_FALSE(f.Eof().ok()) << "a body cut short is an error";
}

TEST(Http1Framer, ChunkedResponsePayloadDecodedInPiecesForHttp10Peers) {
  ResponseFramer f;
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string body = "5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nTrailer-X: 1\r\n\r\n";
  auto n = f.ParseHead(head);
  ASSERT_TRUE(n.ok()) << n.status();
  ASSERT_TRUE(f.head().chunked);
  std::string payload;
  size_t used = 0;
  // Cut inside a chunk size, inside a chunk's data and inside the trailer.
  for (size_t cut : {size_t{1}, size_t{6}, size_t{22}, body.size()}) {
    auto m = f.ParseBody(std::string_view(body).substr(used, cut - used), &payload);
    ASSERT_TRUE(m.ok()) << m.status();
    used += *m;
  }
  EXPECT_EQ(used, body.size());
  EXPECT_TRUE(f.done());
  EXPECT_EQ(payload, "hello world");
  EXPECT_EQ(f.body_bytes(), 11u);
}

TEST(Http1Framer, HopByHopAndIdempotent) {
  EXPECT_TRUE(IsHopByHop("Connection"));
  EXPECT_TRUE(IsHopByHop("keep-alive"));
  EXPECT_FALSE(IsHopByHop("Transfer-Encoding"));
  EXPECT_FALSE(IsHopByHop("Host"));
  EXPECT_TRUE(IsIdempotent("GET"));
  EXPECT_TRUE(IsIdempotent("PUT"));
  EXPECT_FALSE(IsIdempotent("POST"));
  EXPECT_FALSE(IsIdempotent("PATCH"));
}

}  // namespace
}  // namespace gpugeek::gateway
