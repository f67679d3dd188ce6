#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <thread>

#include "http/client.h"
#include "http/server.h"
#include "http/status_http.h"

namespace gpugeek::http {
namespace {

TEST(StatusHttp, MapsEveryCodeOnceAndBack) {
  EXPECT_EQ(HttpStatusFor(absl::OkStatus()), 200);
  EXPECT_EQ(HttpStatusFor(absl::InvalidArgumentError("x")), 400);
  EXPECT_EQ(HttpStatusFor(absl::NotFoundError("x")), 404);
  EXPECT_EQ(HttpStatusFor(absl::AlreadyExistsError("x")), 409);
  EXPECT_EQ(HttpStatusFor(absl::FailedPreconditionError("x")), 409);
  EXPECT_EQ(HttpStatusFor(absl::ResourceExhaustedError("x")), 429);
  EXPECT_EQ(HttpStatusFor(absl::UnavailableError("x")), 503);
  EXPECT_EQ(HttpStatusFor(absl::InternalError("x")), 500);
  const absl::Status s = absl::FailedPreconditionError("job j-1 is SUCCEEDED; it cannot be cancelled");
  EXPECT_EQ(StatusFromHttp(409, ErrorBody(s).dump()), s);
  EXPECT_EQ(StatusFromHttp(404, "<html>").code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(StatusFromHttp(204, "").ok());
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.observer = [this](const std::string&, const std::string& route, int status, Duration) {
      if (route == "/v1/items/{id}" && status == 404) ++not_found_;
    };
    auto s = Server::Create(options);
    ASSERT_TRUE(s.ok());
    server_ = std::move(*s);
    server_->Route("GET", "/v1/items/{id}", [](const Request& r) -> absl::StatusOr<Reply> {
      if (r.param("id") == "missing") return absl::NotFoundError("no item 'missing'");
      return Reply::Json({{"id", r.param("id")}, {"verbose", r.query_value("verbose", "no")}});
    });
    server_->Route("POST", "/v1/items", [](const Request& r) -> absl::StatusOr<Reply> {
      auto body = r.JsonBody();
      if (!body.ok()) return body.status();
      return Reply::Json({{"echo", *body}}, 201);
    });
    server_->Route("GET", "/v1/count/{n}", [](const Request& r) -> absl::StatusOr<Reply> {
      Reply reply;
      reply.content_type = "text/plain";
      const int n = std::stoi(r.param("n"));
      reply.stream = [n](const ChunkWriter& write) {
        for (int i = 0; i < n; ++i) {
          if (!write(std::to_string(i) + "\n")) return;
        }
      };
      return reply;
    });
    ASSERT_TRUE(server_->Start().ok());
    auto c = Client::Create({.base_url = server_->url()});
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }

  std::unique_ptr<Server> server_;
  std::unique_ptr<Client> client_;
  std::atomic<int> not_found_{0};
};

TEST_F(ServerTest, RoutesPathParamsAndQuery) {
  ASSERT_GT(server_->port(), 0);
  auto r = client_->Get("/v1/items/j-7?verbose=yes");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ((*r)["id"], "j-7");
  EXPECT_EQ((*r)["verbose"], "yes");
}

TEST_F(ServerTest, ErrorsTravelAsStatus) {
  auto r = client_->Get("/v1/items/missing");
  EXPECT_EQ(r.status(), absl::NotFoundError("no item 'missing'"));
  EXPECT_EQ(not_found_.load(), 1);
  auto bad = client_->Post("/v1/items", "not json");  // a JSON string is fine...
  ASSERT_TRUE(bad.ok());
  auto unrouted = client_->Get("/v2/nothing");
  EXPECT_EQ(unrouted.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ServerTest, MalformedJsonBodyIs400NamingThePosition) {
  httplib::Client raw(server_->url());
  auto res = raw.Post("/v1/items", "{\"a\": ", "application/json");
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 400);
  auto status = StatusFromHttp(res->status, res->body);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("not valid JSON at byte"), std::string::npos) << status;
}

TEST_F(ServerTest, GetTextReturnsTheBodyAsIsAndErrorsAsStatus) {
  auto text = client_->GetText("/v1/count/3");
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "0\n1\n2\n");
  EXPECT_EQ(client_->GetText("/v1/items/missing").status(), absl::NotFoundError("no item 'missing'"));
}

TEST_F(ServerTest, StreamsChunks) {
  std::string all;
  ASSERT_TRUE(client_
                  ->GetStream("/v1/count/5",
                              [&](const std::string& c) {
                                all += c;
                                return true;
                              })
                  .ok());
  EXPECT_EQ(all, "0\n1\n2\n3\n4\n");
}

TEST_F(ServerTest, ConcurrentClients) {
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      auto c = Client::Create({.base_url = server_->url()});
      for (int i = 0; i < 25; ++i) {
        auto r = (*c)->Get("/v1/items/" + std::to_string(t * 100 + i));
        if (r.ok() && (*r)["id"] == std::to_string(t * 100 + i)) ++ok;
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 200);
}

TEST(ServerPortTest, APortInUseIsRefusedNotShared) {
  auto first = Server::Create({});
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Start().ok());
  auto second = Server::Create({.port = (*first)->port()});
  ASSERT_TRUE(second.ok());
  const absl::Status s = (*second)->Start();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("the port is in use"), absl::string_view::npos) << s;
}

TEST(UrlEncodeTest, KeepsUnreservedAndEncodesTheRest) {
  EXPECT_EQ(UrlEncode("j-00000001_a.b~"), "j-00000001_a.b~");
  EXPECT_EQ(UrlEncode("up{job=\"x\"} == 1"), "up%7Bjob%3D%22x%22%7D%20%3D%3D%201");
}

TEST(Client, UnreachableServerIsUnavailable) {
  auto s = Server::Create({});
  ASSERT_TRUE((*s)->Start().ok());
  const std::string url = (*s)->url();
  (*s)->Stop();
  auto c = Client::Create({.base_url = url, .connect_timeout = std::chrono::milliseconds(200)});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ((*c)->Get("/v1/jobs").status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(Client::Create({.base_url = "localhost"}).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpugeek::http
