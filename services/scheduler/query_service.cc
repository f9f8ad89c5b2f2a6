#include "services/scheduler/query_service.h"

#include <chrono>
#include <map>
#include <memory>
#include <set>

#include <grpcpp/alarm.h>

#include "proto/names.h"
#include "services/common/field_limits.h"
#include "services/common/grpc_status.h"
#include "services/query/compare.h"
#include "services/query/gate.h"
#include "services/query/request_checks.h"
#include "services/query/summary_builder.h"

namespace ts::scheduler {

namespace {

// ---- The methods, on a pool thread ----

absl::Status ListSweeps(store::Store& s, const pb::ListSweepsRequest& r,
                        pb::ListSweepsResponse* out) {
  auto size = query::PageSize(r.page_size(), 50, 1000);
  auto before = query::DecodePageToken("ListSweeps", r.page_token());
  if (!size.ok()) return size.status();
  if (!before.ok()) return before.status();
  auto sweeps = s.ListSweeps(r, *before, *size + 1);
  if (!sweeps.ok()) return sweeps.status();
  const bool more = static_cast<int>(sweeps->size()) > *size;
  if (more) sweeps->resize(*size);
  for (auto& sw : *sweeps) *out->add_sweeps() = std::move(sw);
  if (more) {
    const int64_t last = out->sweeps(out->sweeps_size() - 1).sweep_id();
    out->set_next_page_token(query::EncodePageToken("ListSweeps", last));
  }
  return absl::OkStatus();
}

absl::Status GetSummary(store::Store& s, const pb::GetSummaryRequest& r, pb::Summary* out) {
  auto groups = s.SweepGroups(r.sweep_id(), "sweep_id");
  if (!groups.ok()) return groups.status();
  auto info = s.GetSweepInfo(r.sweep_id(), "sweep_id");
  if (!info.ok()) return info.status();
  query::SummaryBuilder b(r.group_by(), {info->modes().begin(), info->modes().end()},
                          r.filter());
  for (const auto& g : *groups) b.AddTally(g);  // verdicts, opcov and perf
  if (auto st = b.CheckFilterMatched(r.sweep_id()); !st.ok()) return st;
  *out = b.Build();
  out->set_sweep_id(r.sweep_id());
  out->set_state(info->state());
  return absl::OkStatus();
}

absl::Status GetModel(store::Store& s, const pb::GetModelRequest& r, pb::ModelHistory* out) {
  const int last = r.last() == 0 ? 10 : std::min(r.last(), 100);
  auto h = s.ModelHistory(r.model_id(), last);
  if (!h.ok()) return h.status();
  *out = std::move(*h);
  return absl::OkStatus();
}

std::string OpDemandMode(pb::Mode m) { return m == pb::MODE_COMPILE ? "compile" : "eager"; }

absl::Status OpDemand(store::Store& s, const pb::OpDemandRequest& r, pb::OpDemandResponse* out) {
  auto size = query::PageSize(r.page_size(), 50, 1000);
  auto offset = query::DecodePageToken("OpDemand", r.page_token());
  if (!size.ok()) return size.status();
  if (!offset.ok()) return offset.status();
  auto d = s.OpDemand(r.sweep_id(), OpDemandMode(r.mode()), *offset, *size + 1);
  if (!d.ok()) return d.status();
  *out = std::move(*d);
  if (out->ops_size() > *size) {
    out->mutable_ops()->RemoveLast();
    out->set_next_page_token(query::EncodePageToken("OpDemand", *offset + *size));
  }
  return absl::OkStatus();
}

absl::Status GraphBreaks(store::Store& s, const pb::GraphBreaksRequest& r,
                         pb::GraphBreaksResponse* out) {
  auto size = query::PageSize(r.page_size(), 50, 1000);
  auto offset = query::DecodePageToken("GraphBreaks", r.page_token());
  if (!size.ok()) return size.status();
  if (!offset.ok()) return offset.status();
  auto b = s.GraphBreaks(r.sweep_id(), *offset, *size + 1);
  if (!b.ok()) return b.status();
  *out = std::move(*b);
  if (out->reasons_size() > *size) {
    out->mutable_reasons()->RemoveLast();
    out->set_next_page_token(query::EncodePageToken("GraphBreaks", *offset + *size));
  }
  return absl::OkStatus();
}

absl::Status SuspectOps(store::Store& s, const pb::SuspectOpsRequest& r,
                        pb::SuspectOpsResponse* out) {
  auto size = query::PageSize(r.page_size(), 50, 1000);
  auto offset = query::DecodePageToken("SuspectOps", r.page_token());
  if (!size.ok()) return size.status();
  if (!offset.ok()) return offset.status();
  auto d = s.SuspectOps(r.sweep_id(), r.mode(), *offset, *size + 1);
  if (!d.ok()) return d.status();
  *out = std::move(*d);
  if (out->ops_size() > *size) {
    out->mutable_ops()->RemoveLast();
    out->set_next_page_token(query::EncodePageToken("SuspectOps", *offset + *size));
  }
  return absl::OkStatus();
}

absl::Status ListAlerts(store::Store& s, const pb::ListAlertsRequest& r,
                        pb::ListAlertsResponse* out) {
  auto size = query::PageSize(r.page_size(), 50, 1000);
  auto before = query::DecodePageToken("ListAlerts", r.page_token());
  if (!size.ok()) return size.status();
  if (!before.ok()) return before.status();
  auto alerts = s.ListAlerts(r.state(), *before, *size + 1);
  if (!alerts.ok()) return alerts.status();
  const bool more = static_cast<int>(alerts->size()) > *size;
  if (more) alerts->resize(*size);
  for (auto& a : *alerts) *out->add_alerts() = std::move(a);
  if (more) {
    const int64_t last = out->alerts(out->alerts_size() - 1).alert_id();
    out->set_next_page_token(query::EncodePageToken("ListAlerts", last));
  }
  return absl::OkStatus();
}

absl::Status AckAlert(store::Store& s, const pb::AckAlertRequest& r, pb::Alert* out) {
  auto a = s.AckAlert(r.alert_id(), r.note(), r.by());
  if (!a.ok()) return a.status();
  *out = std::move(*a);
  return absl::OkStatus();
}

absl::Status ListQuarantine(store::Store& s, const pb::ListQuarantineRequest&,
                            pb::ListQuarantineResponse* out) {
  auto q = s.ListQuarantine();
  if (!q.ok()) return q.status();
  for (auto& e : *q) *out->add_entries() = std::move(e);
  return absl::OkStatus();
}

// Marks the regressed changes whose model and mode is quarantined now.
absl::Status MarkQuarantined(store::Store& s,
                             google::protobuf::RepeatedPtrField<pb::ModelChange>* changes) {
  auto q = s.ListQuarantine();
  if (!q.ok()) return q.status();
  std::set<std::pair<std::string, int>> in;
  for (const auto& e : *q) in.insert({e.model_id(), e.mode()});
  for (auto& c : *changes) {
    if (c.kind() == pb::ModelChange::KIND_REGRESSED && in.count({c.model_id(), c.mode()})) {
      c.set_quarantined(true);
    }
  }
  return absl::OkStatus();
}

absl::Status DetectRegressions(store::Store& s, const pb::DetectRegressionsRequest& r,
                               pb::DetectRegressionsResponse* out) {
  auto d = s.DetectRegressions(r.sweep_id(), r.baseline_sweep_id());
  if (!d.ok()) return d.status();
  *out = std::move(*d);
  return absl::OkStatus();
}

// The head sweep's confirmations of its flips, when its baseline is `base`.
absl::StatusOr<query::Confirmations> ConfirmationsVs(store::Store& s, const pb::SweepInfo& head,
                                                     int64_t base) {
  query::Confirmations out;
  if (head.baseline_sweep_id() != base) return out;
  auto regs = s.Regressions(head.sweep_id());
  if (!regs.ok()) return regs.status();
  for (auto& g : *regs) out[{g.model_id, g.mode}] = g.confirmation;
  return out;
}

// Two sweeps compared: their counters and differing models (SQL), their modes, the head's
// confirmations.
absl::StatusOr<pb::CompareSweepsResponse> CompareOf(store::Store& s, int64_t base_id,
                                                    const char* base_field, int64_t head_id,
                                                    const char* head_field, pb::GroupBy by,
                                                    const pb::ResultFilter& filter) {
  auto reads = s.SweepPair(base_id, base_field, head_id, head_field);
  if (!reads.ok()) return reads.status();
  auto base_info = s.GetSweepInfo(base_id, base_field);
  if (!base_info.ok()) return base_info.status();
  auto head_info = s.GetSweepInfo(head_id, head_field);
  if (!head_info.ok()) return head_info.status();
  query::CompareInput in;
  in.base_groups = &reads->base_groups;
  in.head_groups = &reads->head_groups;
  in.differing = &reads->differing;
  in.base_modes.assign(base_info->modes().begin(), base_info->modes().end());
  in.head_modes.assign(head_info->modes().begin(), head_info->modes().end());
  auto conf = ConfirmationsVs(s, *head_info, base_id);
  if (!conf.ok()) return conf.status();
  in.confirmations = std::move(*conf);
  in.group_by = by;
  in.filter = filter;
  pb::CompareSweepsResponse out = query::Compare(in);
  out.set_base_sweep_id(base_id);
  out.set_head_sweep_id(head_id);
  return out;
}

absl::Status CompareSweeps(store::Store& s, const pb::CompareSweepsRequest& r,
                           pb::CompareSweepsResponse* out) {
  auto size = query::PageSize(r.page_size(), 1000, 10000);
  auto offset = query::DecodePageToken("CompareSweeps", r.page_token());
  if (!size.ok()) return size.status();
  if (!offset.ok()) return offset.status();
  auto c = CompareOf(s, r.base_sweep_id(), "base_sweep_id", r.head_sweep_id(), "head_sweep_id",
                     r.group_by(), r.filter());
  if (!c.ok()) return c.status();
  if (auto st = MarkQuarantined(s, c->mutable_changes()); !st.ok()) return st;
  *out = std::move(*c);
  if (*offset > 0) out->clear_groups();
  auto* changes = out->mutable_changes();
  const int n = changes->size();
  const int from = static_cast<int>(std::min<int64_t>(*offset, n));
  const int to = std::min(n, from + *size);
  changes->DeleteSubrange(to, n - to);
  changes->DeleteSubrange(0, from);
  if (to < n) out->set_next_page_token(query::EncodePageToken("CompareSweeps", to));
  return absl::OkStatus();
}

absl::Status Gate(store::Store& s, const pb::GateRequest& r, pb::GateResponse* out) {
  auto reads = s.ReadForGate(r.sweep_id(), "sweep_id",
                             {r.rules().must_pass().begin(), r.rules().must_pass().end()},
                             {r.rules().forbid().begin(), r.rules().forbid().end()},
                             query::kGateExamples);
  if (!reads.ok()) return reads.status();
  auto info = s.GetSweepInfo(r.sweep_id(), "sweep_id");
  if (!info.ok()) return info.status();
  query::GateInputs in;
  in.sweep_id = r.sweep_id();
  in.sweep_state = info->state();
  in.modes.assign(info->modes().begin(), info->modes().end());
  in.groups = &reads->groups;
  in.must_pass = std::move(reads->must_pass);
  in.forbid_examples = std::move(reads->forbid_examples);
  // max_new_failures counts confirmed flips, and reruns confirm them only against the sweep's
  // own baseline: that is the one it counts against.
  pb::GateRules rules = r.rules();
  const int64_t own = info->baseline_sweep_id();
  if (rules.baseline_sweep_id() == 0) rules.set_baseline_sweep_id(own);
  if (rules.has_max_new_failures()) {
    if (own == 0) {
      return absl::InvalidArgumentError(
          "rules.max_new_failures: sweep " + std::to_string(r.sweep_id()) +
          " was created without a baseline, so none of its flips was confirmed by reruns");
    }
    if (rules.baseline_sweep_id() != own) {
      return absl::InvalidArgumentError(
          "rules.baseline_sweep_id: sweep " + std::to_string(r.sweep_id()) +
          "'s flips were confirmed against sweep " + std::to_string(own) + ", not " +
          std::to_string(rules.baseline_sweep_id()) +
          "; max_new_failures counts confirmed flips, so give " + std::to_string(own) + " or 0");
    }
  }
  const int64_t base = rules.baseline_sweep_id();
  if (rules.has_max_perf_regressions()) {
    if (base == 0) {
      return absl::InvalidArgumentError("rules.max_perf_regressions: sweep " +
                                        std::to_string(r.sweep_id()) +
                                        " has no baseline; give rules.baseline_sweep_id");
    }
    auto perf = s.PerfRegressions(r.sweep_id(), base);
    if (!perf.ok()) return perf.status();
    in.perf_regressions = std::move(*perf);
  }
  if (base > 0) {
    auto c = CompareOf(s, base, "rules.baseline_sweep_id", r.sweep_id(), "sweep_id",
                       pb::GROUP_BY_TASK, {});
    if (!c.ok()) return c.status();
    if (auto st = MarkQuarantined(s, c->mutable_changes()); !st.ok()) return st;
    for (auto& ch : *c->mutable_changes()) {
      if (ch.kind() == pb::ModelChange::KIND_REGRESSED) in.regressed.push_back(std::move(ch));
    }
  }
  *out = query::EvaluateGate(rules, in);
  return absl::OkStatus();
}

}  // namespace

// ---- WatchAlerts ----

// The alerts changed since the last poll, each sent once per version (alert_id, updated_at).
// A change is stamped with its transaction's start, so an alert committed late can carry a
// stamp older than what this stream has seen: each poll re-reads a window reaching
// kLagMicros behind the newest stamp seen (detection's transaction takes seconds, not minutes)
// and sends only versions it has not sent.
class AlertWatch {
 public:
  explicit AlertWatch(std::string state) : state_(std::move(state)) {}

  absl::Status Poll(store::Store& s, pb::AlertsUpdate* msg, bool* write, bool*) {
    msg->Clear();
    if (!snapshot_sent_) {
      auto all = s.ListAlerts(state_, 0, 1000);
      if (!all.ok()) return all.status();
      for (auto& a : *all) {
        Seen(a);
        *msg->add_alerts() = std::move(a);
      }
      // Alerts outside the watched state are seen too: only their later changes are news.
      auto rest = s.AlertsChangedSince(newest_ - kLagMicros);
      if (!rest.ok()) return rest.status();
      for (const auto& a : *rest) Seen(a);
      msg->set_snapshot(true);
      snapshot_sent_ = true;
      *write = true;
      return absl::OkStatus();
    }
    auto changed = s.AlertsChangedSince(newest_ - kLagMicros);
    if (!changed.ok()) return changed.status();
    for (auto& a : *changed) {
      if (!Seen(a)) continue;
      *msg->add_alerts() = std::move(a);
    }
    *write = msg->alerts_size() > 0;
    return absl::OkStatus();
  }

 private:
  static constexpr int64_t kLagMicros = 120LL * 1000000;

  static int64_t Micros(const pb::Alert& a) {
    return a.updated_at().seconds() * 1000000 + a.updated_at().nanos() / 1000;
  }
  // Records the alert's version; true when it is new to this stream.
  bool Seen(const pb::Alert& a) {
    const int64_t us = Micros(a);
    newest_ = std::max(newest_, us);
    auto [it, inserted] = sent_.emplace(a.alert_id(), us);
    if (inserted) return true;
    if (it->second == us) return false;
    it->second = us;
    return true;
  }

  std::string state_;
  bool snapshot_sent_ = false;
  int64_t newest_ = 0;                 // the newest updated_at seen
  std::map<int64_t, int64_t> sent_;    // alert_id -> updated_at sent
};

// ---- The service ----

QueryService::QueryService(StorePool* pool, Admit admit, Admit admit_writes)
    : pool_(pool), admit_(std::move(admit)), admit_writes_(std::move(admit_writes)) {}

QueryService::~QueryService() { Shutdown(); }

void QueryService::Shutdown() {
  std::lock_guard<std::mutex> l(mu_);
  stopping_ = true;
  for (QueryStream* w : watches_) {
    w->Stop(grpc::Status(grpc::StatusCode::UNAVAILABLE, "scheduler shutting down; retry"));
  }
}

void QueryService::Forget(QueryStream* w) {
  std::lock_guard<std::mutex> l(mu_);
  watches_.erase(w);
}

template <typename Msg>
grpc::ServerWriteReactor<Msg>* QueryService::OpenStream(
    grpc::CallbackServerContext* ctx, absl::Status checked, int interval_ms,
    typename PollStream<Msg>::PollFn poll) {
  absl::Status st = admit_ ? admit_(ctx) : absl::OkStatus();
  if (st.ok()) st = checked;
  std::unique_lock<std::mutex> l(mu_);
  if (st.ok() && stopping_) st = absl::UnavailableError("scheduler shutting down; retry");
  if (!st.ok()) {
    l.unlock();
    struct Refuse final : grpc::ServerWriteReactor<Msg> {
      explicit Refuse(const absl::Status& s) { this->Finish(common::ToGrpcStatus(s)); }
      void OnDone() override { delete this; }
    };
    return new Refuse(st);
  }
  auto* w = new PollStream<Msg>(pool_, interval_ms, std::move(poll),
                                [this](QueryStream* q) { Forget(q); });
  watches_.insert(w);
  l.unlock();
  w->Start();
  return w;
}

namespace {
// Every string's limits (services/common/field_limits.h), then the request's own checks.
template <typename Req>
absl::Status Checked(const Req& r) {
  absl::Status st = common::CheckStrings(r);
  return st.ok() ? query::Check(r) : st;
}
}  // namespace

template <typename Req, typename Resp, typename Fn>
grpc::ServerUnaryReactor* QueryService::Handle(const char* method,
                                               grpc::CallbackServerContext* ctx, const Req* req,
                                               Resp* resp, Fn fn, bool writes) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  const Admit& admit = writes ? admit_writes_ : admit_;
  absl::Status st = admit ? admit(ctx) : absl::OkStatus();
  if (st.ok()) st = Checked(*req);
  if (!st.ok()) {
    reactor->Finish(common::ToGrpcStatus(st));
    return reactor;
  }
  const bool queued = pool_->Submit([method, req, resp, reactor, fn](store::Store* s) {
    reactor->Finish(common::ToGrpcStatus(
        s ? fn(*s, *req, resp)
          : absl::UnavailableError(std::string(method) + ": database unreachable; retry")));
  });
  if (!queued) {
    reactor->Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                                 "query queue is full; retry with backoff"));
  }
  return reactor;
}

grpc::ServerUnaryReactor* QueryService::ListSweeps(grpc::CallbackServerContext* ctx,
                                                   const pb::ListSweepsRequest* req,
                                                   pb::ListSweepsResponse* resp) {
  return Handle("ListSweeps", ctx, req, resp, &scheduler::ListSweeps);
}

grpc::ServerUnaryReactor* QueryService::GetSummary(grpc::CallbackServerContext* ctx,
                                                   const pb::GetSummaryRequest* req,
                                                   pb::Summary* resp) {
  return Handle("GetSummary", ctx, req, resp, &scheduler::GetSummary);
}

grpc::ServerUnaryReactor* QueryService::GetModel(grpc::CallbackServerContext* ctx,
                                                 const pb::GetModelRequest* req,
                                                 pb::ModelHistory* resp) {
  return Handle("GetModel", ctx, req, resp, &scheduler::GetModel);
}

grpc::ServerUnaryReactor* QueryService::OpDemand(grpc::CallbackServerContext* ctx,
                                                 const pb::OpDemandRequest* req,
                                                 pb::OpDemandResponse* resp) {
  return Handle("OpDemand", ctx, req, resp, &scheduler::OpDemand);
}

grpc::ServerUnaryReactor* QueryService::GraphBreaks(grpc::CallbackServerContext* ctx,
                                                    const pb::GraphBreaksRequest* req,
                                                    pb::GraphBreaksResponse* resp) {
  return Handle("GraphBreaks", ctx, req, resp, &scheduler::GraphBreaks);
}

grpc::ServerUnaryReactor* QueryService::SuspectOps(grpc::CallbackServerContext* ctx,
                                                   const pb::SuspectOpsRequest* req,
                                                   pb::SuspectOpsResponse* resp) {
  return Handle("SuspectOps", ctx, req, resp, &scheduler::SuspectOps);
}

grpc::ServerUnaryReactor* QueryService::CompareSweeps(grpc::CallbackServerContext* ctx,
                                                      const pb::CompareSweepsRequest* req,
                                                      pb::CompareSweepsResponse* resp) {
  return Handle("CompareSweeps", ctx, req, resp, &scheduler::CompareSweeps);
}

grpc::ServerUnaryReactor* QueryService::Gate(grpc::CallbackServerContext* ctx,
                                             const pb::GateRequest* req, pb::GateResponse* resp) {
  return Handle("Gate", ctx, req, resp, &scheduler::Gate);
}

grpc::ServerUnaryReactor* QueryService::ListAlerts(grpc::CallbackServerContext* ctx,
                                                   const pb::ListAlertsRequest* req,
                                                   pb::ListAlertsResponse* resp) {
  return Handle("ListAlerts", ctx, req, resp, &scheduler::ListAlerts);
}

grpc::ServerUnaryReactor* QueryService::AckAlert(grpc::CallbackServerContext* ctx,
                                                 const pb::AckAlertRequest* req,
                                                 pb::Alert* resp) {
  return Handle("AckAlert", ctx, req, resp, &scheduler::AckAlert, /*writes=*/true);
}

grpc::ServerUnaryReactor* QueryService::DetectRegressions(
    grpc::CallbackServerContext* ctx, const pb::DetectRegressionsRequest* req,
    pb::DetectRegressionsResponse* resp) {
  return Handle("DetectRegressions", ctx, req, resp, &scheduler::DetectRegressions,
                /*writes=*/true);
}

grpc::ServerUnaryReactor* QueryService::ListQuarantine(grpc::CallbackServerContext* ctx,
                                                       const pb::ListQuarantineRequest* req,
                                                       pb::ListQuarantineResponse* resp) {
  return Handle("ListQuarantine", ctx, req, resp, &scheduler::ListQuarantine);
}

grpc::ServerWriteReactor<pb::SweepProgress>* QueryService::WatchSweep(
    grpc::CallbackServerContext* ctx, const pb::WatchSweepRequest* req) {
  const int64_t sweep_id = req->sweep_id();
  return OpenStream<pb::SweepProgress>(
      ctx, Checked(*req), query::WatchIntervalMs(req->interval_ms()),
      [sweep_id](store::Store& s, pb::SweepProgress* msg, bool* write, bool* last) {
        auto p = s.GetSweep(sweep_id);
        if (!p.ok()) return p.status();
        *msg = std::move(*p);
        *write = true;
        *last = msg->state() != "running";
        return absl::OkStatus();
      });
}

grpc::ServerWriteReactor<pb::AlertsUpdate>* QueryService::WatchAlerts(
    grpc::CallbackServerContext* ctx, const pb::WatchAlertsRequest* req) {
  auto watch = std::make_shared<AlertWatch>(req->state());
  return OpenStream<pb::AlertsUpdate>(
      ctx, Checked(*req), query::WatchIntervalMs(req->interval_ms()),
      [watch](store::Store& s, pb::AlertsUpdate* msg, bool* write, bool* last) {
        return watch->Poll(s, msg, write, last);
      });
}

}  // namespace ts::scheduler
