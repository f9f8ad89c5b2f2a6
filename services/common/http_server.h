// A small HTTP/1.1 server for the services' /metrics and /healthz and the scheduler's web
// dashboard: Boost.Beast on `threads` io_context threads, exact-path routes, bearer tokens by
// role (auth.h), taken from the Authorization header or from a cookie (the dashboard's login).
//
// Ownership: the server owns its threads; Stop() (or the destructor) closes the acceptor and
// joins.
// Thread-safety: handlers run on the server's threads: with threads = 1 one at a time; with
// more, concurrently (a handler that reads the database blocks one thread while the others keep
// answering /healthz). The requests of one connection are handled in order.
// Errors: Start returns UNAVAILABLE when the address cannot be bound.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "services/common/auth.h"

namespace ts::common {

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
  // More header fields: Location, Set-Cookie, Cache-Control (server side); every field but
  // Content-Type as received (client side, names lower-cased).
  std::vector<std::pair<std::string, std::string>> headers = {};
};
// A GET route: gets the request target (path and query).
using HttpHandler = std::function<HttpResponse(const std::string& target)>;

// What a request route sees of a request that passed the token check.
struct HttpRequestInfo {
  std::string method;        // "GET", "HEAD", "POST", ...
  std::string target;        // path and query, as sent
  std::string path;          // the target less its query
  std::string query;         // after '?', "" when none
  std::string body;
  std::string content_type;
  std::string token;         // the bearer token presented (header, else cookie); "" none
  // The browser reached us over TLS: this server's own (HttpServerOptions.tls_*), or a proxy in
  // front that terminated it and said so (X-Forwarded-Proto: https).
  bool tls = false;
};
// A route that takes any method and sees the request (the dashboard's pages and API).
using HttpRequestHandler = std::function<HttpResponse(const HttpRequestInfo& req)>;

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
  // When not empty: a request without an Authorization header presents this cookie's value as
  // its bearer token (the dashboard's login sets it HttpOnly, SameSite=Strict).
  std::string token_cookie;
  // When not empty: a GET refused for want of a known token, from a browser (its Accept names
  // text/html) and not under /api/, is redirected (303) here instead of answered 401.
  std::string login_path;
  int threads = 1;  // io threads running handlers (1..64)
  // Both set: every connection is HTTPS with this PEM certificate chain and key (TLS 1.2 or
  // newer). Start answers INVALID_ARGUMENT naming the file when one is missing or unreadable.
  std::string tls_cert_file;
  std::string tls_key_file;
};

class HttpServer {
 public:
  // `routes` answer GET and HEAD (another method: 405); `request_routes` any method. A path in
  // both is INVALID_ARGUMENT.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(
      const HttpServerOptions& opts, std::map<std::string, HttpHandler> routes,
      std::map<std::string, HttpRequestHandler> request_routes = {});
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
// (HTTPS: HttpRequest with tls_ca_file.)
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path,
                                     const std::string& token = "");

// One HTTP/1.1 request to http(s)://host:port/path (host resolved; one deadline of `timeout_s`
// over resolve, connect, write and read): `method` "GET" or "POST", `body` sent with
// `content_type` when not empty, `headers` added. Errors: INVALID_ARGUMENT for a method other
// than GET, POST, DELETE; UNAVAILABLE when it cannot resolve, connect, or finish in time; any
// HTTP status is an answer.
struct HttpRequestSpec {
  std::string host = "127.0.0.1";
  int port = 80;
  std::string method = "GET";
  std::string path = "/";
  std::string body;
  std::string content_type = "application/json";
  std::string token;
  double timeout_s = 10;
  std::vector<std::pair<std::string, std::string>> headers = {};  // e.g. {"Cookie", "a=b"}
  // Set: HTTPS, trusting the CA certificates in this PEM file and checking the server's
  // certificate against `host` (UNAVAILABLE when it does not verify).
  std::string tls_ca_file;
};
absl::StatusOr<HttpResponse> HttpRequest(const HttpRequestSpec& spec);

}  // namespace ts::common
