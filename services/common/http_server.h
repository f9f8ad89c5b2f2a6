// A small HTTP/1.1 server for the services' /metrics and /healthz (and later the dashboard):
// Boost.Beast on one io_context thread, exact-path routes, bearer tokens by role (auth.h).
//
// Ownership: the server owns its thread; Stop() (or the destructor) closes the acceptor,
// finishes the requests in flight and joins.
// Thread-safety: handlers run on the server's thread, one at a time; they must not block for
// long (they read in-memory state).
// Errors: Start returns UNAVAILABLE when the address cannot be bound.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "services/common/auth.h"

namespace ts::common {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};
using HttpHandler = std::function<HttpResponse(const std::string& target)>;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 0;  // 0: an ephemeral port, see HttpServer::port()
  // Who may GET what. Null or an open TokenSet: every path is open. Otherwise a path in
  // open_paths needs no token, and any other needs "Authorization: Bearer <token>" whose role may
  // act as the path's role in path_roles (reader when not listed): 401 without a known token,
  // 403 when its role may not. /metrics carries counts and latencies only (no model ids, errors
  // or records), so scrapers need no token.
  std::shared_ptr<const TokenSet> tokens;
  std::set<std::string> open_paths = {"/healthz", "/metrics"};
  std::map<std::string, Role> path_roles;
};

class HttpServer {
 public:
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const HttpServerOptions& opts, std::map<std::string, HttpHandler> routes);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  void Stop();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// GET http://127.0.0.1:port/path with an optional bearer token; returns "status body". For
// tests and the sweep command's health checks. Errors: UNAVAILABLE when it cannot connect.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path,
                                     const std::string& token = "");

// One HTTP/1.1 request to http://host:port/path (host resolved; one deadline of `timeout_s`
// over resolve, connect, write and read): `method` "GET" or "POST", `body` sent with
// `content_type` when not empty. Errors: INVALID_ARGUMENT for another method, UNAVAILABLE when it
// cannot resolve, connect, or finish in time; any HTTP status is an answer.
struct HttpRequestSpec {
  std::string host = "127.0.0.1";
  int port = 80;
  std::string method = "GET";
  std::string path = "/";
  std::string body;
  std::string content_type = "application/json";
  std::string token;
  double timeout_s = 10;
};
absl::StatusOr<HttpResponse> HttpRequest(const HttpRequestSpec& spec);

}  // namespace ts::common
