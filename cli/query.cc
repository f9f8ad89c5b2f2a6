#include "cli/query.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include "cli/client.h"
#include "cli/gate_rules.h"
#include "cli/query_text.h"
#include "cli/usage.h"
#include "proto/names.h"
#include "services/query/text_tables.h"
#include "touchstone/v1/query.grpc.pb.h"

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;

constexpr const char* kQueryUsage =
    "usage: touchstone sweeps [--profile NAME] [--state S] [--name SUBSTR] [--limit N]\n"
    "       touchstone summary SWEEP [--by task|family|arch] [--task T]... [--family F]...\n"
    "                                [--arch A]...\n"
    "       touchstone model ID [--last N]\n"
    "       touchstone ops SWEEP [--mode eager|compile] [--limit N]\n"
    "       touchstone breaks SWEEP [--limit N]\n"
    "       touchstone suspects SWEEP [--mode eager|compile|train] [--limit N]\n"
    "       touchstone compare BASE HEAD [--by task|family|arch] [--limit N]\n"
    "       touchstone gate SWEEP --rules FILE\n"
    "       touchstone alerts [--state open|acknowledged|resolved] [--limit N]\n"
    "       touchstone alerts ack ID --note TEXT [--by NAME]    (admin token)\n"
    "       touchstone alerts watch [--state S] [--updates N]  (a snapshot, then changes)\n"
    "       touchstone alerts quarantine                       (flaky models and modes)\n"
    "       touchstone detect SWEEP [--baseline B]              (admin token)\n"
    "  every one takes: [--scheduler HOST:PORT] [--token-file FILE] [--tls-ca FILE]\n"
    "                   [--format json|text] [--page-token T] (lists)\n"
    "  exit: 0 answered (gate: pass), 1 gate failed, 2 usage or refused request, 3 no answer\n";

constexpr CommandText kQuery = {"touchstone", "touchstone", kQueryUsage};

// The command's own arguments: positionals in order, flags by name (repeatable).
struct Args {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> flags;
  std::string Get(const std::string& name, const std::string& fallback = "") const {
    auto it = flags.find(name);
    return it == flags.end() ? fallback : it->second;
  }
  std::vector<std::string> All(const std::string& name) const {
    std::vector<std::string> out;
    for (auto [it, end] = flags.equal_range(name); it != end; ++it) out.push_back(it->second);
    return out;
  }
};

bool ParseArgs(const std::vector<std::string>& in, const std::vector<std::string>& known,
               Args* out, std::string* why) {
  for (size_t i = 0; i < in.size(); ++i) {
    const std::string& a = in[i];
    if (a.rfind("--", 0) != 0) {
      out->positional.push_back(a);
      continue;
    }
    if (std::find(known.begin(), known.end(), a) == known.end()) {
      *why = "unknown argument '" + a + "'";
      return false;
    }
    if (i + 1 >= in.size()) {
      *why = a + ": needs a value";
      return false;
    }
    out->flags.emplace(a, in[++i]);
  }
  return true;
}

// Exit code for a failed RPC, after printing it.
int RpcFailed(const char* method, const grpc::Status& st) {
  std::fprintf(stderr, "touchstone: %s: %s: %s\n", method,
               absl::StatusCodeToString(static_cast<absl::StatusCode>(st.error_code())).c_str(),
               st.error_message().c_str());
  switch (st.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return 2;
    default:
      return 3;
  }
}

void PrintJson(const google::protobuf::Message& m) {
  google::protobuf::util::JsonPrintOptions o;
  o.add_whitespace = true;
  o.always_print_primitive_fields = true;
  std::string out;
  (void)google::protobuf::util::MessageToJsonString(m, &out, o);
  std::printf("%s\n", out.c_str());
}

bool ParseId(const std::string& s, int64_t* id) { return ParseNonNegative(s, id) && *id > 0; }

bool ParseGroupBy(const std::string& s, pb::GroupBy* g) {
  if (s == "task") *g = pb::GROUP_BY_TASK;
  else if (s == "family") *g = pb::GROUP_BY_FAMILY;
  else if (s == "arch" || s == "class") *g = pb::GROUP_BY_ARCH;
  else return false;
  return true;
}

bool ParseLimit(const Args& a, int32_t* out) {
  const std::string s = a.Get("--limit");
  if (s.empty()) return true;
  int64_t v = 0;
  if (!ParseNonNegative(s, &v) || v < 1 || v > 100000) return false;
  *out = static_cast<int32_t>(v);
  return true;
}

struct Call {
  Connection conn;
  std::unique_ptr<pb::Query::Stub> stub;
  bool json = false;
};

using Handler = std::function<int(const Args&, Call&)>;

int Sweeps(const Args& a, Call& c) {
  if (!a.positional.empty()) return Usage(kQuery, "sweeps: takes no positional argument");
  pb::ListSweepsRequest req;
  req.set_profile(a.Get("--profile"));
  req.set_state(a.Get("--state"));
  req.set_name_contains(a.Get("--name"));
  req.set_page_token(a.Get("--page-token"));
  int32_t limit = 0;
  if (!ParseLimit(a, &limit)) return Usage(kQuery, "--limit: 1..100000");
  req.set_page_size(limit);
  pb::ListSweepsResponse resp;
  grpc::Status st = c.stub->ListSweeps(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("ListSweeps", st);
  c.json ? PrintJson(resp) : (void)std::printf("%s", SweepsText(resp).c_str());
  return 0;
}

int Summary(const Args& a, Call& c) {
  pb::GetSummaryRequest req;
  int64_t id = 0;
  if (a.positional.size() != 1 || !ParseId(a.positional[0], &id)) {
    return Usage(kQuery, "summary: expected one sweep id");
  }
  req.set_sweep_id(id);
  pb::GroupBy g = pb::GROUP_BY_TASK;
  if (!ParseGroupBy(a.Get("--by", "task"), &g)) return Usage(kQuery, "--by: task, family or arch");
  req.set_group_by(g);
  for (const auto& t : a.All("--task")) req.mutable_filter()->add_tasks(t);
  for (const auto& f : a.All("--family")) req.mutable_filter()->add_families(f);
  for (const auto& x : a.All("--arch")) req.mutable_filter()->add_archs(x);
  pb::Summary resp;
  grpc::Status st = c.stub->GetSummary(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("GetSummary", st);
  c.json ? PrintJson(resp) : (void)std::printf("%s", query::FormatSummary(resp).c_str());
  return 0;
}

int Model(const Args& a, Call& c) {
  if (a.positional.size() != 1) return Usage(kQuery, "model: expected one model id");
  pb::GetModelRequest req;
  req.set_model_id(a.positional[0]);
  int64_t last = 0;
  if (const std::string s = a.Get("--last"); !s.empty() && (!ParseId(s, &last) || last > 100)) {
    return Usage(kQuery, "--last: 1..100");
  }
  req.set_last(static_cast<int32_t>(last));
  pb::ModelHistory resp;
  grpc::Status st = c.stub->GetModel(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("GetModel", st);
  c.json ? PrintJson(resp) : (void)std::printf("%s", ModelText(resp).c_str());
  return 0;
}

int Ops(const Args& a, Call& c) {
  pb::OpDemandRequest req;
  int64_t id = 0;
  if (a.positional.size() != 1 || !ParseId(a.positional[0], &id)) {
    return Usage(kQuery, "ops: expected one sweep id");
  }
  req.set_sweep_id(id);
  const std::string mode = a.Get("--mode", "eager");
  if (mode != "eager" && mode != "compile") return Usage(kQuery, "--mode: eager or compile");
  req.set_mode(mode == "eager" ? pb::MODE_EAGER : pb::MODE_COMPILE);
  int32_t limit = 0;
  if (!ParseLimit(a, &limit)) return Usage(kQuery, "--limit: 1..100000");
  req.set_page_size(limit);
  req.set_page_token(a.Get("--page-token"));
  pb::OpDemandResponse resp;
  grpc::Status st = c.stub->OpDemand(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("OpDemand", st);
  c.json ? PrintJson(resp) : (void)std::printf("%s", query::FormatOpDemand(resp).c_str());
  return 0;
}

int Breaks(const Args& a, Call& c) {
  pb::GraphBreaksRequest req;
  int64_t id = 0;
  if (a.positional.size() != 1 || !ParseId(a.positional[0], &id)) {
    return Usage(kQuery, "breaks: expected one sweep id");
  }
  req.set_sweep_id(id);
  int32_t limit = 0;
  if (!ParseLimit(a, &limit)) return Usage(kQuery, "--limit: 1..100000");
  req.set_page_size(limit);
  req.set_page_token(a.Get("--page-token"));
  pb::GraphBreaksResponse resp;
  grpc::Status st = c.stub->GraphBreaks(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("GraphBreaks", st);
  c.json ? PrintJson(resp) : (void)std::printf("%s", query::FormatGraphBreaks(resp).c_str());
  return 0;
}

// Ops ranked by the models they break (every mode unless --mode).
int Suspects(const Args& a, Call& c) {
  pb::SuspectOpsRequest req;
  int64_t id = 0;
  if (a.positional.size() != 1 || !ParseId(a.positional[0], &id)) {
    return Usage(kQuery, "suspects: expected one sweep id");
  }
  req.set_sweep_id(id);
  const std::string mode = a.Get("--mode");
  if (!mode.empty()) {
    const auto m = proto::ModeFromName(mode);
    if (!m) return Usage(kQuery, "--mode: eager, compile or train");
    req.set_mode(*m);
  }
  int32_t limit = 0;
  if (!ParseLimit(a, &limit)) return Usage(kQuery, "--limit: 1..100000");
  req.set_page_size(limit);
  req.set_page_token(a.Get("--page-token"));
  pb::SuspectOpsResponse resp;
  grpc::Status st = c.stub->SuspectOps(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("SuspectOps", st);
  c.json ? PrintJson(resp) : (void)std::printf("%s", query::FormatSuspectOps(resp).c_str());
  return 0;
}

// Every page unless --limit: the changes of all pages, in order, with the first page's counts
// and groups.
int Compare(const Args& a, Call& c) {
  pb::CompareSweepsRequest req;
  int64_t base = 0, head = 0;
  if (a.positional.size() != 2 || !ParseId(a.positional[0], &base) ||
      !ParseId(a.positional[1], &head)) {
    return Usage(kQuery, "compare: expected two sweep ids, BASE HEAD");
  }
  req.set_base_sweep_id(base);
  req.set_head_sweep_id(head);
  pb::GroupBy g = pb::GROUP_BY_TASK;
  if (!ParseGroupBy(a.Get("--by", "task"), &g)) return Usage(kQuery, "--by: task, family or arch");
  req.set_group_by(g);
  int32_t limit = 0;
  if (!ParseLimit(a, &limit)) return Usage(kQuery, "--limit: 1..100000");
  req.set_page_size(limit);
  req.set_page_token(a.Get("--page-token"));
  pb::CompareSweepsResponse all;
  for (bool first = true;; first = false) {
    pb::CompareSweepsResponse page;
    grpc::Status st = c.stub->CompareSweeps(c.conn.Context().get(), req, &page);
    if (!st.ok()) return RpcFailed("CompareSweeps", st);
    if (first) {
      all = page;
    } else {
      for (const auto& ch : page.changes()) *all.add_changes() = ch;
      all.set_next_page_token(page.next_page_token());
    }
    if (limit > 0 || page.next_page_token().empty()) break;
    req.set_page_token(page.next_page_token());
  }
  c.json ? PrintJson(all) : (void)std::printf("%s", query::FormatCompare(all).c_str());
  return 0;
}

int Gate(const Args& a, Call& c) {
  pb::GateRequest req;
  int64_t id = 0;
  if (a.positional.size() != 1 || !ParseId(a.positional[0], &id)) {
    return Usage(kQuery, "gate: expected one sweep id");
  }
  req.set_sweep_id(id);
  const std::string path = a.Get("--rules");
  if (path.empty()) return Usage(kQuery, "gate: --rules FILE is required");
  std::ifstream in(path);
  if (!in) return Usage(kQuery, "--rules: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto rules = ParseGateRules(ss.str());
  if (!rules.ok()) {
    std::fprintf(stderr, "touchstone: --rules %s: %s\n", path.c_str(),
                 std::string(rules.status().message()).c_str());
    return 2;
  }
  *req.mutable_rules() = *rules;
  pb::GateResponse resp;
  grpc::Status st = c.stub->Gate(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("Gate", st);
  c.json ? PrintJson(resp) : (void)std::printf("%s", query::FormatGate(resp).c_str());
  return resp.pass() ? 0 : 1;
}

// `touchstone alerts ack ID --note TEXT [--by NAME]`: open -> acknowledged.
int AckAlert(const Args& a, Call& c) {
  pb::AckAlertRequest req;
  int64_t id = 0;
  if (a.positional.size() != 2 || !ParseId(a.positional[1], &id)) {
    return Usage(kQuery, "alerts ack: expected one alert id");
  }
  req.set_alert_id(id);
  req.set_note(a.Get("--note"));
  if (req.note().empty()) return Usage(kQuery, "alerts ack: --note TEXT is required");
  req.set_by(a.Get("--by"));
  pb::Alert resp;
  grpc::Status st = c.stub->AckAlert(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("AckAlert", st);
  pb::ListAlertsResponse one;
  *one.add_alerts() = resp;
  c.json ? PrintJson(resp) : (void)std::printf("%s", AlertsText(one).c_str());
  return 0;
}

// `touchstone alerts quarantine`: the quarantined models and modes.
int Quarantine(const Args& a, Call& c) {
  if (a.positional.size() != 1) return Usage(kQuery, "alerts quarantine: expected no argument");
  pb::ListQuarantineResponse resp;
  grpc::Status st =
      c.stub->ListQuarantine(c.conn.Context().get(), pb::ListQuarantineRequest(), &resp);
  if (!st.ok()) return RpcFailed("ListQuarantine", st);
  c.json ? PrintJson(resp) : (void)std::printf("%s", QuarantineText(resp).c_str());
  return 0;
}

// `touchstone alerts watch [--state S] [--updates N]`: the snapshot, then each change as it
// comes, until Ctrl-C (or N messages, the snapshot included). JSON: one message per line.
int Watch(const Args& a, Call& c) {
  if (a.positional.size() != 1) return Usage(kQuery, "alerts watch: expected no argument");
  pb::WatchAlertsRequest req;
  req.set_state(a.Get("--state"));
  int64_t updates = 0;
  if (!a.Get("--updates").empty() && !ParseId(a.Get("--updates"), &updates)) {
    return Usage(kQuery, "--updates: a count > 0");
  }
  auto ctx = c.conn.Context(365.0 * 24 * 3600);
  auto reader = c.stub->WatchAlerts(ctx.get(), req);
  pb::AlertsUpdate u;
  int64_t n = 0;
  while (reader->Read(&u)) {
    if (c.json) {
      google::protobuf::util::JsonPrintOptions o;  // PrintJson's, on one line
      o.always_print_primitive_fields = true;
      std::string line;
      (void)google::protobuf::util::MessageToJsonString(u, &line, o);
      std::printf("%s\n", line.c_str());
    } else {
      std::printf("%s", AlertsUpdateText(u).c_str());
    }
    std::fflush(stdout);
    if (updates > 0 && ++n >= updates) {
      ctx->TryCancel();
      break;
    }
  }
  grpc::Status st = reader->Finish();
  if (updates > 0 && n >= updates) return 0;
  if (!st.ok()) return RpcFailed("WatchAlerts", st);
  return 0;
}

// Alerts, newest first (every page unless --limit), or `alerts ack | watch | quarantine`.
int Alerts(const Args& a, Call& c) {
  const std::string sub = a.positional.empty() ? "" : a.positional[0];
  if (sub == "ack") return AckAlert(a, c);
  if (sub == "quarantine") return Quarantine(a, c);
  if (sub == "watch") return Watch(a, c);
  if (!a.positional.empty()) {
    return Usage(kQuery, "alerts: expected no argument, or ack ID, watch, quarantine");
  }
  if (!a.Get("--note").empty() || !a.Get("--by").empty()) {
    return Usage(kQuery, "alerts: --note and --by go with ack");
  }
  pb::ListAlertsRequest req;
  req.set_state(a.Get("--state"));
  int32_t limit = 0;
  if (!ParseLimit(a, &limit)) return Usage(kQuery, "--limit: 1..100000");
  req.set_page_size(limit);
  req.set_page_token(a.Get("--page-token"));
  pb::ListAlertsResponse all;
  for (;;) {
    pb::ListAlertsResponse page;
    grpc::Status st = c.stub->ListAlerts(c.conn.Context().get(), req, &page);
    if (!st.ok()) return RpcFailed("ListAlerts", st);
    for (auto& alert : *page.mutable_alerts()) *all.add_alerts() = std::move(alert);
    all.set_next_page_token(page.next_page_token());
    if (limit > 0 || page.next_page_token().empty()) break;
    req.set_page_token(page.next_page_token());
  }
  c.json ? PrintJson(all) : (void)std::printf("%s", AlertsText(all).c_str());
  return 0;
}

// Regression detection of a done sweep against its baseline, on demand.
int Detect(const Args& a, Call& c) {
  pb::DetectRegressionsRequest req;
  int64_t id = 0, base = 0;
  if (a.positional.size() != 1 || !ParseId(a.positional[0], &id)) {
    return Usage(kQuery, "detect: expected one sweep id");
  }
  req.set_sweep_id(id);
  if (!a.Get("--baseline").empty() && !ParseId(a.Get("--baseline"), &base)) {
    return Usage(kQuery, "--baseline: a sweep id");
  }
  req.set_baseline_sweep_id(base);
  pb::DetectRegressionsResponse resp;
  grpc::Status st = c.stub->DetectRegressions(c.conn.Context(300).get(), req, &resp);
  if (!st.ok()) return RpcFailed("DetectRegressions", st);
  c.json ? PrintJson(resp) : (void)std::printf("%s", DetectText(resp).c_str());
  return 0;
}

struct Command {
  Handler run;
  std::vector<std::string> flags;
  bool (*admin)(const Args&) = nullptr;  // true: the command changes state; send the admin token
};

const std::map<std::string, Command>& Commands() {
  static const auto* c = new std::map<std::string, Command>{
      {"sweeps", {Sweeps, {"--profile", "--state", "--name", "--limit", "--page-token"}}},
      {"summary", {Summary, {"--by", "--task", "--family", "--arch"}}},
      {"model", {Model, {"--last"}}},
      {"ops", {Ops, {"--mode", "--limit", "--page-token"}}},
      {"breaks", {Breaks, {"--limit", "--page-token"}}},
      {"suspects", {Suspects, {"--mode", "--limit", "--page-token"}}},
      {"compare", {Compare, {"--by", "--limit", "--page-token"}}},
      {"gate", {Gate, {"--rules"}}},
      {"alerts",
       {Alerts,
        {"--state", "--limit", "--page-token", "--note", "--by", "--updates"},
        [](const Args& a) { return !a.positional.empty() && a.positional[0] == "ack"; }}},
      {"detect", {Detect, {"--baseline"}, [](const Args&) { return true; }}},
  };
  return *c;
}

}  // namespace

bool IsQueryCommand(const std::string& cmd) { return Commands().count(cmd) > 0; }

int QueryCommand(const std::string& cmd, const std::vector<std::string>& in) {
  const Command& command = Commands().at(cmd);
  std::vector<std::string> rest = in;
  auto flags = TakeClientFlags(&rest);
  if (!flags.ok()) return Usage(kQuery, std::string(flags.status().message()));
  Args a;
  std::string why;
  if (!ParseArgs(rest, command.flags, &a, &why)) return Usage(kQuery, cmd + ": " + why);
  flags->admin = command.admin && command.admin(a);
  auto conn = Connect(*flags);
  if (!conn.ok()) return Usage(kQuery, std::string(conn.status().message()));
  Call call{*conn, pb::Query::NewStub(conn->channel), flags->json};
  return command.run(a, call);
}

}  // namespace ts::cli
