// The dashboard's JSON endpoints: each calls the Query (or Scheduler, for a class's models)
// service of this scheduler over its in-process channel with the caller's token, and answers
// the protobuf JSON of what it got; the composite ones (overview, trends, class) wrap several
// answers in one object whose parts are those messages' JSON, unchanged.
#include <google/protobuf/util/json_util.h>

#include <chrono>
#include <cstdlib>
#include <optional>

#include "services/scheduler/dashboard_http.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

namespace pb = ::touchstone::v1;
using common::HttpRequestInfo;
using common::HttpResponse;

constexpr int kTrendSweeps = 30;  // sweeps per line on the Trends page

int HttpStatusOf(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::INVALID_ARGUMENT: return 400;
    case grpc::StatusCode::UNAUTHENTICATED: return 401;
    case grpc::StatusCode::PERMISSION_DENIED: return 403;
    case grpc::StatusCode::NOT_FOUND: return 404;
    case grpc::StatusCode::FAILED_PRECONDITION: return 409;
    case grpc::StatusCode::RESOURCE_EXHAUSTED: return 429;
    case grpc::StatusCode::UNAVAILABLE: return 503;
    case grpc::StatusCode::DEADLINE_EXCEEDED: return 504;
    default: return 500;
  }
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == '<' || c == '>' || c == '&') {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

HttpResponse JsonResponse(int status, std::string body) {
  HttpResponse r{status, "application/json; charset=utf-8", std::move(body)};
  r.headers = {{"Cache-Control", "no-store"}, {"X-Content-Type-Options", "nosniff"}};
  return r;
}

HttpResponse ErrorResponse(const grpc::Status& st) {
  static const char* kNames[] = {"OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT",
                                 "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
                                 "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
                                 "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
                                 "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS",
                                 "UNAUTHENTICATED"};
  const int code = static_cast<int>(st.error_code());
  const std::string name = code >= 0 && code <= 16 ? kNames[code] : "UNKNOWN";
  return JsonResponse(HttpStatusOf(st.error_code()),
                      "{\"error\":" + JsonString(st.error_message()) +
                          ",\"code\":" + JsonString(name) + "}");
}

HttpResponse BadParam(const std::string& message) {
  return ErrorResponse(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message));
}

// The message's protobuf JSON (every field, lowerCamelCase) with '<', '>' and '&' escaped, so
// the text is safe wherever it lands.
std::string ToJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.always_print_primitive_fields = true;
  std::string raw;
  auto st = google::protobuf::util::MessageToJsonString(m, &raw, o);
  if (!st.ok()) return "null";
  std::string out;
  out.reserve(raw.size());
  for (char c : raw) {
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else {
      out += c;
    }
  }
  return out;
}

// One API call's context: the caller's token forwarded, a deadline.
class Api {
 public:
  Api(const DashboardOptions& o, const HttpRequestInfo& req)
      : o_(o), token_(req.token), params_(ParseQuery(req.query)),
        query_(pb::Query::NewStub(o.channel)) {}

  std::unique_ptr<grpc::ClientContext> Context() const {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::milliseconds(static_cast<int64_t>(o_.deadline_s * 1000)));
    return ctx;
  }
  pb::Query::Stub& query() { return *query_; }
  const std::string& param(const std::string& name) const {
    static const std::string kEmpty;
    auto it = params_.find(name);
    return it == params_.end() ? kEmpty : it->second;
  }
  // A positive integer parameter; 0 when absent; -1 (with `error` set) when malformed.
  int64_t IdParam(const std::string& name, std::string* error) const {
    const std::string& v = param(name);
    if (v.empty()) return 0;
    char* end = nullptr;
    const long long id = std::strtoll(v.c_str(), &end, 10);
    if (end == v.c_str() || *end != '\0' || id <= 0) {
      *error = name + ": a positive sweep id, not '" + v + "'";
      return -1;
    }
    return id;
  }
  // The sweep named by ?sweep=, else the newest sweep. Sets `out` or returns the error.
  std::optional<HttpResponse> SweepId(int64_t* out) {
    std::string error;
    *out = IdParam("sweep", &error);
    if (*out < 0) return BadParam(error);
    if (*out > 0) return std::nullopt;
    pb::ListSweepsRequest req;
    req.set_page_size(1);
    pb::ListSweepsResponse resp;
    grpc::Status st = query().ListSweeps(Context().get(), req, &resp);
    if (!st.ok()) return ErrorResponse(st);
    if (resp.sweeps().empty()) {
      return ErrorResponse(grpc::Status(grpc::StatusCode::NOT_FOUND, "sweep: there is no sweep yet"));
    }
    *out = resp.sweeps(0).sweep_id();
    return std::nullopt;
  }
  std::shared_ptr<grpc::Channel> channel() const { return o_.channel; }

 private:
  const DashboardOptions& o_;
  std::string token_;
  std::map<std::string, std::string> params_;
  std::unique_ptr<pb::Query::Stub> query_;
};

template <typename Resp>
HttpResponse Answer(const grpc::Status& st, const Resp& resp) {
  if (!st.ok()) return ErrorResponse(st);
  return JsonResponse(200, ToJson(resp));
}

// Every sweep the Trends and Overview look at: newest first, up to 1000.
grpc::Status RecentSweeps(Api& api, pb::ListSweepsResponse* out) {
  pb::ListSweepsRequest req;
  req.set_page_size(1000);
  return api.query().ListSweeps(api.Context().get(), req, out);
}

bool Counts(const pb::SweepInfo& s) { return s.state() == "done" || s.state() == "running"; }

grpc::Status TaskSummary(Api& api, int64_t sweep_id, pb::Summary* out) {
  pb::GetSummaryRequest req;
  req.set_sweep_id(sweep_id);
  req.set_group_by(pb::GROUP_BY_TASK);
  return api.query().GetSummary(api.Context().get(), req, out);
}

// {"lines": [{"line", "sweep", "summary", "previous", "previousSummary"}]}: the newest done or
// running sweep of each profile line with its per-task table, and the line's sweep before it
// (null when none) with its table, for the changes.
HttpResponse Overview(Api& api) {
  pb::ListSweepsResponse sweeps;
  if (auto st = RecentSweeps(api, &sweeps); !st.ok()) return ErrorResponse(st);
  std::map<std::string, std::vector<const pb::SweepInfo*>> lines;  // newest first
  for (const auto& s : sweeps.sweeps()) {
    auto& v = lines[s.line()];
    if (Counts(s) && v.size() < 2) v.push_back(&s);
  }
  std::string out = "{\"lines\":[";
  bool first = true;
  for (const auto& [line, v] : lines) {
    if (v.empty()) continue;
    pb::Summary head, base;
    if (auto st = TaskSummary(api, v[0]->sweep_id(), &head); !st.ok()) return ErrorResponse(st);
    out += first ? "" : ",";
    first = false;
    out += "{\"line\":" + JsonString(line) + ",\"sweep\":" + ToJson(*v[0]) +
           ",\"summary\":" + ToJson(head);
    if (v.size() > 1) {
      if (auto st = TaskSummary(api, v[1]->sweep_id(), &base); !st.ok()) return ErrorResponse(st);
      out += ",\"previous\":" + ToJson(*v[1]) + ",\"previousSummary\":" + ToJson(base);
    } else {
      out += ",\"previous\":null,\"previousSummary\":null";
    }
    out += "}";
  }
  return JsonResponse(200, out + "]}");
}

// {"lines": [{"line", "points": [{"sweep", "total", "rows"}]}]}: per line (or ?line=), its last
// 30 done sweeps, oldest first, each with its per-task rows and Total.
HttpResponse Trends(Api& api) {
  pb::ListSweepsResponse sweeps;
  if (auto st = RecentSweeps(api, &sweeps); !st.ok()) return ErrorResponse(st);
  std::map<std::string, std::vector<const pb::SweepInfo*>> lines;
  for (const auto& s : sweeps.sweeps()) {
    if (!api.param("line").empty() && s.line() != api.param("line")) continue;
    auto& v = lines[s.line()];
    if (s.state() == "done" && static_cast<int>(v.size()) < kTrendSweeps) v.push_back(&s);
  }
  std::string out = "{\"lines\":[";
  bool first_line = true;
  for (const auto& [line, v] : lines) {
    if (v.empty()) continue;
    out += first_line ? "" : ",";
    first_line = false;
    out += "{\"line\":" + JsonString(line) + ",\"points\":[";
    for (auto it = v.rbegin(); it != v.rend(); ++it) {
      pb::Summary s;
      if (auto st = TaskSummary(api, (*it)->sweep_id(), &s); !st.ok()) return ErrorResponse(st);
      out += it == v.rbegin() ? "" : ",";
      out += "{\"sweep\":" + ToJson(**it) + ",\"summary\":" + ToJson(s) + "}";
    }
    out += "]}";
  }
  return JsonResponse(200, out + "]}");
}

// ?sweep=&group_by=task|family|arch[&modes=0] -> Summary. modes=0 leaves out each row's
// per-mode status counts (the Classes table does not show them; a quarter of the bytes).
HttpResponse Summary(Api& api) {
  pb::GetSummaryRequest req;
  int64_t id = 0;
  if (auto err = api.SweepId(&id)) return *err;
  req.set_sweep_id(id);
  const std::string& by = api.param("group_by");
  if (by.empty() || by == "task") {
    req.set_group_by(pb::GROUP_BY_TASK);
  } else if (by == "family") {
    req.set_group_by(pb::GROUP_BY_FAMILY);
  } else if (by == "arch") {
    req.set_group_by(pb::GROUP_BY_ARCH);
  } else {
    return BadParam("group_by: task, family or arch, not '" + by + "'");
  }
  pb::Summary resp;
  grpc::Status st = api.query().GetSummary(api.Context().get(), req, &resp);
  if (st.ok() && api.param("modes") == "0") {
    for (auto& row : *resp.mutable_rows()) row.clear_modes();
    resp.mutable_total()->clear_modes();
    resp.mutable_class_weighted()->clear_modes();
  }
  return Answer(st, resp);
}

// ?sweep=&arch= -> {"sweep": SweepInfo, "arch", "rows": [ResultRow]}: the class's models in
// the sweep (Scheduler.ListResults, filtered to the class).
HttpResponse Class(Api& api) {
  const std::string& arch = api.param("arch");
  if (arch.empty()) return BadParam("arch: a class name is required");
  int64_t id = 0;
  if (auto err = api.SweepId(&id)) return *err;
  auto stub = pb::Scheduler::NewStub(api.channel());
  pb::ListResultsRequest req;
  req.set_sweep_id(id);
  auto ctx = api.Context();
  auto reader = stub->ListResults(ctx.get(), req);
  pb::ResultPage page;
  std::string rows;
  while (reader->Read(&page)) {
    for (const auto& row : page.rows()) {
      if (row.arch() != arch) continue;
      rows += rows.empty() ? "" : ",";
      rows += ToJson(row);
    }
  }
  if (auto st = reader->Finish(); !st.ok()) return ErrorResponse(st);
  return JsonResponse(200, "{\"sweepId\":\"" + std::to_string(id) +
                               "\",\"arch\":" + JsonString(arch) + ",\"rows\":[" + rows + "]}");
}

HttpResponse Model(Api& api) {
  const std::string& id = api.param("id");
  if (id.empty()) return BadParam("id: a model id is required");
  pb::GetModelRequest req;
  req.set_model_id(id);
  req.set_last(30);
  pb::ModelHistory resp;
  return Answer(api.query().GetModel(api.Context().get(), req, &resp), resp);
}

// ?sweep=&mode=eager|compile -> OpDemandResponse (first 50).
HttpResponse Ops(Api& api) {
  pb::OpDemandRequest req;
  int64_t id = 0;
  if (auto err = api.SweepId(&id)) return *err;
  req.set_sweep_id(id);
  const std::string& mode = api.param("mode");
  if (mode.empty() || mode == "eager") {
    req.set_mode(pb::MODE_EAGER);
  } else if (mode == "compile") {
    req.set_mode(pb::MODE_COMPILE);
  } else {
    return BadParam("mode: eager or compile, not '" + mode + "'");
  }
  pb::OpDemandResponse resp;
  return Answer(api.query().OpDemand(api.Context().get(), req, &resp), resp);
}

HttpResponse GraphBreaks(Api& api) {
  pb::GraphBreaksRequest req;
  int64_t id = 0;
  if (auto err = api.SweepId(&id)) return *err;
  req.set_sweep_id(id);
  pb::GraphBreaksResponse resp;
  return Answer(api.query().GraphBreaks(api.Context().get(), req, &resp), resp);
}

HttpResponse Alerts(Api& api) {
  pb::ListAlertsRequest req;
  req.set_state(api.param("state"));
  req.set_page_size(200);
  pb::ListAlertsResponse resp;
  return Answer(api.query().ListAlerts(api.Context().get(), req, &resp), resp);
}

HttpResponse Sweeps(Api& api) {
  pb::ListSweepsRequest req;
  req.set_profile(api.param("profile"));
  req.set_state(api.param("state"));
  req.set_page_size(100);
  pb::ListSweepsResponse resp;
  return Answer(api.query().ListSweeps(api.Context().get(), req, &resp), resp);
}

}  // namespace

std::map<std::string, common::HttpRequestHandler> DashboardApiRoutes(const DashboardOptions& o) {
  using Fn = HttpResponse (*)(Api&);
  const std::pair<const char*, Fn> kRoutes[] = {
      {"/api/v1/overview", &Overview}, {"/api/v1/trends", &Trends},
      {"/api/v1/summary", &Summary},   {"/api/v1/class", &Class},
      {"/api/v1/model", &Model},       {"/api/v1/ops", &Ops},
      {"/api/v1/graph-breaks", &GraphBreaks}, {"/api/v1/alerts", &Alerts},
      {"/api/v1/sweeps", &Sweeps}};
  std::map<std::string, common::HttpRequestHandler> routes;
  for (const auto& [path, fn] : kRoutes) {
    routes[path] = [o, fn](const HttpRequestInfo& req) {
      if (req.method != "GET" && req.method != "HEAD") {
        return HttpResponse{405, "text/plain; charset=utf-8", "only GET\n"};
      }
      Api api(o, req);
      return fn(api);
    };
  }
  return routes;
}

}  // namespace ts::scheduler
