// What the alerts tests share (alerts_test.cc, alerts_delivery_test.cc, alerts_stream_test.cc):
// a scheduler on a fresh database with 20 models, sweeps whose records are written by hand
// (primary runs and their confirmation reruns, reported through the real ReportResults path),
// and sim-2.1's "broken" night.
#pragma once

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "services/scheduler/scheduler.h"
#include "services/scheduler/scheduler_test_util.h"
#include "services/store/store.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler::alerts_testing {

namespace pb = ::touchstone::v1;

constexpr int kModels = 20;  // org/m0..9: GPT2LMHeadModel, org/m10..19: BertForMaskedLM

// One mode's verdict in a run: status, error, first suspect ("" none).
struct V {
  pb::Verdict status = pb::VERDICT_PASS;
  std::string error;
  std::string suspect;
  double rmse_ratio = 1.0;  // drift tests move these
  double compile_ms = 200;
  // Performance (perf_alerts_test.cc): device_us > 0 gives a passing mode this perf, its top
  // ops, and (compile) a speedup.
  double device_us = 0;
  std::vector<std::pair<std::string, double>> top_ops = {};
  double speedup = NAN;
};
// (model index, mode, run) -> verdict; anything not listed passes.
using Night = std::function<V(int model, pb::Mode mode, int run)>;

inline V Pass() { return {}; }

// sim-2.1's night: a gelu defect breaks eager on m0..m5 (one cause), cumsum stops compiling m10,
// m11 hits a device error (its message differs only in numbers from run to run), m12 fails
// eager on its primary run only (flaky), m13 crashes every run (infrastructure).
inline V Broken(int i, pb::Mode mode, int run) {
  if (mode == pb::MODE_EAGER && i <= 5) {
    return {pb::VERDICT_FAIL_ACCURACY, "rmse_ratio 3.1 > 2", "aten::gelu"};
  }
  if (mode == pb::MODE_COMPILE && i == 10) {
    return {pb::VERDICT_COMPILE_FAIL, "unsupported op aten::cumsum at node " +
                                          std::to_string(10 + run), ""};
  }
  if (mode == pb::MODE_EAGER && i == 11) {
    return {pb::VERDICT_DEVICE_ERROR, "queue 3 stalled at 0x7f3a" + std::to_string(run), ""};
  }
  if (mode == pb::MODE_EAGER && i == 12 && run == 1) {
    return {pb::VERDICT_FAIL_ACCURACY, "rmse_ratio 2.2 > 2", ""};
  }
  if (i == 13) return {pb::VERDICT_CRASH, "runner killed by signal 9", ""};
  return Pass();
}

class AlertsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    opts_.db_url = TestDatabaseUrl();
    ASSERT_FALSE(opts_.db_url.empty());
    ASSERT_TRUE(opts_.tokens.Add(common::Role::kAdmin, "admin-token").ok());
    ASSERT_TRUE(opts_.tokens.Add(common::Role::kReader, "reader-token").ok());
    opts_.tick_s = 3600;  // detection is called by the test
    auto s = Scheduler::Start(opts_);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = std::move(*s);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(sched_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    stub_ = pb::Scheduler::NewStub(channel);
    query_ = pb::Query::NewStub(channel);
    pb::UpsertModelsRequest up;
    for (int i = 0; i < kModels; ++i) {
      auto* m = up.add_models();
      m->set_id("org/m" + std::to_string(i));
      m->set_task(i < 10 ? "text-generation" : "fill-mask");
      m->set_arch(i < 10 ? "GPT2LMHeadModel" : "BertForMaskedLM");
      m->set_family(i < 10 ? "gpt2" : "bert");
      m->set_config_json("{}");
    }
    pb::UpsertModelsResponse ur;
    ASSERT_TRUE(stub_->UpsertModels(Ctx().get(), up, &ur).ok());
    pb::RegisterWorkerRequest reg;
    reg.set_name("w");
    pb::RegisterWorkerResponse rw;
    ASSERT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &rw).ok());
    worker_ = rw.worker_id();
    auto st = store::Store::Connect({opts_.db_url});
    ASSERT_TRUE(st.ok()) << st.status();
    store_ = std::move(*st);
  }

  static std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "admin-token") {
    return BearerContext(token);
  }

  static pb::ModelResult Record(const pb::Job& job, const Night& night) {
    const int i = std::stoi(job.model_id().substr(5));
    pb::ModelResult r;
    r.set_job_id(job.job_id());
    r.set_model_id(job.model_id());
    r.set_run(job.run());
    r.set_opcov_ratio(1);
    for (pb::Mode mode : {pb::MODE_EAGER, pb::MODE_COMPILE}) {
      const V v = night(i, mode, job.run());
      pb::ModeVerdict* m = r.add_modes();
      m->set_mode(mode);
      m->set_status(v.status);
      m->set_error(v.error);
      m->set_rmse_ratio(v.rmse_ratio);
      if (mode == pb::MODE_COMPILE) m->set_compile_ms(v.compile_ms);
      if (v.device_us > 0 && v.status == pb::VERDICT_PASS) {
        pb::Perf* p = m->mutable_perf();
        p->set_device_us(v.device_us);
        p->set_flops(1e6);
        p->set_mfu(1e-4);
        p->set_launches(10);
        p->set_peak_device_bytes(4096);
        for (const auto& [op, us] : v.top_ops) {
          pb::OpTime* t = p->add_top_ops();
          t->set_op(op);
          t->set_us(us);
          t->set_share(us / v.device_us);
        }
        p->set_speedup(mode == pb::MODE_COMPILE ? v.speedup : NAN);
        p->set_compression(NAN);
      }
      if (!v.suspect.empty()) {
        m->set_audited(true);
        pb::Suspect* s = m->add_suspects();
        s->set_op(v.suspect);
        s->set_ratio(3.1);
        s->set_calls(1);
        s->set_total_calls(2);
      }
    }
    return r;
  }

  // A sweep of every model on `profile`, reported shard by shard (confirmation reruns too)
  // until none is left: it ends done.
  int64_t RunSweep(const std::string& profile, int64_t baseline, const Night& night) {
    pb::CreateSweepRequest cr;
    cr.set_name(profile);
    cr.mutable_profile()->set_name(profile);
    cr.mutable_profile()->set_body("{\"v\":\"" + profile + "\"}");
    cr.add_modes("eager");
    cr.add_modes("compile");
    cr.set_baseline_sweep_id(baseline);
    cr.set_shard_max_models(250);
    pb::CreateSweepResponse created;
    auto st = stub_->CreateSweep(Ctx().get(), cr, &created);
    EXPECT_TRUE(st.ok()) << st.error_message();
    for (int leases = 0; leases < 2000; ++leases) {
      pb::LeaseShardRequest lq;
      lq.set_worker_id(worker_);
      pb::LeaseShardResponse lease;
        EXPECT_TRUE(stub_->LeaseShard(Ctx().get(), lq, &lease).ok());
      if (!lease.has_shard()) break;
      pb::ReportResultsRequest rep;
      rep.set_worker_id(worker_);
      rep.set_shard_id(lease.shard_id());
      rep.set_lease_token(lease.lease_token());
      rep.set_finish(true);
      for (const auto& job : lease.jobs()) *rep.add_results() = Record(job, night);
      pb::ReportResultsResponse rr;
        st = stub_->ReportResults(Ctx().get(), rep, &rr);
      EXPECT_TRUE(st.ok()) << st.error_message();
    }
    EXPECT_EQ(State(created.sweep_id()), "done");
    return created.sweep_id();
  }

  // The first column of the first row of `sql` on the test's database (NULL: 0).
  int64_t Count(const std::string& sql) {
    pqxx::connection c(opts_.db_url);
    pqxx::nontransaction n(c);
    const pqxx::result r = n.exec(sql);
    return r.empty() || r[0][0].is_null() ? 0 : r[0][0].as<int64_t>();
  }

  std::string State(int64_t sweep) {
    pqxx::connection c(opts_.db_url);
    pqxx::nontransaction n(c);
    return n.exec_params("SELECT state FROM sweeps WHERE sweep_id = $1", sweep)[0][0].c_str();
  }

  pb::DetectRegressionsResponse Detect(int64_t sweep) {
    auto d = store_->DetectRegressions(sweep, 0);
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? *d : pb::DetectRegressionsResponse();
  }

  std::vector<pb::Alert> Alerts(const std::string& state = "") {
    auto a = store_->ListAlerts(state, 0, 1000);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : std::vector<pb::Alert>();
  }

  // The (model, mode) pairs the alerts cover: each model's modes (an alert of a suspect op
  // spans the modes it broke).
  static std::set<std::pair<std::string, pb::Mode>> Covered(const std::vector<pb::Alert>& alerts) {
    std::set<std::pair<std::string, pb::Mode>> out;
    for (const auto& a : alerts) {
      for (const auto& m : a.models()) {
        EXPECT_GT(m.modes_size(), 0) << a.alert_id() << " " << m.model_id();
        for (int mode : m.modes()) out.insert({m.model_id(), static_cast<pb::Mode>(mode)});
      }
    }
    return out;
  }

  SchedulerOptions opts_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<pb::Scheduler::Stub> stub_;
  std::unique_ptr<pb::Query::Stub> query_;
  std::unique_ptr<store::Store> store_;
  int64_t worker_ = 0;
};

inline const Night kClean = [](int, pb::Mode, int) { return Pass(); };

// A free loopback port: bound, read, released (Alertmanager takes it; nothing else here binds).
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    if (fd >= 0) ::close(fd);
    return 0;
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Polls `done` every 20 ms until it holds or `seconds` pass.
inline bool Eventually(const std::function<bool()>& done, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

}  // namespace ts::scheduler::alerts_testing
