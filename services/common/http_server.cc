#include "services/common/http_server.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <thread>
#include <vector>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

namespace ts::common {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
namespace ssl = asio::ssl;
using tcp = asio::ip::tcp;
using TlsStream = beast::ssl_stream<beast::tcp_stream>;

namespace {

// The end of a connection: a plain one stops sending; a TLS one says close_notify first.
void Close(const std::shared_ptr<beast::tcp_stream>& s) {
  beast::error_code ignored;
  s->socket().shutdown(tcp::socket::shutdown_send, ignored);
}
void Close(const std::shared_ptr<TlsStream>& s) {
  beast::get_lowest_layer(*s).expires_after(std::chrono::seconds(5));
  s->async_shutdown([s](beast::error_code) {});
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions opts;
  std::map<std::string, HttpHandler> routes;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::atomic<bool> stopped{false};
  std::unique_ptr<ssl::context> tls;  // set: HTTPS

  std::map<std::string, HttpRequestHandler> request_routes;
  std::vector<std::thread> threads;

  // The value of cookie `name` in a Cookie header ("a=1; b=2"); "" when absent.
  static std::string CookieValue(std::string_view header, std::string_view name) {
    while (!header.empty()) {
      const size_t semi = header.find(';');
      std::string_view pair = header.substr(0, semi);
      header = semi == std::string_view::npos ? "" : header.substr(semi + 1);
      while (!pair.empty() && pair.front() == ' ') pair.remove_prefix(1);
      const size_t eq = pair.find('=');
      if (eq != std::string_view::npos && pair.substr(0, eq) == name) {
        return std::string(pair.substr(eq + 1));
      }
    }
    return "";
  }

  HttpResponse Dispatch(const http::request<http::string_body>& req, bool over_tls) {
    HttpRequestInfo info;
    info.tls = over_tls || beast::iequals(req["X-Forwarded-Proto"], "https");
    info.method = std::string(req.method_string());
    info.target = std::string(req.target());
    const size_t q = info.target.find('?');
    info.path = info.target.substr(0, q);
    if (q != std::string::npos) info.query = info.target.substr(q + 1);
    info.body = req.body();
    info.content_type = std::string(req[http::field::content_type]);
    auto request_route = request_routes.find(info.path);
    const bool get = req.method() == http::verb::get || req.method() == http::verb::head;
    if (!get && request_route == request_routes.end()) {
      return {405, "text/plain; charset=utf-8", "only GET\n"};
    }
    // The token: the Authorization header, else the login cookie.
    std::optional<std::string> authorization;
    auto header = req.find(http::field::authorization);
    if (header != req.end()) {
      authorization = std::string(header->value());
    } else if (!opts.token_cookie.empty()) {
      const auto raw = req[http::field::cookie];
      std::string cookie =
          CookieValue(std::string_view(raw.data(), raw.size()), opts.token_cookie);
      if (!cookie.empty()) authorization = "Bearer " + cookie;
    }
    if (authorization && authorization->rfind("Bearer ", 0) == 0) {
      info.token = authorization->substr(7);
    }
    if (opts.tokens && !opts.open_paths.contains(info.path)) {
      auto role = opts.path_roles.find(info.path);
      std::optional<std::string_view> value;
      if (authorization) value = *authorization;
      absl::Status st = opts.tokens->Check(
          value, role == opts.path_roles.end() ? Role::kReader : role->second, info.path);
      if (st.code() == absl::StatusCode::kUnauthenticated) {
        if (!opts.login_path.empty() && get && info.path.rfind("/api/", 0) != 0 &&
            req[http::field::accept].find("text/html") != beast::string_view::npos) {
          return {303, "text/plain; charset=utf-8", "log in first\n",
                  {{"Location", opts.login_path}}};
        }
        return {401, "text/plain; charset=utf-8", std::string(st.message()) + "\n"};
      }
      if (!st.ok()) return {403, "text/plain; charset=utf-8", std::string(st.message()) + "\n"};
    }
    if (request_route != request_routes.end()) return request_route->second(info);
    auto route = routes.find(info.path);
    if (route == routes.end()) return {404, "text/plain; charset=utf-8", "no such path\n"};
    return route->second(info.target);
  }

  void Accept() {
    // Each connection on its own strand: with several threads, a stream's read, write and
    // timer handlers never run at once.
    acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (!stopped) Accept();
        return;
      }
      if (tls) {
        auto stream = std::make_shared<TlsStream>(std::move(socket), *tls);
        beast::get_lowest_layer(*stream).expires_after(std::chrono::seconds(30));
        stream->async_handshake(ssl::stream_base::server, [this, stream](beast::error_code hec) {
          if (!hec) Serve(stream);
        });
      } else {
        Serve(std::make_shared<beast::tcp_stream>(std::move(socket)));
      }
      Accept();
    });
  }

  // One connection: read a request, answer, repeat while keep-alive.
  template <typename Stream>
  void Serve(std::shared_ptr<Stream> stream) {
    constexpr bool kTls = std::is_same_v<Stream, TlsStream>;
    auto buffer = std::make_shared<beast::flat_buffer>();
    auto req = std::make_shared<http::request<http::string_body>>();
    beast::get_lowest_layer(*stream).expires_after(std::chrono::seconds(30));
    http::async_read(*stream, *buffer, *req,
                     [this, stream, buffer, req](beast::error_code ec, size_t) {
                       if (ec) return;
                       HttpResponse r = Dispatch(*req, kTls);
                       auto res = std::make_shared<http::response<http::string_body>>(
                           static_cast<http::status>(r.status), req->version());
                       res->set(http::field::server, "touchstone");
                       res->set(http::field::content_type, r.content_type);
                       for (const auto& [name, value] : r.headers) res->insert(name, value);
                       res->keep_alive(req->keep_alive());
                       res->body() = std::move(r.body);
                       res->prepare_payload();
                       http::async_write(*stream, *res,
                                         [this, stream, res](beast::error_code wec, size_t) {
                                           if (wec || !res->keep_alive()) {
                                             Close(stream);
                                             return;
                                           }
                                           Serve(stream);
                                         });
                     });
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(
    const HttpServerOptions& opts, std::map<std::string, HttpHandler> routes,
    std::map<std::string, HttpRequestHandler> request_routes) {
  if (opts.threads < 1 || opts.threads > 64) {
    return absl::InvalidArgumentError("http threads: must be in [1, 64], not " +
                                      std::to_string(opts.threads));
  }
  for (const auto& [path, handler] : request_routes) {
    if (routes.contains(path)) {
      return absl::InvalidArgumentError("http routes: " + path + " is routed twice");
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->routes = std::move(routes);
  impl->request_routes = std::move(request_routes);
  if (!opts.tls_cert_file.empty() || !opts.tls_key_file.empty()) {
    if (opts.tls_cert_file.empty()) return absl::InvalidArgumentError("http tls_cert: needed with tls_key");
    if (opts.tls_key_file.empty()) return absl::InvalidArgumentError("http tls_key: needed with tls_cert");
    impl->tls = std::make_unique<ssl::context>(ssl::context::tls_server);
    impl->tls->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 |
                           ssl::context::no_sslv3 | ssl::context::no_tlsv1 |
                           ssl::context::no_tlsv1_1);
    beast::error_code tec;
    impl->tls->use_certificate_chain_file(opts.tls_cert_file, tec);
    if (tec) {
      return absl::InvalidArgumentError("http tls_cert: " + opts.tls_cert_file + ": " +
                                        tec.message());
    }
    impl->tls->use_private_key_file(opts.tls_key_file, ssl::context::pem, tec);
    if (tec) {
      return absl::InvalidArgumentError("http tls_key: " + opts.tls_key_file + ": " +
                                        tec.message());
    }
  }
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
  for (int i = 0; i < opts.threads; ++i) raw->threads.emplace_back([raw] { raw->io.run(); });
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

int HttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

void HttpServer::Stop() {
  if (impl_->stopped.exchange(true)) return;
  // Idle keep-alive connections are not waited for: stop the loop, then close the acceptor
  // (safe once the loop's thread has ended).
  impl_->io.stop();
  for (auto& t : impl_->threads) {
    if (t.joinable()) t.join();
  }
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

namespace {

// One request on a connected `stream` (plain, or TLS after its handshake) within the stream's
// deadline; `done` gets the result.
template <typename Stream>
void Exchange(Stream& stream, http::request<http::string_body>& req, beast::flat_buffer& buffer,
              http::response<http::string_body>& res, beast::error_code& result) {
  http::async_write(stream, req, [&](beast::error_code wec, size_t) {
    if (wec) {
      result = wec;
      return;
    }
    http::async_read(stream, buffer, res, [&](beast::error_code ec, size_t) { result = ec; });
  });
}

}  // namespace

absl::StatusOr<HttpResponse> HttpRequest(const HttpRequestSpec& spec) {
  const std::string where = spec.method + (spec.tls_ca_file.empty() ? " http://" : " https://") +
                            spec.host + ":" + std::to_string(spec.port) + spec.path;
  if (spec.method != "GET" && spec.method != "POST" && spec.method != "DELETE") {
    return absl::InvalidArgumentError("method: GET, POST or DELETE, not " + spec.method);
  }
  asio::io_context io;
  const bool tls = !spec.tls_ca_file.empty();
  ssl::context tls_context(ssl::context::tls_client);
  if (tls) {
    beast::error_code ec;
    tls_context.load_verify_file(spec.tls_ca_file, ec);
    if (ec) return absl::InvalidArgumentError("tls_ca: " + spec.tls_ca_file + ": " + ec.message());
    tls_context.set_verify_mode(ssl::verify_peer);
  }
  // A plain request uses only the TLS stream's lowest layer.
  TlsStream tls_stream(io, tls_context);
  beast::tcp_stream& tcp_stream = beast::get_lowest_layer(tls_stream);
  http::request<http::string_body> req{http::string_to_verb(spec.method), spec.path, 11};
  req.set(http::field::host, spec.host);
  if (!spec.token.empty()) req.set(http::field::authorization, "Bearer " + spec.token);
  for (const auto& [name, value] : spec.headers) req.set(name, value);
  if (!spec.body.empty()) {
    req.set(http::field::content_type, spec.content_type);
    req.body() = spec.body;
    req.prepare_payload();
  }
  if (tls) {
    tls_stream.set_verify_callback(ssl::host_name_verification(spec.host));
    // SNI, for servers that pick a certificate by name.
    if (!SSL_set_tlsext_host_name(tls_stream.native_handle(), spec.host.c_str())) {
      return absl::InternalError(where + ": cannot set the TLS server name");
    }
  }
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  beast::error_code result = asio::error::would_block;
  tcp::resolver resolver(io);
  // Async with one deadline over resolve, connect, handshake, write and read: sync Beast calls
  // ignore expiry.
  tcp_stream.expires_after(std::chrono::milliseconds(static_cast<int64_t>(spec.timeout_s * 1000)));
  resolver.async_resolve(
      spec.host, std::to_string(spec.port),
      [&](beast::error_code rec, tcp::resolver::results_type found) {
        if (rec) {
          result = rec;
          return;
        }
        tcp_stream.async_connect(found, [&](beast::error_code ec, const tcp::endpoint&) {
          if (ec) {
            result = ec;
            return;
          }
          if (!tls) {
            Exchange(tcp_stream, req, buffer, res, result);
            return;
          }
          tls_stream.async_handshake(ssl::stream_base::client, [&](beast::error_code hec) {
            if (hec) {
              result = hec;
              return;
            }
            Exchange(tls_stream, req, buffer, res, result);
          });
        });
      });
  io.run();
  if (result) return absl::UnavailableError(where + ": " + result.message());
  beast::error_code ec;
  tcp_stream.socket().shutdown(tcp::socket::shutdown_both, ec);
  HttpResponse out;
  out.status = static_cast<int>(res.result_int());
  out.content_type = std::string(res[http::field::content_type]);
  out.body = res.body();
  for (const auto& field : res) {
    if (field.name() == http::field::content_type) continue;
    std::string name(field.name_string());
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    out.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  return out;
}

}  // namespace ts::common
