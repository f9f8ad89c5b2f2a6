// The Query service (proto/touchstone/v1/query.proto): the read side for release tooling,
// served by touchstone-scheduler next to Scheduler on the same port.
//
// Threads: gRPC callback threads admit the call (the `admit` callback: the scheduler's token or
// role check), validate it (services/query/request_checks.h) and hand it to the query
// StorePool; they never block on SQL. The pool thread reads through the store and shapes the
// answer with services/query (SummaryBuilder, Compare, EvaluateGate), so GetSummary, the CLI's
// tables, CompareSweeps and Gate share one arithmetic. WatchSweep and WatchAlerts poll the store
// on the pool every interval (query_stream.h); between polls they wait on a gRPC alarm, holding
// neither a callback thread nor a database thread.
//
// Errors: INVALID_ARGUMENT naming the field; NOT_FOUND for an unknown sweep or model;
// FAILED_PRECONDITION naming a pruned sweep; UNAVAILABLE when the database is unreachable or
// the scheduler is shutting down; RESOURCE_EXHAUSTED when the pool's queue is full.
//
// Thread-safety: the gRPC server calls it from any thread. Shutdown() ends every open
// WatchSweep and WatchAlerts stream (UNAVAILABLE) and refuses new ones; call it before the server's Shutdown,
// while the pool still runs. The pool must outlive the service's calls.
#pragma once

#include <functional>
#include <mutex>
#include <set>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "services/scheduler/query_stream.h"
#include "services/scheduler/store_pool.h"
#include "touchstone/v1/query.grpc.pb.h"

namespace ts::scheduler {

namespace pb = ::touchstone::v1;

class QueryService final : public pb::Query::CallbackService {
 public:
  // Decides whether a call may read (OK) or not (UNAUTHENTICATED / PERMISSION_DENIED).
  using Admit = std::function<absl::Status(grpc::CallbackServerContext*)>;

  // `admit` for the reads; `admit_writes` for the calls that change alerts (AckAlert,
  // DetectRegressions: admin only).
  QueryService(StorePool* pool, Admit admit, Admit admit_writes);
  ~QueryService() override;

  void Shutdown();

  grpc::ServerUnaryReactor* ListSweeps(grpc::CallbackServerContext* ctx,
                                       const pb::ListSweepsRequest* req,
                                       pb::ListSweepsResponse* resp) override;
  grpc::ServerUnaryReactor* GetSummary(grpc::CallbackServerContext* ctx,
                                       const pb::GetSummaryRequest* req,
                                       pb::Summary* resp) override;
  grpc::ServerUnaryReactor* GetModel(grpc::CallbackServerContext* ctx,
                                     const pb::GetModelRequest* req,
                                     pb::ModelHistory* resp) override;
  grpc::ServerUnaryReactor* OpDemand(grpc::CallbackServerContext* ctx,
                                     const pb::OpDemandRequest* req,
                                     pb::OpDemandResponse* resp) override;
  grpc::ServerUnaryReactor* GraphBreaks(grpc::CallbackServerContext* ctx,
                                        const pb::GraphBreaksRequest* req,
                                        pb::GraphBreaksResponse* resp) override;
  grpc::ServerUnaryReactor* SuspectOps(grpc::CallbackServerContext* ctx,
                                       const pb::SuspectOpsRequest* req,
                                       pb::SuspectOpsResponse* resp) override;
  grpc::ServerUnaryReactor* CompareSweeps(grpc::CallbackServerContext* ctx,
                                          const pb::CompareSweepsRequest* req,
                                          pb::CompareSweepsResponse* resp) override;
  grpc::ServerUnaryReactor* Gate(grpc::CallbackServerContext* ctx, const pb::GateRequest* req,
                                 pb::GateResponse* resp) override;
  grpc::ServerUnaryReactor* ListAlerts(grpc::CallbackServerContext* ctx,
                                       const pb::ListAlertsRequest* req,
                                       pb::ListAlertsResponse* resp) override;
  grpc::ServerUnaryReactor* AckAlert(grpc::CallbackServerContext* ctx,
                                     const pb::AckAlertRequest* req, pb::Alert* resp) override;
  grpc::ServerUnaryReactor* DetectRegressions(grpc::CallbackServerContext* ctx,
                                              const pb::DetectRegressionsRequest* req,
                                              pb::DetectRegressionsResponse* resp) override;
  grpc::ServerUnaryReactor* ListQuarantine(grpc::CallbackServerContext* ctx,
                                           const pb::ListQuarantineRequest* req,
                                           pb::ListQuarantineResponse* resp) override;
  grpc::ServerWriteReactor<pb::SweepProgress>* WatchSweep(
      grpc::CallbackServerContext* ctx, const pb::WatchSweepRequest* req) override;
  grpc::ServerWriteReactor<pb::AlertsUpdate>* WatchAlerts(
      grpc::CallbackServerContext* ctx, const pb::WatchAlertsRequest* req) override;

 private:
  template <typename Req, typename Resp, typename Fn>
  grpc::ServerUnaryReactor* Handle(const char* method, grpc::CallbackServerContext* ctx,
                                   const Req* req, Resp* resp, Fn fn, bool writes = false);
  // Admits, then opens a polling stream (or refuses it with the admission's or `checked`'s
  // error, or UNAVAILABLE while shutting down).
  template <typename Msg>
  grpc::ServerWriteReactor<Msg>* OpenStream(grpc::CallbackServerContext* ctx,
                                            absl::Status checked, int interval_ms,
                                            typename PollStream<Msg>::PollFn poll);
  void Forget(QueryStream* w);

  StorePool* pool_;
  Admit admit_;
  Admit admit_writes_;
  std::mutex mu_;
  bool stopping_ = false;
  std::set<QueryStream*> watches_;  // open WatchSweep / WatchAlerts streams (guarded by mu_)
};

}  // namespace ts::scheduler
