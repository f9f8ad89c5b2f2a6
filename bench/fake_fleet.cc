#include "bench/fake_fleet.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <thread>

#include "proto/names.h"
#include "services/common/jitter.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::bench {
namespace {

namespace pb = ::touchstone::v1;

// What a real worker sends for one model: three modes, ~28 ops, a 5-step loss curve.
pb::ModelResult BuildFakeResult(const pb::Job& j) {
  pb::ModelResult m;
  m.set_job_id(j.job_id());
  m.set_model_id(j.model_id());
  m.set_run(j.run());
  for (pb::Mode mode : ts::proto::AllModes()) {
    auto* v = m.add_modes();
    v->set_mode(mode);
    v->set_status(j.job_id() % 17 == 0 ? pb::VERDICT_FAIL_ACCURACY : pb::VERDICT_PASS);
    if (v->status() != pb::VERDICT_PASS)
      v->set_error("rmse_ratio 2.31 > 1.5 (device 0.0123 vs ref 0.0053)");
    v->set_ms(20.5);
    v->set_rmse_device(1e-4);
    v->set_rmse_reference(1e-4);
    v->set_rmse_ratio(1.0);
    v->set_cosine(0.99999);
    if (mode == pb::MODE_COMPILE) {
      v->set_graph_breaks(1);
      v->add_break_reasons("data-dependent op aten::nonzero");
      v->set_device_segments(2);
      v->set_compile_ms(120);
    }
    if (mode == pb::MODE_TRAIN) {
      for (int s = 0; s < 5; ++s) {
        v->add_loss_reference(6.2 - 0.1 * s);
        v->add_loss_device(6.2 - 0.1 * s);
      }
    }
  }
  for (int k = 0; k < 28; ++k) {
    auto* op = m.add_ops();
    op->set_op("aten::op_" + std::to_string(k));
    op->set_calls(12);
    op->set_ms(0.25);
    op->set_native(k % 9 != 0);
  }
  m.set_distinct_ops(28);
  m.set_native_ops(24);
  m.set_opcov_ratio(24.0 / 28);
  m.set_total_ms(70);
  return m;
}

}  // namespace

// Built once per fake worker (passing and failing variants) and stamped with each job's ids, so
// the fake workers spend their CPU on the wire rather than on building strings.
pb::ModelResult FakeResult(const pb::Job& j) {
  thread_local pb::ModelResult pass_template, fail_template;
  thread_local bool ready = false;
  if (!ready) {
    pb::Job p, f;
    p.set_job_id(1);
    f.set_job_id(17);
    pass_template = BuildFakeResult(p);
    fail_template = BuildFakeResult(f);
    ready = true;
  }
  pb::ModelResult m = j.job_id() % 17 == 0 ? fail_template : pass_template;
  m.set_job_id(j.job_id());
  m.set_model_id(j.model_id());
  m.set_run(j.run());
  return m;
}

namespace {

// One fake worker's own latencies, merged into the FleetRun when it stops.
struct WorkerTimes {
  std::vector<double> lease, report, finish;
};

enum class Leased { kShard, kAgain, kDry };

// One LeaseShard as touchstone-worker makes it (a long poll or a jittered wait while idle). A
// call that can find the sweep's shards counts; a held call that waited for the sweep counts
// from the sweep's creation.
Leased Lease(const FleetOptions& a, pb::Scheduler::Stub& stub, int64_t worker_id, FleetRun& run,
             WorkerTimes& mine, pb::LeaseShardResponse* lease) {
  pb::LeaseShardRequest lq;
  lq.set_worker_id(worker_id);
  const bool in_sweep = run.started;
  const bool long_poll = a.long_poll_ms > 0 && !in_sweep;
  if (long_poll) lq.set_wait_ms(static_cast<uint32_t>(a.long_poll_ms));
  if (!in_sweep) ++run.idle_calls;
  const auto t = Clock::now();
  grpc::ClientContext ctx;
  grpc::Status st = stub.LeaseShard(&ctx, lq, lease);
  const auto from =
      long_poll ? std::max(t, Clock::time_point(Clock::duration(run.create_at.load()))) : t;
  if (in_sweep || (st.ok() && lease->has_shard())) mine.lease.push_back(Ms(Clock::now() - from));
  if (!st.ok()) return Leased::kAgain;
  if (lease->has_shard()) return Leased::kShard;
  if (in_sweep) return Leased::kDry;                                     // the queue ran dry
  if (long_poll && lease->retry_after_ms() == 0) return Leased::kAgain;  // the wait was the backoff
  std::this_thread::sleep_for(std::chrono::duration<double>(
      ts::common::Jittered(lease->retry_after_ms() / 1000.0, 0.5)));  // as touchstone-worker
  return Leased::kAgain;
}

// The shard's results in one ReportResults (finish=true unless separate_finish, then a
// FinishShard).
void Report(const FleetOptions& a, pb::Scheduler::Stub& stub, int64_t worker_id,
            const pb::LeaseShardResponse& lease, FleetRun& run, WorkerTimes& mine) {
  pb::ReportResultsRequest rep;
  rep.set_worker_id(worker_id);
  rep.set_shard_id(lease.shard_id());
  rep.set_lease_token(lease.lease_token());
  for (const auto& j : lease.jobs()) *rep.add_results() = FakeResult(j);
  rep.set_finish(!a.separate_finish);
  pb::ReportResultsResponse rresp;
  auto t = Clock::now();
  grpc::ClientContext rctx;
  grpc::Status st = stub.ReportResults(&rctx, rep, &rresp);
  mine.report.push_back(Ms(Clock::now() - t));
  if (st.ok()) run.results += rresp.accepted();
  if (!a.separate_finish) return;
  pb::FinishShardRequest f;
  f.set_worker_id(worker_id);
  f.set_shard_id(lease.shard_id());
  f.set_lease_token(lease.lease_token());
  pb::FinishShardResponse fr;
  t = Clock::now();
  grpc::ClientContext fctx;
  stub.FinishShard(&fctx, f, &fr);
  mine.finish.push_back(Ms(Clock::now() - t));
}

}  // namespace

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void FakeWorker(const FleetOptions& a, const std::string& target, int w, Registered& registered,
                FleetRun& run) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per fake worker
  auto stub = pb::Scheduler::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), args));
  pb::RegisterWorkerRequest reg;
  reg.set_name("fake-" + std::to_string(w));
  pb::RegisterWorkerResponse rr;
  bool ok = false;
  {
    grpc::ClientContext ctx;
    const auto t = Clock::now();
    ok = stub->RegisterWorker(&ctx, reg, &rr).ok();
    std::lock_guard<std::mutex> l(run.mu);
    run.register_ms.push_back(Ms(Clock::now() - t));
  }
  FakeResult(pb::Job());  // builds this worker's templates before the clock starts
  registered.arrive_and_wait();
  if (!ok) return;
  if (a.reconnect) {
    std::this_thread::sleep_for(
        std::chrono::duration<double>(ts::common::BackoffWithJitter(0, 0.1, 2.0)));
  }
  WorkerTimes mine;
  for (;;) {
    pb::LeaseShardResponse lease;
    const Leased got = Lease(a, *stub, rr.worker_id(), run, mine, &lease);
    if (got == Leased::kDry) break;
    if (got == Leased::kAgain) continue;
    if (a.hold_first_ms > 0 && mine.report.empty()) {  // this worker's first shard
      std::this_thread::sleep_for(std::chrono::milliseconds(a.hold_first_ms));
    }
    Report(a, *stub, rr.worker_id(), lease, run, mine);
  }
  std::lock_guard<std::mutex> l(run.mu);
  run.lease_ms.insert(run.lease_ms.end(), mine.lease.begin(), mine.lease.end());
  if (!mine.lease.empty()) {
    run.later_lease_ms.insert(run.later_lease_ms.end(), mine.lease.begin() + 1, mine.lease.end());
  }
  run.report_ms.insert(run.report_ms.end(), mine.report.begin(), mine.report.end());
  run.finish_ms.insert(run.finish_ms.end(), mine.finish.begin(), mine.finish.end());
}

}  // namespace ts::bench
