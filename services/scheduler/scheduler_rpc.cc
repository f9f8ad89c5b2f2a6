// The touchstone.v1.Scheduler RPCs: validated on gRPC's callback threads, answered on the pools.
#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "proto/names.h"
#include "services/scheduler/scheduler_impl.h"

namespace ts::scheduler {

grpc::ServerUnaryReactor* Scheduler::Impl::RegisterWorker(grpc::CallbackServerContext* ctx,
                                         const pb::RegisterWorkerRequest* req,
                                         pb::RegisterWorkerResponse* resp) {
  return Handle(lease_pool.get(), "RegisterWorker", ctx, req, resp, [this](store::Store& s, const auto& r, auto* out) {
    absl::Status st = Assign(s.RegisterWorker(r), out);
    if (st.ok()) Seen(out->worker_id());
    return st;
  });
}

grpc::ServerUnaryReactor* Scheduler::Impl::LeaseShard(grpc::CallbackServerContext* ctx,
                                     const pb::LeaseShardRequest* req,
                                     pb::LeaseShardResponse* resp) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  if (absl::Status st = Admit(ctx, "LeaseShard", *req); !st.ok()) {
    reactor->Finish(common::ToGrpcStatus(st));
    return reactor;
  }
  const LeaseWaiter waiter = Waiter(*req, resp, reactor, ctx);
  // Idle fleet: the queue was just seen empty and nothing here queued work since.
  if (QueueKnownEmpty() && IdleWorker(req->worker_id())) {
    Seen(req->worker_id());
    if (waiter.long_poll && Park(waiter)) return reactor;
    resp->set_retry_after_ms(kIdleRetryMs);
    metrics.idle_answers.Increment();
    Answer(reactor, "LeaseShard", absl::OkStatus(), waiter.t0);
    return reactor;
  }
  {
    std::lock_guard<std::mutex> l(lease_mu);
    lease_waiters.push_back(waiter);
    metrics.lease_calls_open.Set(static_cast<double>(++lease_calls_open));
  }
  if (!lease_pool->Submit([this](store::Store* s) { ServeLeases(s); })) {
    // Queue full: answer now unless a lease thread has already taken this call.
    bool mine = false;
    {
      std::lock_guard<std::mutex> l(lease_mu);
      for (auto it = lease_waiters.begin(); it != lease_waiters.end(); ++it) {
        if (it->reactor == reactor) {
          lease_waiters.erase(it);
          mine = true;
          break;
        }
      }
    }
    if (mine) {
      LeaseCallsAnswered(1);
      reactor->Finish(QueueFull());
    }
  }
  return reactor;
}

// One lease-pool task per LeaseShard call (or per batch of woken long polls). A task serves
// batches until the queue is empty, so a call whose own task could not be queued is still
// served; a task finding the queue already served is a no-op.
void Scheduler::Impl::ServeLeases(store::Store* s) {
  while (ServeLeaseBatch(s)) {
  }
}

bool Scheduler::Impl::ServeLeaseBatch(store::Store* s) {
  std::vector<LeaseWaiter> batch;
  {
    std::lock_guard<std::mutex> l(lease_mu);
    while (!lease_waiters.empty() && batch.size() < LeaseBatch()) {
      batch.push_back(lease_waiters.front());
      lease_waiters.pop_front();
    }
  }
  if (batch.empty()) return false;
  std::vector<int64_t> ids;
  std::vector<std::string> requests;
  for (const auto& b : batch) {
    ids.push_back(b.worker_id);
    requests.push_back(b.request_id);
  }
  const uint64_t epoch = QueueEpoch();  // before the statement: see QueueSeenEmpty
  if (s) metrics.lease_statements.Increment();
  absl::StatusOr<std::vector<absl::StatusOr<pb::LeaseShardResponse>>> answers =
      s ? s->LeaseShards(ids, requests)
        : absl::UnavailableError("LeaseShard: database unreachable; retry");
  // A known worker (not quarantined) left without a shard means the queue ran dry.
  if (answers.ok()) {
    for (const auto& a : *answers) {
      if (a.ok() && !a->has_shard() && !a->quarantined()) {
        QueueSeenEmpty(epoch);
        break;
      }
    }
  }

  const Clock::time_point now = Clock::now();
  for (size_t i = 0; i < batch.size(); ++i) {
    absl::Status st = answers.ok() ? (*answers)[i].status() : answers.status();
    if (st.ok()) {
      pb::LeaseShardResponse& a = *(*answers)[i];
      Seen(batch[i].worker_id);
      // A quarantined worker always asks the database (its quarantine ends there).
      const bool idle = !a.has_shard() && !a.quarantined();
      SetIdle(batch[i].worker_id, idle);
      // Nothing for a long poll with time left: held until work is queued or its wait ends.
      if (idle && batch[i].wait_until > now && Park(batch[i])) continue;
      *batch[i].resp = std::move(a);
      if (batch[i].resp->has_shard()) {
        metrics.leases.Increment();
      } else if (!batch[i].resp->quarantined()) {
        batch[i].resp->set_retry_after_ms(batch[i].long_poll ? 0 : kIdleRetryMs);
      }
    }
    Answer(batch[i].reactor, "LeaseShard", st, batch[i].t0);
  }
  // Parked calls are no longer open either: a report does not hold back behind them.
  LeaseCallsAnswered(batch.size());
  return true;
}

void Scheduler::Impl::WakeParked() {
  size_t n = 0;
  {
    std::lock_guard<std::mutex> l(lease_mu);
    if (parked.empty()) return;
    const Clock::time_point now = Clock::now();
    for (auto& w : parked) {
      w.t0 = now;  // timed from here: the wait is not the service's latency
      lease_waiters.push_back(w);
    }
    n = parked.size();
    parked.clear();
    lease_calls_open += n;
    metrics.lease_calls_open.Set(static_cast<double>(lease_calls_open));
    metrics.lease_calls_parked.Set(0);
  }
  // One task per batch, so that the lease threads share them; any one task serves them all.
  for (size_t i = 0; i < n; i += LeaseBatch()) {
    if (!lease_pool->Submit([this](store::Store* s) { ServeLeases(s); })) break;
  }
}

void Scheduler::Impl::EndParked(bool closing) {
  std::vector<LeaseWaiter> done;
  {
    std::lock_guard<std::mutex> l(lease_mu);
    if (closing) parking_closed = true;
    const Clock::time_point now = Clock::now();
    auto keep = std::partition(parked.begin(), parked.end(), [&](const LeaseWaiter& w) {
      return !closing && w.wait_until > now && !w.ctx->IsCancelled();
    });
    done.assign(keep, parked.end());
    parked.erase(keep, parked.end());
    metrics.lease_calls_parked.Set(static_cast<double>(parked.size()));
  }
  for (const LeaseWaiter& w : done) {
    Seen(w.worker_id);
    w.resp->set_retry_after_ms(0);  // the wait was the backoff: ask again now
    metrics.idle_answers.Increment();
    Answer(w.reactor, "LeaseShard", absl::OkStatus(), Clock::now());  // nothing was served
  }
}

grpc::ServerUnaryReactor* Scheduler::Impl::Heartbeat(grpc::CallbackServerContext* ctx,
                                    const pb::HeartbeatRequest* req,
                                    pb::HeartbeatResponse* resp) {
  return Handle(lease_pool.get(), "Heartbeat", ctx, req, resp, [this](store::Store& s, const auto& r, auto* out) {
    Seen(r.worker_id());
    return Assign(s.Heartbeat(r), out);
  });
}

grpc::ServerUnaryReactor* Scheduler::Impl::ReportResults(grpc::CallbackServerContext* ctx,
                                        const pb::ReportResultsRequest* req,
                                        pb::ReportResultsResponse* resp) {
  return Handle("ReportResults", ctx, req, resp, [this](store::Store& s, const auto& r, auto* out) {
    Seen(r.worker_id());
    YieldToLeases();
    absl::Status st = Assign(s.ReportResults(r), out);
    if (st.ok() && out->accepted() > 0) {
      for (const auto& m : r.results()) {
        for (const auto& v : m.modes()) {
          metrics.results
              .Add({{"mode", proto::ModeName(v.mode())}, {"status", proto::VerdictName(v.status())}})
              .Increment();
        }
        metrics.model_seconds.Observe(m.total_ms() / 1000.0);
      }
    }
    return st;
  });
}

grpc::ServerUnaryReactor* Scheduler::Impl::FinishShard(grpc::CallbackServerContext* ctx,
                                      const pb::FinishShardRequest* req,
                                      pb::FinishShardResponse* resp) {
  return Handle("FinishShard", ctx, req, resp, [](store::Store& s, const auto& r, auto* out) {
    return Assign(s.FinishShard(r), out);
  });
}

grpc::ServerUnaryReactor* Scheduler::Impl::UpsertModels(grpc::CallbackServerContext* ctx,
                                       const pb::UpsertModelsRequest* req,
                                       pb::UpsertModelsResponse* resp) {
  return Handle("UpsertModels", ctx, req, resp, [](store::Store& s, const auto& r, auto* out) {
    return Assign(s.UpsertModels(r), out);
  });
}

grpc::ServerUnaryReactor* Scheduler::Impl::CreateSweep(grpc::CallbackServerContext* ctx,
                                      const pb::CreateSweepRequest* req,
                                      pb::CreateSweepResponse* resp) {
  return Handle("CreateSweep", ctx, req, resp, [this](store::Store& s, const auto& r, auto* out) {
    absl::Status st = Assign(s.CreateSweep(r), out);
    if (st.ok()) WakeParked();  // committed: the long polls lease its shards now
    return st;
  });
}

grpc::ServerUnaryReactor* Scheduler::Impl::GetSweep(grpc::CallbackServerContext* ctx,
                                   const pb::GetSweepRequest* req,
                                   pb::SweepProgress* resp) {
  return Handle(query_pool.get(), "GetSweep", ctx, req, resp, [](store::Store& s, const auto& r, auto* out) {
    return Assign(s.GetSweep(r.sweep_id()), out);
  });
}

grpc::ServerUnaryReactor* Scheduler::Impl::CancelSweep(grpc::CallbackServerContext* ctx,
                                      const pb::CancelSweepRequest* req,
                                      pb::SweepProgress* resp) {
  return Handle(query_pool.get(), "CancelSweep", ctx, req, resp, [](store::Store& s, const auto& r, auto* out) {
    return Assign(s.CancelSweep(r.sweep_id()), out);
  });
}

// Pages are fetched on the query pool one at a time; the next fetch starts when a write is done.
class Scheduler::Impl::ListReactor final : public grpc::ServerWriteReactor<pb::ResultPage> {
 public:
  ListReactor(Impl* impl, pb::ListResultsRequest req) : impl_(impl), req_(std::move(req)) {
    if (req_.page_size() == 0) req_.set_page_size(1000);
    Fetch();
  }
  void OnWriteDone(bool ok) override {
    if (!ok) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
      return;
    }
    Fetch();
  }
  void OnDone() override { delete this; }

 private:
  void Fetch() {
    const bool queued = impl_->query_pool->Submit([this](store::Store* s) {
      if (!s) {
        Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "database unreachable; retry"));
        return;
      }
      auto rows = s->ListResults(req_.sweep_id(), after_, req_.page_size());
      if (!rows.ok()) {
        Finish(common::ToGrpcStatus(rows.status()));
        return;
      }
      if (rows->empty()) {
        Finish(grpc::Status::OK);
        return;
      }
      page_.Clear();
      for (auto& r : *rows) *page_.add_rows() = std::move(r);
      after_ = page_.rows(page_.rows_size() - 1).model_id();
      StartWrite(&page_);
    });
    if (!queued) {
      Finish(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "database queue full; retry"));
    }
  }
  Impl* impl_;
  pb::ListResultsRequest req_;
  pb::ResultPage page_;
  std::string after_;
};

grpc::ServerWriteReactor<pb::ResultPage>* Scheduler::Impl::ListResults(
    grpc::CallbackServerContext* ctx, const pb::ListResultsRequest* req) {
  absl::Status st = Admit(ctx, "ListResults", *req);
  if (!st.ok()) {
    struct Refuse final : grpc::ServerWriteReactor<pb::ResultPage> {
      explicit Refuse(const absl::Status& s) { Finish(common::ToGrpcStatus(s)); }
      void OnDone() override { delete this; }
    };
    return new Refuse(st);
  }
  return new ListReactor(this, *req);
}


}  // namespace ts::scheduler
