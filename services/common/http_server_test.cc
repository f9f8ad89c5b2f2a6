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

HttpHandler Says(const std::string& body) {
  return [body](const std::string&) { return HttpResponse{200, "text/plain", body}; };
}

// /healthz and /metrics are open; other pages need a reader (or admin) token, or the role the
// path names.
TEST(HttpServerTest, PagesNeedTheirRoleWhileHealthAndMetricsStayOpen) {
  auto tokens = std::make_shared<TokenSet>();
  ASSERT_TRUE(tokens->Add(Role::kWorker, "worker-token").ok());
  ASSERT_TRUE(tokens->Add(Role::kReader, "reader-token").ok());
  ASSERT_TRUE(tokens->Add(Role::kAdmin, "admin-token").ok());
  HttpServerOptions o;
  o.tokens = tokens;
  o.path_roles = {{"/admin", Role::kAdmin}};
  auto s = HttpServer::Start(o, {{"/healthz", Says("ok")},
                                 {"/metrics", Says("m 1")},
                                 {"/sweeps", Says("table")},
                                 {"/admin", Says("knobs")}});
  ASSERT_TRUE(s.ok()) << s.status();
  const int port = (*s)->port();
  EXPECT_EQ(HttpGet(port, "/healthz")->status, 200);
  EXPECT_EQ(HttpGet(port, "/metrics")->body, "m 1");
  auto none = HttpGet(port, "/sweeps");
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(none->body, "/sweeps: no bearer token (authorization: Bearer TOKEN)\n");
  EXPECT_EQ(HttpGet(port, "/sweeps", "wrong")->status, 401);
  auto worker = HttpGet(port, "/sweeps", "worker-token");
  EXPECT_EQ(worker->status, 403);
  EXPECT_EQ(worker->body, "/sweeps: the worker role may not call it (it needs reader or admin)\n");
  EXPECT_EQ(HttpGet(port, "/sweeps", "reader-token")->body, "table");
  EXPECT_EQ(HttpGet(port, "/sweeps", "admin-token")->body, "table");
  EXPECT_EQ(HttpGet(port, "/admin", "reader-token")->status, 403);
  EXPECT_EQ(HttpGet(port, "/admin", "admin-token")->body, "knobs");
}

TEST(HttpServerTest, AnOpenTokenSetLetsEveryoneIn) {
  HttpServerOptions o;
  o.tokens = std::make_shared<TokenSet>();
  auto s = HttpServer::Start(o, {{"/sweeps", Says("table")}});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(HttpGet((*s)->port(), "/sweeps")->body, "table");
}

TEST(HttpServerTest, StopClosesThePort) {
  auto s = HttpServer::Start({}, {});
  ASSERT_TRUE(s.ok());
  const int port = (*s)->port();
  (*s)->Stop();
  EXPECT_FALSE(HttpGet(port, "/healthz").ok());
}

TEST(HttpRequestTest, ResolvesAHostNameSendsTheMethodAndRefusesOthers) {
  auto s = HttpServer::Start({}, {{"/api", [](const std::string& target) {
                                     return HttpResponse{200, "text/plain", "got " + target};
                                   }}});
  ASSERT_TRUE(s.ok()) << s.status();
  HttpRequestSpec spec;
  spec.host = "localhost";  // resolved, not parsed
  spec.port = (*s)->port();
  spec.method = "POST";
  spec.path = "/api";
  spec.body = "[]";
  auto r = HttpRequest(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "only GET\n");  // our server takes GET only: it saw a POST
  spec.method = "GET";
  r = HttpRequest(spec);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "got /api");
  spec.method = "PUT";
  EXPECT_EQ(HttpRequest(spec).status().code(), absl::StatusCode::kInvalidArgument);
  const int port = (*s)->port();
  (*s)->Stop();
  spec.method = "POST";
  spec.port = port;
  spec.timeout_s = 2;
  EXPECT_EQ(HttpRequest(spec).status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ts::common
