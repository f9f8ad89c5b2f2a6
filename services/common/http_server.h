// A small HTTP/1.1 server for the services' /metrics and /healthz (and later the dashboard):
// Boost.Beast on one io_context thread, exact-path routes, bearer-token check.
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
#include <string>

#include "absl/status/statusor.h"

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
  // Non-empty: every path except /healthz needs "Authorization: Bearer <token>" (401 otherwise).
  std::string token;
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

}  // namespace ts::common
