// The web dashboard (issue 12), served by the scheduler's HTTP server: static pages from
// dashboards/web (embedded at build time), Chart.js from Debian's libjs-chart.js, a login page,
// and /api/v1/... JSON endpoints that call this scheduler's own Query service over an
// in-process gRPC channel, so the pages read exactly what a gRPC client reads (protobuf JSON:
// lowerCamelCase names, int64 as strings, every field present).
//
// Auth: the reader (or admin) token, either in "Authorization: Bearer" (scripts) or in the
// HttpOnly, SameSite=Strict cookie `ts_token` that POST /login sets. A browser asking for a page
// without it is redirected to /login; an API call without it is 401. The token is forwarded to
// the Query service, which checks it again (one admission path).
//
// Thread-safety: the routes may be called from any HTTP thread at once; each API call blocks
// its thread for the Query call(s) it makes (the server has several threads, so /healthz keeps
// answering). Errors: a Query error becomes its HTTP status (400 INVALID_ARGUMENT, 404
// NOT_FOUND, 409 FAILED_PRECONDITION, 401, 403, 429 RESOURCE_EXHAUSTED, 503 UNAVAILABLE) with
// {"error": message, "code": name}; a missing or malformed parameter is 400 naming it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "services/common/http_server.h"

namespace ts::scheduler {

// A file of dashboards/web (generated: cmake/embed_web.cmake).
struct DashboardAsset {
  std::string_view name;  // "overview.html"
  std::string_view body;
};
const std::vector<DashboardAsset>& DashboardAssets();

struct DashboardOptions {
  std::shared_ptr<grpc::Channel> channel;  // to this scheduler's Query service
  std::shared_ptr<const common::TokenSet> tokens;
  std::string chart_js = "/usr/share/javascript/chart.js/chart.min.js";
  double deadline_s = 60;  // per Query call
};

inline constexpr char kTokenCookie[] = "ts_token";

// What the dashboard needs of the HTTP server's options: the token cookie, the login redirect,
// the open paths (the login page and its style sheet).
void ConfigureDashboardServer(common::HttpServerOptions* o);

// The pages, static files, login and API routes.
std::map<std::string, common::HttpRequestHandler> DashboardRoutes(const DashboardOptions& o);

// The API routes alone (dashboard_api.cc).
std::map<std::string, common::HttpRequestHandler> DashboardApiRoutes(const DashboardOptions& o);

// A query string's parameters ("a=1&b=x%20y"), percent- and plus-decoded; later repeats win.
std::map<std::string, std::string> ParseQuery(std::string_view query);

}  // namespace ts::scheduler
