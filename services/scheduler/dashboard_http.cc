#include "services/scheduler/dashboard_http.h"

#include <fstream>
#include <sstream>

namespace ts::scheduler {
namespace {

using common::HttpRequestInfo;
using common::HttpResponse;

// Pages run only the scripts they load from /static (no inline script, no eval), fetch only
// this origin, and may not be framed.
constexpr char kSecurityPolicy[] =
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

// The page routes: path -> file of dashboards/web.
const std::map<std::string, std::string>& Pages() {
  static const std::map<std::string, std::string> kPages = {
      {"/", "overview.html"},   {"/classes", "classes.html"}, {"/class", "class.html"},
      {"/trends", "trends.html"}, {"/ops", "ops.html"},       {"/alerts", "alerts.html"},
      {"/model", "model.html"},   {"/login", "login.html"}};
  return kPages;
}

std::string ContentType(std::string_view name) {
  auto ends = [&](std::string_view ext) {
    return name.size() >= ext.size() && name.substr(name.size() - ext.size()) == ext;
  };
  if (ends(".html")) return "text/html; charset=utf-8";
  if (ends(".js")) return "text/javascript; charset=utf-8";
  if (ends(".css")) return "text/css; charset=utf-8";
  return "application/octet-stream";
}

const DashboardAsset* FindAsset(std::string_view name) {
  for (const auto& a : DashboardAssets()) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

HttpResponse Static(std::string_view body, std::string_view name) {
  HttpResponse r{200, ContentType(name), std::string(body)};
  r.headers = {{"Content-Security-Policy", kSecurityPolicy},
               {"X-Content-Type-Options", "nosniff"},
               {"Referrer-Policy", "same-origin"},
               {"Cache-Control", "no-cache"}};
  return r;
}

HttpResponse Redirect(const std::string& where, std::vector<std::pair<std::string, std::string>>
                                                    headers = {}) {
  HttpResponse r{303, "text/plain; charset=utf-8", "see " + where + "\n", std::move(headers)};
  r.headers.emplace_back("Location", where);
  return r;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::string Decode(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '+') {
      out += ' ';
    } else if (s[i] == '%' && i + 2 < s.size() &&
               HexValue(s[i + 1]) >= 0 && HexValue(s[i + 2]) >= 0) {
      out += static_cast<char>(HexValue(s[i + 1]) * 16 + HexValue(s[i + 2]));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

// The login cookie's attributes: never readable by scripts, never sent cross-site, and over
// TLS (this server's, or a proxy's that says so) never sent back over plaintext: Secure.
std::string CookieAttributes(const HttpRequestInfo& req) {
  return std::string("; Path=/; HttpOnly; SameSite=Strict") + (req.tls ? "; Secure" : "");
}

// POST /login (form field `token`): a reader or admin token sets the cookie and goes to the
// Overview; anything else goes back to the login page, which says it was refused.
HttpResponse Login(const DashboardOptions& o, const HttpRequestInfo& req) {
  if (req.method == "GET" || req.method == "HEAD") {
    return Static(FindAsset("login.html")->body, "login.html");
  }
  if (req.method != "POST") return {405, "text/plain; charset=utf-8", "GET or POST\n"};
  const std::string token = ParseQuery(req.body)["token"];
  if (o.tokens && !o.tokens->open()) {
    auto role = o.tokens->RoleOf(token);
    const bool cookie_safe = token.find_first_of(";,\"\\ ") == std::string::npos;
    if (token.empty() || !role || *role == common::Role::kWorker || !cookie_safe) {
      return Redirect("/login?refused=1");
    }
  }
  return Redirect("/", {{"Set-Cookie", std::string(kTokenCookie) + "=" + token +
                                           CookieAttributes(req)}});
}

HttpResponse Logout(const HttpRequestInfo& req) {
  return Redirect("/login", {{"Set-Cookie", std::string(kTokenCookie) + "=; Max-Age=0" +
                                                CookieAttributes(req)}});
}

}  // namespace

std::map<std::string, std::string> ParseQuery(std::string_view query) {
  std::map<std::string, std::string> out;
  while (!query.empty()) {
    const size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? "" : query.substr(amp + 1);
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    if (eq == std::string_view::npos) {
      out[Decode(pair)] = "";
    } else {
      out[Decode(pair.substr(0, eq))] = Decode(pair.substr(eq + 1));
    }
  }
  return out;
}

void ConfigureDashboardServer(common::HttpServerOptions* o) {
  o->token_cookie = kTokenCookie;
  o->login_path = "/login";
  o->open_paths.insert({"/login", "/logout", "/static/style.css", "/static/login.js"});
  if (o->threads < 4) o->threads = 4;
}

std::map<std::string, common::HttpRequestHandler> DashboardRoutes(const DashboardOptions& o) {
  auto routes = DashboardApiRoutes(o);
  for (const auto& [path, file] : Pages()) {
    if (path == "/login") continue;
    const DashboardAsset* a = FindAsset(file);
    if (a == nullptr) continue;  // cannot happen: the build embeds every page
    routes[path] = [a](const HttpRequestInfo&) { return Static(a->body, a->name); };
  }
  routes["/login"] = [o](const HttpRequestInfo& req) { return Login(o, req); };
  routes["/logout"] = &Logout;
  for (const auto& a : DashboardAssets()) {
    if (a.name.ends_with(".html")) continue;
    const DashboardAsset* p = &a;
    routes["/static/" + std::string(a.name)] = [p](const HttpRequestInfo&) {
      return Static(p->body, p->name);
    };
  }
  // Chart.js as Debian packages it (libjs-chart.js), read from its system path.
  const std::string chart = o.chart_js;
  routes["/static/chart.min.js"] = [chart](const HttpRequestInfo&) {
    std::ifstream in(chart, std::ios::binary);
    if (!in) {
      return HttpResponse{404, "text/plain; charset=utf-8",
                          "chart.js: cannot read " + chart + " (install libjs-chart.js)\n"};
    }
    std::ostringstream body;
    body << in.rdbuf();
    return Static(body.str(), "chart.min.js");
  };
  return routes;
}

}  // namespace ts::scheduler
