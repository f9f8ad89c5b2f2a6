#include "services/cluster/sweep_driver.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "services/common/grpc_status.h"
#include "services/common/random.h"
#include "services/common/tls.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::cluster {
namespace {

namespace pb = ::touchstone::v1;
using Clock = std::chrono::steady_clock;

constexpr int kMaxMessageBytes = 64 << 20;  // answers; requests stay under 32 MiB

// One line of progress, in place on a terminal (\r), else newline-terminated.
void PrintProgress(FILE* out, const pb::SweepProgress& p, double secs, bool tty) {
  const double rate = secs > 0 ? p.models_recorded() / secs : 0;
  const double eta = rate > 0 ? (p.models_expected() - p.models_recorded()) / rate : 0;
  std::fprintf(out,
               "%s%lld/%lld models  %.1f models/s  ETA %.0f s  failures %lld  "
               "confirmation runs %lld/%lld%s",
               tty ? "\r" : "", static_cast<long long>(p.models_recorded()),
               static_cast<long long>(p.models_expected()), rate, eta,
               static_cast<long long>(p.failures()),
               static_cast<long long>(p.jobs_done() - p.models_recorded()),
               static_cast<long long>(p.jobs_total() - p.models_expected()), tty ? "   " : "\n");
}

// What Follow() keeps between polls to say why a sweep stalls: when jobs_done last moved, the
// last poll error, and when polls began failing.
class StallWatch {
 public:
  // One poll's outcome. UNAVAILABLE once polls have failed for longer than the options allow.
  absl::Status Polled(int64_t sweep_id, const absl::StatusOr<pb::SweepProgress>& p,
                      Clock::time_point t_poll, const FollowOptions& opts) {
    if (p.ok()) {
      last_error_.clear();
      failing_since_ = Clock::time_point();
      if (p->jobs_done() != last_done_) {
        last_done_ = p->jobs_done();
        last_change_ = Clock::now();
      }
      return absl::OkStatus();
    }
    last_error_ = std::string(p.status().message());
    if (failing_since_ == Clock::time_point()) failing_since_ = t_poll;
    const double failing_s = std::chrono::duration<double>(Clock::now() - failing_since_).count();
    if (failing_s <= opts.unreachable_limit_s) return absl::OkStatus();
    return absl::UnavailableError("sweep " + std::to_string(sweep_id) +
                                  ": no progress answer for " +
                                  std::to_string(static_cast<int>(failing_s)) +
                                  " s (the sweep may still be running): " + last_error_);
  }

  // A line that has not moved says why, once per stall_note_s.
  void MaybeNote(const FollowOptions& opts, bool tty) {
    const double stalled_s = std::chrono::duration<double>(Clock::now() - last_change_).count();
    if (opts.out == nullptr || stalled_s <= opts.stall_note_s ||
        Clock::now() - last_note_ <= std::chrono::duration<double>(opts.stall_note_s)) {
      return;
    }
    // Both when both are known: the scheduler's error and the cause seen from here (a full
    // disk under the embedded PostgreSQL says what to do).
    std::string why = opts.why_stalled ? opts.why_stalled() : "";
    if (!last_error_.empty()) {
      why = "the scheduler answers: " + last_error_ + (why.empty() ? "" : "; " + why);
    } else if (why.empty()) {
      why = "no job finished";
    }
    std::fprintf(opts.out, "%sno job recorded for %.0f s: %s\n", tty ? "\n" : "", stalled_s,
                 why.c_str());
    last_note_ = Clock::now();
  }

 private:
  Clock::time_point last_change_ = Clock::now(), last_note_ = Clock::now();
  int64_t last_done_ = -1;
  std::string last_error_;
  Clock::time_point failing_since_;
};

// GetSweep counts over the sweep's jobs and results, so it grows with the sweep (~0.3 s of
// PostgreSQL at 100k models): poll once a second, but never spend more than ~5% of the time on
// it, which would be taken from the models.
Clock::duration PollWait(Clock::duration poll_cost) {
  return std::clamp<Clock::duration>(20 * poll_cost, std::chrono::seconds(1),
                                     std::chrono::seconds(15));
}

}  // namespace

struct SweepDriver::Rpc {
  std::unique_ptr<pb::Scheduler::Stub> stub;
  std::unique_ptr<pb::Query::Stub> query;  // same channel
  std::string token;

  void Prepare(grpc::ClientContext* ctx, double deadline_s) const {
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    if (deadline_s > 0) {
      ctx->set_deadline(std::chrono::system_clock::now() +
                        std::chrono::milliseconds(static_cast<int64_t>(deadline_s * 1000)));
    }
  }

  template <typename Req, typename Resp>
  using Method = grpc::Status (pb::Scheduler::Stub::*)(grpc::ClientContext*, const Req&, Resp*);

  // One unary call.
  template <typename Req, typename Resp>
  absl::Status Call(Method<Req, Resp> method, const Req& req, Resp* resp, double deadline_s) const {
    grpc::ClientContext ctx;
    Prepare(&ctx, deadline_s);
    return common::FromGrpcStatus((stub.get()->*method)(&ctx, req, resp));
  }

  // A unary call, retried while the scheduler is UNAVAILABLE (being started or restarted).
  template <typename Req, typename Resp>
  absl::Status CallWithRetry(Method<Req, Resp> method, const Req& req, Resp* resp) const {
    for (int attempt = 0;; ++attempt) {
      absl::Status st = Call(method, req, resp, 300);
      if (st.code() != absl::StatusCode::kUnavailable || attempt > 100) return st;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
};

SweepDriver::SweepDriver(std::unique_ptr<Rpc> rpc) : rpc_(std::move(rpc)) {}
SweepDriver::~SweepDriver() = default;

absl::StatusOr<std::unique_ptr<SweepDriver>> SweepDriver::Connect(const SweepDriverOptions& opts) {
  if (opts.target.empty()) return absl::InvalidArgumentError("target: empty");
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(kMaxMessageBytes);
  args.SetMaxReceiveMessageSize(kMaxMessageBytes);
  // Back within a second of a restarted scheduler (as the workers: services/worker/worker.cc).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 250);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto rpc = std::make_unique<Rpc>();
  auto channel = common::MakeChannel(opts.target, opts.tls_ca_file, args);
  if (!channel.ok()) return channel.status();
  rpc->stub = pb::Scheduler::NewStub(*channel);
  rpc->query = pb::Query::NewStub(*channel);
  rpc->token = opts.token;
  return std::unique_ptr<SweepDriver>(new SweepDriver(std::move(rpc)));
}

absl::Status SweepDriver::AddModel(pb::CatalogModel model) {
  pending_bytes_ += model.ByteSizeLong() + 8;
  *pending_.add_models() = std::move(model);
  if (pending_.models_size() < kUpsertBatch && pending_bytes_ < kUpsertBatchBytes) {
    return absl::OkStatus();
  }
  return FlushModels();
}

absl::Status SweepDriver::FlushModels() {
  if (pending_.models_size() == 0) return absl::OkStatus();
  pb::UpsertModelsResponse resp;
  absl::Status st = rpc_->CallWithRetry(&pb::Scheduler::Stub::UpsertModels, pending_, &resp);
  pending_.clear_models();
  pending_bytes_ = 0;
  return st;
}

absl::StatusOr<pb::CreateSweepResponse> SweepDriver::CreateSweep(
    const pb::CreateSweepRequest& request) {
  pb::CreateSweepResponse created;
  // One request id across the retries: a retry after an in-doubt commit (the answer was lost
  // with the scheduler) gets the sweep the first call made, not a second sweep.
  pb::CreateSweepRequest req = request;
  if (req.request_id().empty()) req.set_request_id(common::RandomHex(16));
  absl::Status st = rpc_->CallWithRetry(&pb::Scheduler::Stub::CreateSweep, req, &created);
  if (!st.ok()) return st;
  return created;
}

absl::StatusOr<pb::SweepProgress> SweepDriver::Progress(int64_t sweep_id) {
  pb::GetSweepRequest req;
  req.set_sweep_id(sweep_id);
  pb::SweepProgress p;
  absl::Status st = rpc_->Call(&pb::Scheduler::Stub::GetSweep, req, &p, 10);
  if (!st.ok()) return st;
  return p;
}

absl::StatusOr<pb::SweepProgress> SweepDriver::Cancel(int64_t sweep_id) {
  pb::CancelSweepRequest req;
  req.set_sweep_id(sweep_id);
  pb::SweepProgress p;
  absl::Status st = rpc_->Call(&pb::Scheduler::Stub::CancelSweep, req, &p, 10);
  if (!st.ok()) return st;
  return p;
}

absl::StatusOr<FollowResult> SweepDriver::Follow(int64_t sweep_id, const FollowOptions& opts) {
  FollowResult result;
  const bool tty = opts.out != nullptr && ::isatty(::fileno(opts.out));
  auto last_line = Clock::now() - std::chrono::seconds(60);
  const auto t_sweep = Clock::now();
  StallWatch stall;
  for (;;) {
    if (opts.interrupted != nullptr && opts.interrupted->load()) {
      auto cancelled = Cancel(sweep_id);
      result.interrupted = true;
      result.cancel = cancelled.status();
      result.progress = cancelled.ok() ? *cancelled : pb::SweepProgress();
      break;
    }
    if (opts.between_polls) {
      if (absl::Status st = opts.between_polls(); !st.ok()) return st;
    }
    const auto t_poll = Clock::now();
    auto p = Progress(sweep_id);
    const auto poll_cost = Clock::now() - t_poll;
    if (absl::Status st = stall.Polled(sweep_id, p, t_poll, opts); !st.ok()) return st;
    stall.MaybeNote(opts, tty);
    if (p.ok()) {
      result.progress = *p;
      const bool running = p->state() == "running";
      if (opts.out != nullptr &&
          (tty || Clock::now() - last_line > std::chrono::seconds(10) || !running)) {
        PrintProgress(opts.out, *p, std::chrono::duration<double>(Clock::now() - t_sweep).count(),
                      tty);
        last_line = Clock::now();
      }
      if (!running) {
        if (tty) std::fprintf(opts.out, "\n");
        break;
      }
    }
    std::this_thread::sleep_for(PollWait(poll_cost));
  }
  result.sweep_s = std::chrono::duration<double>(Clock::now() - t_sweep).count();
  return result;
}

absl::StatusOr<ResultTally> SweepDriver::Summarize(
    int64_t sweep_id, const std::function<void(const pb::ResultRow&)>& each) {
  pb::ListResultsRequest req;
  req.set_sweep_id(sweep_id);
  grpc::ClientContext ctx;
  rpc_->Prepare(&ctx, 0);
  auto reader = rpc_->stub->ListResults(&ctx, req);
  pb::ResultPage page;
  ResultTally tally;
  while (reader->Read(&page)) {
    for (const auto& row : page.rows()) {
      each(row);
      ++tally.listed;
      tally.flaky += row.confirmation() == "flaky";
      tally.deterministic += row.confirmation() == "deterministic";
    }
  }
  absl::Status st = common::FromGrpcStatus(reader->Finish());
  if (!st.ok()) return st;
  return tally;
}

absl::StatusOr<pb::Summary> SweepDriver::Table(int64_t sweep_id, pb::GroupBy group_by) {
  pb::GetSummaryRequest req;
  req.set_sweep_id(sweep_id);
  req.set_group_by(group_by);
  pb::Summary summary;
  grpc::ClientContext ctx;
  rpc_->Prepare(&ctx, 300);
  absl::Status st = common::FromGrpcStatus(rpc_->query->GetSummary(&ctx, req, &summary));
  if (!st.ok()) return st;
  return summary;
}

}  // namespace ts::cluster
