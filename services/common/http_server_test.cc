#include "services/common/http_server.h"

#include <gtest/gtest.h>

namespace ts::common {
namespace {

TEST(HttpServerTest, ServesRoutesOnAnEphemeralLoopbackPort) {
  auto s = HttpServer::Start({}, {{"/healthz", [](const std::string&) {
                                     return HttpResponse{200, "text/plain", "ok\n"};
                                   }}});
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_GT((*s)->port(), 0);
  auto r = HttpGet((*s)->port(), "/healthz");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "ok\n");
  auto missing = HttpGet((*s)->port(), "/nope");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->status, 404);
}

TEST(HttpServerTest, TokenGuardsEverythingButHealthz) {
  HttpServerOptions o;
  o.token = "s3cret";
  auto s = HttpServer::Start(
      o, {{"/healthz", [](const std::string&) { return HttpResponse{200, "text/plain", "ok"}; }},
          {"/metrics", [](const std::string&) { return HttpResponse{200, "text/plain", "m 1"}; }}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(HttpGet((*s)->port(), "/healthz")->status, 200);
  EXPECT_EQ(HttpGet((*s)->port(), "/metrics")->status, 401);
  EXPECT_EQ(HttpGet((*s)->port(), "/metrics", "wrong")->status, 401);
  auto ok = HttpGet((*s)->port(), "/metrics", "s3cret");
  EXPECT_EQ(ok->status, 200);
  EXPECT_EQ(ok->body, "m 1");
}

TEST(HttpServerTest, StopClosesThePort) {
  auto s = HttpServer::Start({}, {});
  ASSERT_TRUE(s.ok());
  const int port = (*s)->port();
  (*s)->Stop();
  EXPECT_FALSE(HttpGet(port, "/healthz").ok());
}

}  // namespace
}  // namespace ts::common
