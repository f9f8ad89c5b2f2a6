#include "services/common/http_server.h"

#include <atomic>
#include <thread>

#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

namespace ts::common {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

struct HttpServer::Impl {
  HttpServerOptions opts;
  std::map<std::string, HttpHandler> routes;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::thread thread;
  std::atomic<bool> stopped{false};

  HttpResponse Dispatch(const http::request<http::string_body>& req) {
    std::string target(req.target());
    const std::string path = target.substr(0, target.find('?'));
    if (req.method() != http::verb::get && req.method() != http::verb::head) {
      return {405, "text/plain; charset=utf-8", "only GET\n"};
    }
    if (opts.tokens && !opts.open_paths.contains(path)) {
      auto role = opts.path_roles.find(path);
      auto header = req.find(http::field::authorization);
      std::optional<std::string_view> value;
      if (header != req.end()) value.emplace(header->value().data(), header->value().size());
      absl::Status st = opts.tokens->Check(
          value, role == opts.path_roles.end() ? Role::kReader : role->second, path);
      if (st.code() == absl::StatusCode::kUnauthenticated) {
        return {401, "text/plain; charset=utf-8", std::string(st.message()) + "\n"};
      }
      if (!st.ok()) return {403, "text/plain; charset=utf-8", std::string(st.message()) + "\n"};
    }
    auto route = routes.find(path);
    if (route == routes.end()) return {404, "text/plain; charset=utf-8", "no such path\n"};
    return route->second(target);
  }

  void Accept() {
    acceptor.async_accept([this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (!stopped) Accept();
        return;
      }
      Serve(std::make_shared<beast::tcp_stream>(std::move(socket)));
      Accept();
    });
  }

  // One connection: read a request, answer, repeat while keep-alive.
  void Serve(std::shared_ptr<beast::tcp_stream> stream) {
    auto buffer = std::make_shared<beast::flat_buffer>();
    auto req = std::make_shared<http::request<http::string_body>>();
    stream->expires_after(std::chrono::seconds(30));
    http::async_read(*stream, *buffer, *req,
                     [this, stream, buffer, req](beast::error_code ec, size_t) {
                       if (ec) return;
                       HttpResponse r = Dispatch(*req);
                       auto res = std::make_shared<http::response<http::string_body>>(
                           static_cast<http::status>(r.status), req->version());
                       res->set(http::field::server, "touchstone");
                       res->set(http::field::content_type, r.content_type);
                       res->keep_alive(req->keep_alive());
                       res->body() = std::move(r.body);
                       res->prepare_payload();
                       http::async_write(*stream, *res,
                                         [this, stream, res](beast::error_code wec, size_t) {
                                           if (wec || !res->keep_alive()) {
                                             beast::error_code ignored;
                                             stream->socket().shutdown(tcp::socket::shutdown_send,
                                                                       ignored);
                                             return;
                                           }
                                           Serve(stream);
                                         });
                     });
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpServerOptions& opts, std::map<std::string, HttpHandler> routes) {
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->routes = std::move(routes);
  beast::error_code ec;
  auto addr = asio::ip::make_address(opts.host, ec);
  if (ec) return absl::InvalidArgumentError("http host: " + ec.message());
  tcp::endpoint ep(addr, static_cast<unsigned short>(opts.port));
  impl->acceptor.open(ep.protocol(), ec);
  if (!ec) impl->acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(ep, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError("http: cannot listen on " + opts.host + ":" +
                                  std::to_string(opts.port) + ": " + ec.message());
  }
  Impl* raw = impl.get();
  raw->Accept();
  raw->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::Stop() {
  if (impl_->stopped.exchange(true)) return;
  // Idle keep-alive connections are not waited for: stop the loop, then close the acceptor
  // (safe once the loop's thread has ended).
  impl_->io.stop();
  if (impl_->thread.joinable()) impl_->thread.join();
  beast::error_code ec;
  impl_->acceptor.close(ec);
}

HttpServer::~HttpServer() { Stop(); }

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path, const std::string& token) {
  HttpRequestSpec spec;
  spec.port = port;
  spec.path = path;
  spec.token = token;
  return HttpRequest(spec);
}

absl::StatusOr<HttpResponse> HttpRequest(const HttpRequestSpec& spec) {
  const std::string where =
      spec.method + " " + spec.host + ":" + std::to_string(spec.port) + spec.path;
  if (spec.method != "GET" && spec.method != "POST") {
    return absl::InvalidArgumentError("method: GET or POST, not " + spec.method);
  }
  asio::io_context io;
  beast::tcp_stream stream(io);
  http::request<http::string_body> req{
      spec.method == "GET" ? http::verb::get : http::verb::post, spec.path, 11};
  req.set(http::field::host, spec.host);
  if (!spec.token.empty()) req.set(http::field::authorization, "Bearer " + spec.token);
  if (!spec.body.empty()) {
    req.set(http::field::content_type, spec.content_type);
    req.body() = spec.body;
    req.prepare_payload();
  }
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  beast::error_code result = asio::error::would_block;
  tcp::resolver resolver(io);
  // Async with one deadline over resolve, connect, write and read: sync Beast calls ignore
  // expiry.
  stream.expires_after(std::chrono::milliseconds(static_cast<int64_t>(spec.timeout_s * 1000)));
  resolver.async_resolve(
      spec.host, std::to_string(spec.port),
      [&](beast::error_code rec, tcp::resolver::results_type found) {
        if (rec) {
          result = rec;
          return;
        }
        stream.async_connect(found, [&](beast::error_code ec, const tcp::endpoint&) {
          if (ec) {
            result = ec;
            return;
          }
          http::async_write(stream, req, [&](beast::error_code wec, size_t) {
            if (wec) {
              result = wec;
              return;
            }
            http::async_read(stream, buffer, res,
                             [&](beast::error_code ec2, size_t) { result = ec2; });
          });
        });
      });
  io.run();
  if (result) return absl::UnavailableError(where + ": " + result.message());
  beast::error_code ec;
  stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  HttpResponse out;
  out.status = static_cast<int>(res.result_int());
  out.content_type = std::string(res[http::field::content_type]);
  out.body = res.body();
  return out;
}

}  // namespace ts::common
