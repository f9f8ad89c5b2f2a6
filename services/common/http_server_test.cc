#include "services/common/http_server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

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
  EXPECT_EQ(r->body, "only GET\n");  // a plain route takes GET only: it saw a POST
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

namespace ts::common {
namespace {

std::shared_ptr<TokenSet> ReaderTokens() {
  auto tokens = std::make_shared<TokenSet>();
  EXPECT_TRUE(tokens->Add(Role::kReader, "reader-token").ok());
  EXPECT_TRUE(tokens->Add(Role::kWorker, "worker-token").ok());
  return tokens;
}

// The dashboard's login: the token in a cookie counts as a bearer token; a browser without one
// is redirected to the login page, a script gets 401.
TEST(HttpServerTest, TokenCookieAndLoginRedirect) {
  HttpServerOptions o;
  o.tokens = ReaderTokens();
  o.token_cookie = "ts_token";
  o.login_path = "/login";
  auto s = HttpServer::Start(
      o, {{"/page", Says("page")}, {"/api/v1/x", Says("{}")}},
      {{"/echo", [](const HttpRequestInfo& r) {
          return HttpResponse{200, "text/plain", r.method + " " + r.query + " " + r.body + " " +
                                                     r.token};
        }}});
  ASSERT_TRUE(s.ok()) << s.status();
  HttpRequestSpec spec;
  spec.port = (*s)->port();
  spec.path = "/page";
  spec.headers = {{"Accept", "text/html,*/*"}};
  auto r = HttpRequest(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 303);
  bool located = false;
  for (const auto& [k, v] : r->headers) located = located || (k == "location" && v == "/login");
  EXPECT_TRUE(located);
  spec.path = "/api/v1/x";  // an API path is never redirected
  EXPECT_EQ(HttpRequest(spec)->status, 401);
  spec.path = "/page";
  spec.headers = {{"Cookie", "other=1; ts_token=reader-token"}};
  r = HttpRequest(spec);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "page");
  spec.headers = {{"Cookie", "ts_token=worker-token"}};
  EXPECT_EQ(HttpRequest(spec)->status, 403);
  spec.headers = {{"Cookie", "ts_token=nope"}};
  EXPECT_EQ(HttpRequest(spec)->status, 401);  // no text/html in Accept: not redirected
  // A request route sees the method, query, body and the token it was admitted with.
  spec.headers = {{"Cookie", "ts_token=reader-token"}};
  spec.method = "POST";
  spec.path = "/echo?a=1";
  spec.body = "b=2";
  r = HttpRequest(spec);
  EXPECT_EQ(r->body, "POST a=1 b=2 reader-token");
  // A plain route still takes GET only.
  spec.path = "/page";
  EXPECT_EQ(HttpRequest(spec)->status, 405);
}

TEST(HttpServerTest, RefusesBadThreadCountsAndDoubleRoutes) {
  HttpServerOptions o;
  o.threads = 0;
  EXPECT_EQ(HttpServer::Start(o, {}).status().code(), absl::StatusCode::kInvalidArgument);
  o.threads = 2;
  auto s = HttpServer::Start(o, {{"/a", Says("a")}},
                             {{"/a", [](const HttpRequestInfo&) { return HttpResponse{}; }}});
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "http routes: /a is routed twice");
}

// With several threads, a slow handler does not hold /healthz up.
TEST(HttpServerTest, HealthAnswersWhileASlowHandlerRuns) {
  HttpServerOptions o;
  o.threads = 4;
  std::atomic<bool> release{false};
  auto s = HttpServer::Start(o, {{"/healthz", Says("ok")}, {"/slow", [&](const std::string&) {
                                    while (!release) {
                                      std::this_thread::sleep_for(std::chrono::milliseconds(10));
                                    }
                                    return HttpResponse{200, "text/plain", "slow"};
                                  }}});
  ASSERT_TRUE(s.ok()) << s.status();
  const int port = (*s)->port();
  std::thread slow([&] { EXPECT_EQ(HttpGet(port, "/slow")->body, "slow"); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  HttpRequestSpec spec;
  spec.port = port;
  spec.path = "/healthz";
  spec.timeout_s = 2;
  auto r = HttpRequest(spec);
  EXPECT_FALSE(release.load());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->body, "ok");
  release = true;
  slow.join();
}

}  // namespace
}  // namespace ts::common
