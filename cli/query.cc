// The query commands (commands.h, AddQueryCommands): one flags struct and one handler each
// over the Query API's stub, declared at the bottom.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/gate_rules.h"
#include "cli/query_text.h"
#include "cli/usage.h"
#include "proto/names.h"
#include "services/query/text_tables.h"
#include "touchstone/v1/query.grpc.pb.h"

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;

struct Call {
  Connection conn;
  std::unique_ptr<pb::Query::Stub> stub;
  bool json = false;
};

void Print(const Call& c, const google::protobuf::Message& m, const std::string& text) {
  std::printf("%s", c.json ? (MessageJson(m) + "\n").c_str() : text.c_str());
}

// --limit and --page-token, for the list commands.
struct Page {
  int64_t limit = 0;  // 0: every page (or the server's page size where one page is asked for)
  std::string token;
};

void AddPageFlags(flags::Command& c, Page* p) {
  c.Option("--limit", &p->limit, "N", "at most N rows (one page)").Range(1, 100000).Default("");
  c.Option("--page-token", &p->token, "T", "the page after the one that answered this token");
}

pb::GroupBy GroupBy(const std::string& by) {
  if (by == "family") return pb::GROUP_BY_FAMILY;
  if (by == "arch" || by == "class") return pb::GROUP_BY_ARCH;
  return pb::GROUP_BY_TASK;
}

void AddGroupByFlag(flags::Command& c, std::string* by) {
  c.Option("--by", by, "task|family|arch", "the rows: one per task, family or class")
      .Choices({"task", "family", "arch", "class"});
}

// Connects with the command's client flags and runs `body` on the call.
int WithQuery(ClientFlags client, bool admin, const std::function<int(Call&)>& body) {
  client.admin = admin;
  auto conn = Connect(client);
  if (!conn.ok()) return Usage(std::string(conn.status().message()));
  Call call{*conn, pb::Query::NewStub(conn->channel), client.json()};
  return body(call);
}

// The action of a query command: its flags (a struct with a `client` member) and its handler.
template <typename Flags>
flags::Action QueryAction(std::shared_ptr<Flags> f, int (*run)(const Flags&, Call&),
                          bool admin = false) {
  return
      [f, run, admin] { return WithQuery(f->client, admin, [&](Call& c) { return run(*f, c); }); };
}

struct SweepsFlags {
  ClientFlags client;
  std::string profile, state, name;
  Page page;
};

int Sweeps(const SweepsFlags& f, Call& c) {
  pb::ListSweepsRequest req;
  req.set_profile(f.profile);
  req.set_state(f.state);
  req.set_name_contains(f.name);
  req.set_page_token(f.page.token);
  req.set_page_size(static_cast<int32_t>(f.page.limit));
  pb::ListSweepsResponse resp;
  grpc::Status st = c.stub->ListSweeps(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("ListSweeps", st);
  Print(c, resp, SweepsText(resp));
  return 0;
}

struct SummaryFlags {
  ClientFlags client;
  int64_t sweep = 0;
  std::string by = "task";
  std::vector<std::string> tasks, families, archs;
  bool perf = false;
};

int Summary(const SummaryFlags& f, Call& c) {
  pb::GetSummaryRequest req;
  req.set_sweep_id(f.sweep);
  req.set_group_by(GroupBy(f.by));
  for (const auto& t : f.tasks) req.mutable_filter()->add_tasks(t);
  for (const auto& x : f.families) req.mutable_filter()->add_families(x);
  for (const auto& x : f.archs) req.mutable_filter()->add_archs(x);
  pb::Summary resp;
  grpc::Status st = c.stub->GetSummary(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("GetSummary", st);
  Print(c, resp, f.perf ? query::FormatPerfSummary(resp) : query::FormatSummary(resp));
  return 0;
}

struct ModelFlags {
  ClientFlags client;
  std::string id;
  int64_t last = 0;
};

int Model(const ModelFlags& f, Call& c) {
  pb::GetModelRequest req;
  req.set_model_id(f.id);
  req.set_last(static_cast<int32_t>(f.last));
  pb::ModelHistory resp;
  grpc::Status st = c.stub->GetModel(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("GetModel", st);
  Print(c, resp, ModelText(resp));
  return 0;
}

struct OpsFlags {
  ClientFlags client;
  int64_t sweep = 0;
  std::string mode = "eager";
  Page page;
};

int Ops(const OpsFlags& f, Call& c) {
  pb::OpDemandRequest req;
  req.set_sweep_id(f.sweep);
  req.set_mode(*proto::ModeFromName(f.mode));
  req.set_page_size(static_cast<int32_t>(f.page.limit));
  req.set_page_token(f.page.token);
  pb::OpDemandResponse resp;
  grpc::Status st = c.stub->OpDemand(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("OpDemand", st);
  Print(c, resp, query::FormatOpDemand(resp));
  return 0;
}

struct BreaksFlags {
  ClientFlags client;
  int64_t sweep = 0;
  Page page;
};

int Breaks(const BreaksFlags& f, Call& c) {
  pb::GraphBreaksRequest req;
  req.set_sweep_id(f.sweep);
  req.set_page_size(static_cast<int32_t>(f.page.limit));
  req.set_page_token(f.page.token);
  pb::GraphBreaksResponse resp;
  grpc::Status st = c.stub->GraphBreaks(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("GraphBreaks", st);
  Print(c, resp, query::FormatGraphBreaks(resp));
  return 0;
}

struct SuspectsFlags {
  ClientFlags client;
  int64_t sweep = 0;
  std::string mode;  // "": every mode
  Page page;
};

// Ops ranked by the models they break (every mode unless --mode).
int Suspects(const SuspectsFlags& f, Call& c) {
  pb::SuspectOpsRequest req;
  req.set_sweep_id(f.sweep);
  if (!f.mode.empty()) req.set_mode(*proto::ModeFromName(f.mode));
  req.set_page_size(static_cast<int32_t>(f.page.limit));
  req.set_page_token(f.page.token);
  pb::SuspectOpsResponse resp;
  grpc::Status st = c.stub->SuspectOps(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("SuspectOps", st);
  Print(c, resp, query::FormatSuspectOps(resp));
  return 0;
}

struct CompareFlags {
  ClientFlags client;
  int64_t base = 0, head = 0;
  std::string by = "task";
  Page page;
};

// Every page unless --limit: the changes of all pages, in order, with the first page's counts
// and groups.
int Compare(const CompareFlags& f, Call& c) {
  pb::CompareSweepsRequest req;
  req.set_base_sweep_id(f.base);
  req.set_head_sweep_id(f.head);
  req.set_group_by(GroupBy(f.by));
  req.set_page_size(static_cast<int32_t>(f.page.limit));
  req.set_page_token(f.page.token);
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
    if (f.page.limit > 0 || page.next_page_token().empty()) break;
    req.set_page_token(page.next_page_token());
  }
  Print(c, all, query::FormatCompare(all));
  return 0;
}

struct GateFlags {
  ClientFlags client;
  int64_t sweep = 0;
  std::string rules;
};

int Gate(const GateFlags& f, Call& c) {
  pb::GateRequest req;
  req.set_sweep_id(f.sweep);
  std::ifstream in(f.rules);
  if (!in) return Usage("--rules: cannot read " + f.rules);
  std::stringstream ss;
  ss << in.rdbuf();
  auto rules = ParseGateRules(ss.str());
  if (!rules.ok()) {
    return Error(2, "--rules " + f.rules + ": " + std::string(rules.status().message()));
  }
  *req.mutable_rules() = *rules;
  pb::GateResponse resp;
  grpc::Status st = c.stub->Gate(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("Gate", st);
  Print(c, resp, query::FormatGate(resp));
  return resp.pass() ? 0 : 1;
}

struct AlertsFlags {
  ClientFlags client;
  std::string state;
  Page page;
};

// Alerts, newest first (every page unless --limit).
int Alerts(const AlertsFlags& f, Call& c) {
  pb::ListAlertsRequest req;
  req.set_state(f.state);
  req.set_page_size(static_cast<int32_t>(f.page.limit));
  req.set_page_token(f.page.token);
  pb::ListAlertsResponse all;
  for (;;) {
    pb::ListAlertsResponse page;
    grpc::Status st = c.stub->ListAlerts(c.conn.Context().get(), req, &page);
    if (!st.ok()) return RpcFailed("ListAlerts", st);
    for (auto& alert : *page.mutable_alerts()) *all.add_alerts() = std::move(alert);
    all.set_next_page_token(page.next_page_token());
    if (f.page.limit > 0 || page.next_page_token().empty()) break;
    req.set_page_token(page.next_page_token());
  }
  Print(c, all, AlertsText(all));
  return 0;
}

struct AckFlags {
  ClientFlags client;
  int64_t id = 0;
  std::string note, by;
};

// `touchstone alerts ack ID --note TEXT [--by NAME]`: open -> acknowledged.
int AckAlert(const AckFlags& f, Call& c) {
  pb::AckAlertRequest req;
  req.set_alert_id(f.id);
  req.set_note(f.note);
  req.set_by(f.by);
  pb::Alert resp;
  grpc::Status st = c.stub->AckAlert(c.conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("AckAlert", st);
  pb::ListAlertsResponse one;
  *one.add_alerts() = resp;
  Print(c, resp, AlertsText(one));
  return 0;
}

struct QuarantineFlags {
  ClientFlags client;
};

// `touchstone alerts quarantine`: the quarantined models and modes.
int Quarantine(const QuarantineFlags&, Call& c) {
  pb::ListQuarantineResponse resp;
  grpc::Status st =
      c.stub->ListQuarantine(c.conn.Context().get(), pb::ListQuarantineRequest(), &resp);
  if (!st.ok()) return RpcFailed("ListQuarantine", st);
  Print(c, resp, QuarantineText(resp));
  return 0;
}

struct WatchFlags {
  ClientFlags client;
  std::string state;
  int64_t updates = 0;  // 0: until Ctrl-C
};

// `touchstone alerts watch [--state S] [--updates N]`: the snapshot, then each change as it
// comes, until Ctrl-C (or N messages, the snapshot included). JSON: one message per line.
int Watch(const WatchFlags& f, Call& c) {
  pb::WatchAlertsRequest req;
  req.set_state(f.state);
  auto ctx = c.conn.Context(365.0 * 24 * 3600);
  auto reader = c.stub->WatchAlerts(ctx.get(), req);
  pb::AlertsUpdate u;
  int64_t n = 0;
  while (reader->Read(&u)) {
    std::printf("%s", c.json ? (MessageJson(u, /*multiline=*/false) + "\n").c_str()
                             : AlertsUpdateText(u).c_str());
    std::fflush(stdout);
    if (f.updates > 0 && ++n >= f.updates) {
      ctx->TryCancel();
      break;
    }
  }
  grpc::Status st = reader->Finish();
  if (f.updates > 0 && n >= f.updates) return 0;
  if (!st.ok()) return RpcFailed("WatchAlerts", st);
  return 0;
}

struct DetectFlags {
  ClientFlags client;
  int64_t sweep = 0, baseline = 0;
};

// Regression detection of a done sweep against its baseline, on demand.
int Detect(const DetectFlags& f, Call& c) {
  pb::DetectRegressionsRequest req;
  req.set_sweep_id(f.sweep);
  req.set_baseline_sweep_id(f.baseline);
  pb::DetectRegressionsResponse resp;
  grpc::Status st = c.stub->DetectRegressions(c.conn.Context(300).get(), req, &resp);
  if (!st.ok()) return RpcFailed("DetectRegressions", st);
  Print(c, resp, DetectText(resp));
  return 0;
}

constexpr const char* kExitNotes =
    "exit: 0 answered, 2 usage or a request the scheduler refused (the message names the\n"
    "field), 3 no answer (scheduler unreachable, timeout)";

void AddAlertsCommands(flags::Command& root) {
  auto list = std::make_shared<AlertsFlags>();
  flags::Command& alerts =
      root.Add("alerts", "regression alerts (ListAlerts), newest first, every page unless --limit",
               QueryAction(list, Alerts));
  alerts.Option("--state", &list->state, "open|acknowledged|resolved", "only alerts in this state")
      .Choices({"open", "acknowledged", "resolved"});
  AddPageFlags(alerts, &list->page);
  AddClientFlags(alerts, &list->client);
  alerts.Notes(kExitNotes);

  auto ack = std::make_shared<AckFlags>();
  flags::Command& a = alerts.Add("ack", "acknowledge an alert (admin token)",
                                 QueryAction(ack, AckAlert, /*admin=*/true));
  a.Positional("ID", &ack->id, "the alert").Required().Min(1);
  a.Option("--note", &ack->note, "TEXT", "why (shown on the alert)").Required();
  a.Option("--by", &ack->by, "NAME", "who acknowledges");
  AddClientFlags(a, &ack->client);

  auto watch = std::make_shared<WatchFlags>();
  flags::Command& w = alerts.Add(
      "watch", "WatchAlerts: the snapshot, then each change as it comes (JSON: one a line)",
      QueryAction(watch, Watch));
  w.Option("--state", &watch->state, "open|acknowledged|resolved", "only alerts in this state")
      .Choices({"open", "acknowledged", "resolved"});
  w.Option("--updates", &watch->updates, "N", "stop after N messages (default: at Ctrl-C)")
      .Range(1, 1e9)
      .Default("");
  AddClientFlags(w, &watch->client);

  auto quarantine = std::make_shared<QuarantineFlags>();
  flags::Command& q = alerts.Add(
      "quarantine", "the quarantined models and modes (flaky twice in 5 sweeps; 3 passes release)",
      QueryAction(quarantine, Quarantine));
  AddClientFlags(q, &quarantine->client);
}

// model, ops, breaks, suspects: what a sweep says about a model and about ops.
void AddModelAndOpCommands(flags::Command& root) {
  {
    auto f = std::make_shared<ModelFlags>();
    flags::Command& c = root.Add(
        "model", "a model's record in its last sweeps: statuses, errors, rmse, suspects, ...",
        QueryAction(f, Model));
    c.Positional("ID", &f->id, "the model id (org/name)").Required();
    c.Option("--last", &f->last, "N", "its last N sweeps").Range(1, 100).Default("");
    AddClientFlags(c, &f->client);
    c.Notes(kExitNotes);
  }
  {
    auto f = std::make_shared<OpsFlags>();
    flags::Command& c =
        root.Add("ops", "ops ranked by the models they block, and how many they block alone",
                 QueryAction(f, Ops));
    c.Positional("SWEEP", &f->sweep, "the sweep id").Required().Min(1);
    c.Option("--mode", &f->mode, "eager|compile", "the mode").Choices({"eager", "compile"});
    AddPageFlags(c, &f->page);
    AddClientFlags(c, &f->client);
    c.Notes(kExitNotes);
  }
  {
    auto f = std::make_shared<BreaksFlags>();
    flags::Command& c = root.Add("breaks", "graph-break reasons ranked, with example models",
                                 QueryAction(f, Breaks));
    c.Positional("SWEEP", &f->sweep, "the sweep id").Required().Min(1);
    AddPageFlags(c, &f->page);
    AddClientFlags(c, &f->client);
    c.Notes(kExitNotes);
  }
  {
    auto f = std::make_shared<SuspectsFlags>();
    flags::Command& c = root.Add(
        "suspects", "ops ranked by the models they break (SuspectOps), every mode unless --mode",
        QueryAction(f, Suspects));
    c.Positional("SWEEP", &f->sweep, "the sweep id").Required().Min(1);
    c.Option("--mode", &f->mode, "eager|compile|train", "only this mode").Choices(ModeNames());
    AddPageFlags(c, &f->page);
    AddClientFlags(c, &f->client);
    c.Notes(kExitNotes);
  }
}

}  // namespace

void AddQueryCommands(flags::Command& root) {
  {
    auto f = std::make_shared<SweepsFlags>();
    flags::Command& c = root.Add("sweeps", "sweeps, newest first", QueryAction(f, Sweeps));
    c.Option("--profile", &f->profile, "NAME", "only sweeps of this profile name");
    c.Option("--state", &f->state, "STATE", "only sweeps in this state (running, done, ...)");
    c.Option("--name", &f->name, "SUBSTR", "only sweeps whose name holds this");
    AddPageFlags(c, &f->page);
    AddClientFlags(c, &f->client);
    c.Notes(kExitNotes);
  }
  {
    auto f = std::make_shared<SummaryFlags>();
    flags::Command& c = root.Add("summary", "the conformance table (the text `sweep` printed)",
                                 QueryAction(f, Summary));
    c.Positional("SWEEP", &f->sweep, "the sweep id").Required().Min(1);
    AddGroupByFlag(c, &f->by);
    c.Option("--task", &f->tasks, "T", "only this task");
    c.Option("--family", &f->families, "F", "only this family");
    c.Option("--arch", &f->archs, "A", "only this class");
    c.Flag("--perf", &f->perf,
           "device performance instead: models with a speedup, geomean speedup, median MFU, "
           "mean compression");
    AddClientFlags(c, &f->client);
    c.Notes(kExitNotes);
  }
  AddModelAndOpCommands(root);
  {
    auto f = std::make_shared<CompareFlags>();
    flags::Command& c =
        root.Add("compare", "flips per model and mode, per-group deltas, models that came or went",
                 QueryAction(f, Compare));
    c.Positional("BASE", &f->base, "the base sweep id").Required().Min(1);
    c.Positional("HEAD", &f->head, "the head sweep id").Required().Min(1);
    AddGroupByFlag(c, &f->by);
    AddPageFlags(c, &f->page);
    AddClientFlags(c, &f->client);
    c.Notes(kExitNotes);
  }
  {
    auto f = std::make_shared<GateFlags>();
    flags::Command& c = root.Add("gate", "the release gate: every failed check with its rule",
                                 QueryAction(f, Gate));
    c.Positional("SWEEP", &f->sweep, "the sweep id").Required().Min(1);
    c.Option("--rules", &f->rules, "FILE", "the rules (JSON; cli/README.md)").Required().File();
    AddClientFlags(c, &f->client);
    c.Notes(
        "exit: 0 pass, 1 fail, 2 usage or refused (a bad rules file names the key), 3 no "
        "answer\n"
        "rules: {\"baseline\": ID, \"min\": {\"eager\": 99.0, \"compile\": 0, \"train\": 0, "
        "\"opcov\": 0},\n"
        "  \"min_by_task\": {\"text-generation\": {\"eager\": 90.0}}, \"min_by_class\": {...},\n"
        "  \"max_new_failures\": 0, \"forbid\": [\"crash\", \"timeout\"], \"must_pass\": "
        "[\"model-id\"]}, every key optional");
  }
  AddAlertsCommands(root);
  {
    auto f = std::make_shared<DetectFlags>();
    flags::Command& c = root.Add(
        "detect", "regression detection on a done sweep against its baseline (admin token)",
        QueryAction(f, Detect, /*admin=*/true));
    c.Positional("SWEEP", &f->sweep, "the sweep id").Required().Min(1);
    c.Option("--baseline", &f->baseline, "B", "the baseline sweep (default: the sweep's own)")
        .Min(1)
        .Default("");
    AddClientFlags(c, &f->client);
    c.Notes(kExitNotes);
  }
}

}  // namespace ts::cli
