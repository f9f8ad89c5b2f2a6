// The Query service's server streams (WatchSweep, WatchAlerts): poll the store on the query
// pool, write what the poll produced, wait on a gRPC alarm, poll again. Between polls a stream
// holds neither a callback thread nor a database thread.
//
// Exactly one of poll, write or alarm is in flight at a time, and only it ends the stream; a
// client cancel or the service's Shutdown only sets `ending_` and cancels the alarm.
//
// Internal to services/scheduler (query_service.cc).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <utility>

#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "services/common/grpc_status.h"
#include "services/scheduler/store_pool.h"

namespace ts::scheduler {

// What the service keeps of an open stream: a way to end it.
class QueryStream {
 public:
  virtual ~QueryStream() = default;
  // Ends the stream with `why` at its next step. Called with the service's lock held.
  virtual void Stop(grpc::Status why) = 0;
};

template <typename Msg>
class PollStream final : public grpc::ServerWriteReactor<Msg>, public QueryStream {
 public:
  // One poll on a pool thread: fills `msg` and sets `write` to send it (else nothing is sent
  // this time) and `last` to end the stream (after the write, if any). An error ends the
  // stream with that status.
  using PollFn = std::function<absl::Status(store::Store& s, Msg* msg, bool* write, bool* last)>;
  using Forget = std::function<void(QueryStream*)>;

  PollStream(StorePool* pool, int interval_ms, PollFn poll, Forget forget)
      : pool_(pool), interval_ms_(interval_ms), poll_(std::move(poll)), forget_(std::move(forget)) {}

  void Start() { Poll(); }

  void Stop(grpc::Status why) override {
    std::lock_guard<std::mutex> l(mu_);
    if (!ending_) end_status_ = std::move(why);
    ending_ = true;
    if (alarm_) alarm_->Cancel();
  }

  void OnWriteDone(bool ok) override {
    if (!ok) return End(grpc::Status(grpc::StatusCode::CANCELLED, "client went away"));
    if (last_) return End(grpc::Status::OK);
    Wait();
  }

  void OnCancel() override { Stop(grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled")); }

  void OnDone() override {
    forget_(this);
    delete this;
  }

 private:
  void End(grpc::Status st) { this->Finish(st); }

  // The alarm, then the next poll (or the end, when asked meanwhile).
  void Wait() {
    std::unique_lock<std::mutex> l(mu_);
    if (ending_) {
      const grpc::Status why = end_status_;
      l.unlock();
      return End(why);
    }
    alarm_ = std::make_unique<grpc::Alarm>();
    alarm_->Set(std::chrono::system_clock::now() + std::chrono::milliseconds(interval_ms_),
                [this](bool fired) {
                  if (!fired || Ending()) return End(EndStatus());
                  Poll();
                });
  }

  void Poll() {
    const bool queued = pool_->Submit([this](store::Store* s) {
      if (Ending()) return End(EndStatus());
      if (!s) return End(grpc::Status(grpc::StatusCode::UNAVAILABLE, "database unreachable"));
      bool write = false, last = false;
      const absl::Status st = poll_(*s, &msg_, &write, &last);
      if (!st.ok()) return End(common::ToGrpcStatus(st));
      if (write) {
        last_ = last;
        return this->StartWrite(&msg_);
      }
      if (last) return End(grpc::Status::OK);
      Wait();
    });
    if (!queued) {
      End(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "query queue full or stopping"));
    }
  }

  bool Ending() {
    std::lock_guard<std::mutex> l(mu_);
    return ending_;
  }
  grpc::Status EndStatus() {
    std::lock_guard<std::mutex> l(mu_);
    return end_status_;
  }

  StorePool* pool_;
  const int interval_ms_;
  PollFn poll_;
  Forget forget_;
  Msg msg_;
  bool last_ = false;  // msg_ is the final message
  std::mutex mu_;
  bool ending_ = false;
  grpc::Status end_status_;
  std::unique_ptr<grpc::Alarm> alarm_;
};

}  // namespace ts::scheduler
