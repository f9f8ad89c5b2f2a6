// The query benchmark's reader threads: see the header.
#include "bench/query_readers.h"

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <random>
#include <thread>

#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::bench {

namespace {

using Clock = std::chrono::steady_clock;

// What one call found wrong in an OK answer ("" when nothing).
using Check = std::string;

struct Ctx {
  pb::Query::Stub& stub;
  pb::Scheduler::Stub& scheduler;
  const ReaderWorld& w;
  std::mt19937_64& rng;
  size_t Pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
  // A random fill sweep, and the index of a random one that has a predecessor.
  int64_t AnySweep() { return w.sweeps[Pick(w.sweeps.size())]; }
  size_t WithPrevious() { return 1 + Pick(w.sweeps.size() - 1); }
};

std::unique_ptr<grpc::ClientContext> Deadline() {
  auto c = std::make_unique<grpc::ClientContext>();
  c->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  return c;
}

grpc::Status Summary(Ctx& c, pb::GroupBy by, Check& bad) {
  pb::GetSummaryRequest q;
  q.set_sweep_id(c.AnySweep());
  q.set_group_by(by);
  pb::Summary a;
  grpc::Status st = c.stub.GetSummary(Deadline().get(), q, &a);
  if (st.ok() && (a.total().models() != c.w.models_per_sweep || a.rows_size() == 0)) {
    bad = "sweep " + std::to_string(q.sweep_id()) + ": total.models " +
          std::to_string(a.total().models()) + ", " + std::to_string(a.rows_size()) + " rows";
  }
  return st;
}

grpc::Status Model(Ctx& c, Check& bad) {
  pb::GetModelRequest q;
  q.set_model_id((*c.w.catalog)[c.Pick(c.w.catalog->size())].model.id());
  q.set_last(30);
  pb::ModelHistory a;
  grpc::Status st = c.stub.GetModel(Deadline().get(), q, &a);
  const int want = static_cast<int>(std::min<size_t>(30, c.w.sweeps.size()));
  if (st.ok() && (a.model_id() != q.model_id() || a.sweeps_size() < want || a.sweeps_size() > 30 ||
                  a.sweeps(0).result().modes_size() != 3)) {
    bad = q.model_id() + ": " + std::to_string(a.sweeps_size()) +
          " sweeps, want >= " + std::to_string(want);
  }
  return st;
}

grpc::Status Ops(Ctx& c, pb::Mode mode, Check& bad) {
  pb::OpDemandRequest q;
  q.set_sweep_id(c.AnySweep());
  q.set_mode(mode);
  pb::OpDemandResponse a;
  grpc::Status st = c.stub.OpDemand(Deadline().get(), q, &a);
  if (st.ok() && (a.models() != c.w.models_per_sweep || a.ops_size() == 0)) {
    bad = "sweep " + std::to_string(q.sweep_id()) + ": models " + std::to_string(a.models()) +
          ", " + std::to_string(a.ops_size()) + " ops";
  }
  return st;
}

grpc::Status Compare(Ctx& c, Check& bad) {
  const size_t k = c.WithPrevious();
  pb::CompareSweepsRequest q;
  q.set_base_sweep_id(c.w.sweeps[k - 1]);
  q.set_head_sweep_id(c.w.sweeps[k]);
  q.set_group_by(pb::GROUP_BY_TASK);
  pb::CompareSweepsResponse a;
  grpc::Status st = c.stub.CompareSweeps(Deadline().get(), q, &a);
  if (st.ok() && (a.common_models() != c.w.models_per_sweep || a.regressed() + a.fixed() == 0 ||
                  a.changes_size() == 0)) {
    bad = std::to_string(q.base_sweep_id()) + " -> " + std::to_string(q.head_sweep_id()) +
          ": common " + std::to_string(a.common_models()) + ", regressed " +
          std::to_string(a.regressed()) + ", fixed " + std::to_string(a.fixed());
  }
  return st;
}

// The release script's rules: overall and per-task / per-class minimums, no deterministic new
// failure against the previous sweep, no crash or timeout, a few models that must pass.
grpc::Status Gate(Ctx& c, Check& bad) {
  const size_t k = c.WithPrevious();
  pb::GateRequest q;
  q.set_sweep_id(c.w.sweeps[k]);
  pb::GateRules& r = *q.mutable_rules();
  r.set_baseline_sweep_id(c.w.sweeps[k - 1]);
  r.mutable_min()->set_eager(75);
  r.mutable_min()->set_compile(65);
  r.mutable_min()->set_train(70);
  for (const auto& t : c.w.gate_tasks) (*r.mutable_min_by_task())[t].set_eager(70);
  for (const auto& a : c.w.gate_classes) (*r.mutable_min_by_class())[a].set_compile(60);
  r.set_max_new_failures(0);
  r.add_forbid("crash");
  r.add_forbid("timeout");
  for (const auto& m : c.w.must_pass) r.add_must_pass(m);
  pb::GateResponse a;
  grpc::Status st = c.stub.Gate(Deadline().get(), q, &a);
  // Every fill sweep has crashes and timeouts, so the forbid rule alone fails the gate.
  const bool names_forbid =
      std::any_of(a.failures().begin(), a.failures().end(),
                  [](const pb::GateCheck& g) { return g.rule() == "forbid"; });
  if (st.ok() && (a.pass() || !names_forbid)) {
    bad = "sweep " + std::to_string(q.sweep_id()) + ": pass " + (a.pass() ? "true" : "false") +
          " with " + std::to_string(a.failures_size()) + " failures, none on 'forbid'";
  }
  return st;
}

// What release tooling reads today (Scheduler.ListResults): the first page of a sweep's stream.
grpc::Status FirstPage(Ctx& c, Check& bad) {
  pb::ListResultsRequest q;
  q.set_sweep_id(c.AnySweep());
  q.set_page_size(1000);
  auto ctx = Deadline();
  auto reader = c.scheduler.ListResults(ctx.get(), q);
  pb::ResultPage page;
  const bool got = reader->Read(&page);
  ctx->TryCancel();
  grpc::Status st = reader->Finish();
  if (got && st.error_code() == grpc::StatusCode::CANCELLED) st = grpc::Status::OK;
  if (st.ok() && page.rows_size() != 1000) {
    bad = "sweep " + std::to_string(q.sweep_id()) + ": first page has " +
          std::to_string(page.rows_size()) + " rows";
  }
  return st;
}

struct Rpc {
  const char* name;
  std::function<grpc::Status(Ctx&, Check&)> call;
};

const std::vector<Rpc>& Mix() {
  static const std::vector<Rpc> kMix = {
      {"GetSummary(task)", [](Ctx& c, Check& b) { return Summary(c, pb::GROUP_BY_TASK, b); }},
      {"GetSummary(arch)", [](Ctx& c, Check& b) { return Summary(c, pb::GROUP_BY_ARCH, b); }},
      {"GetModel(last 30)", Model},
      {"OpDemand(eager)", [](Ctx& c, Check& b) { return Ops(c, pb::MODE_EAGER, b); }},
      {"OpDemand(compile)", [](Ctx& c, Check& b) { return Ops(c, pb::MODE_COMPILE, b); }},
      {"CompareSweeps", Compare},
      {"Gate", Gate},
      {"ListResults(first page)", FirstPage},
  };
  return kMix;
}

}  // namespace

double RpcStats::P(double p) const {
  if (ms.empty()) return 0;
  std::vector<double> v = ms;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

double RpcStats::Max() const { return ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end()); }

void Readers::Start() {
  Stop();
  stats_.clear();
  stop_ = false;
  for (int i = 0; i < threads_; ++i) running_.emplace_back([this, i] { Loop(i); });
}

std::map<std::string, RpcStats> Readers::Stop() {
  stop_ = true;
  for (auto& t : running_) t.join();
  running_.clear();
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

void Readers::Record(const std::string& rpc, double ms, const std::string& error, bool wrong) {
  std::lock_guard<std::mutex> l(mu_);
  RpcStats& s = stats_[rpc];
  if (!error.empty()) {
    ++s.errors;
    if (s.first_error.empty()) s.first_error = error;
    return;
  }
  s.ms.push_back(ms);
  if (wrong) {
    ++s.wrong;
    if (s.first_error.empty()) s.first_error = "wrong answer: " + error;
  }
}

void Readers::Loop(int index) {
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one connection per reader
  args.SetMaxReceiveMessageSize(256 << 20);
  auto channel = grpc::CreateCustomChannel(world_.target, grpc::InsecureChannelCredentials(), args);
  auto stub = pb::Query::NewStub(channel);
  auto scheduler = pb::Scheduler::NewStub(channel);
  std::mt19937_64 rng(world_.seed * 1000003 + static_cast<uint64_t>(index));
  Ctx c{*stub, *scheduler, world_, rng};
  const auto& mix = Mix();
  // Each reader starts at a different RPC, then takes them in turn: equal calls per RPC.
  for (size_t i = static_cast<size_t>(index); !stop_; ++i) {
    const Rpc& rpc = mix[i % mix.size()];
    Check bad;
    const auto a = Clock::now();
    grpc::Status st = rpc.call(c, bad);
    const double ms = std::chrono::duration<double, std::milli>(Clock::now() - a).count();
    if (!st.ok()) {
      Record(rpc.name, ms, std::to_string(st.error_code()) + " " + st.error_message(), false);
      // An unimplemented service answers at once; don't spin on it.
      if (st.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      continue;
    }
    Record(rpc.name, ms, bad, !bad.empty());
    if (world_.think_ms > 0) {
      const auto until = Clock::now() + std::chrono::microseconds(static_cast<int64_t>(
          1000.0 * world_.think_ms * std::uniform_real_distribution<double>(0.5, 1.5)(rng)));
      while (!stop_ && Clock::now() < until) {
        std::this_thread::sleep_for(std::min<Clock::duration>(until - Clock::now(),
                                                              std::chrono::milliseconds(20)));
      }
    }
  }
}

}  // namespace ts::bench
