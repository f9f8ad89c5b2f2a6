// Two touchstone-scheduler processes on one PostgreSQL serve one fleet (issue 13); one is
// killed with SIGKILL mid-sweep. The fleet is simulated (worker threads speaking the worker
// API over real gRPC, a result per model, as bench/scheduler_bench does) so that this runs
// without the runner; tests/sweep_test.cc runs the same with real workers. A worker whose
// scheduler dies goes on with the other one, as behind a Kubernetes Service, carrying its
// lease: the lease lives in the database, so its reports are taken there.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>
#include <thread>

#include "proto/names.h"
#include "services/common/process.h"
#include "services/scheduler/scheduler_test_util.h"
#include "tests/fixtures/subprocess.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using Clock = std::chrono::steady_clock;

constexpr int kModels = 160;

class MultiSchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    db_ = TestDatabaseUrl();
    ASSERT_FALSE(db_.empty());
    char tmpl[] = "/tmp/ts-multi-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (pid_t p : pids_) {
      if (p > 0) common::Stop(p, 5);
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  // Starts a scheduler process; returns its gRPC target.
  std::string Start(const std::string& name) {
    const fs::path ports = dir_ / (name + ".ports");
    common::SpawnOptions o;
    o.log_path = (dir_ / (name + ".log")).string();
    auto pid =
        common::Spawn({TS_SCHEDULER_BIN, "--db", db_, "--listen", "127.0.0.1:0", "--http-port",
                       "-1", "--port-file", ports.string(), "--lease-ttl", "3"},
                      o);
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) return "";
    pids_.push_back(*pid);
    for (int i = 0; i < 600 && !fs::exists(ports); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(fs::exists(ports)) << testing::ReadText(o.log_path);
    if (!fs::exists(ports)) return "";
    auto j = nlohmann::json::parse(testing::ReadText(ports));
    return "127.0.0.1:" + std::to_string(j["grpc_port"].get<int>());
  }
  int64_t Count(const std::string& sql) {
    pqxx::connection c(db_);
    pqxx::nontransaction n(c);
    return n.exec(sql)[0][0].as<int64_t>();
  }
  std::string db_;
  fs::path dir_;
  std::vector<pid_t> pids_;
};

std::unique_ptr<pb::Scheduler::Stub> Stub(const std::string& target) {
  return pb::Scheduler::NewStub(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()));
}

TEST_F(MultiSchedulerTest, TwoSchedulersServeOneFleetAndOneKilledLosesNothing) {
  const std::string a = Start("a");
  const std::string b = Start("b");
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  auto admin = Stub(a);
  pb::UpsertModelsRequest up;
  pb::CreateSweepRequest create;
  for (int i = 0; i < kModels; ++i) {
    auto* m = up.add_models();
    m->set_id("org/m" + std::to_string(i));
    m->set_task("text-generation");
    m->set_arch("LlamaForCausalLM");
    m->set_family("llama");
    m->set_config_json("{}");
  }
  pb::UpsertModelsResponse ur;
  ASSERT_TRUE(admin->UpsertModels(BearerContext("").get(), up, &ur).ok());
  create.set_name("two-schedulers");
  create.mutable_profile()->set_name("p");
  create.mutable_profile()->set_body("{}");
  create.set_shard_max_models(4);
  pb::CreateSweepResponse created;
  ASSERT_TRUE(admin->CreateSweep(BearerContext("").get(), create, &created).ok());
  ASSERT_EQ(created.models(), kModels);

  // Four simulated workers, two on each scheduler. Each reports one model at a time, 10 ms
  // apart, so that the kill lands mid-shard. UNAVAILABLE from its scheduler: switch to the
  // other target and retry the same call (reports are idempotent).
  std::atomic<bool> b_dead{false};
  std::atomic<int> leases_a{0}, leases_b{0}, switched{0}, stale{0};
  std::vector<std::thread> fleet;
  for (int w = 0; w < 4; ++w) {
    fleet.emplace_back([&, w] {
      bool on_b = w % 2 == 1;
      auto stub = Stub(on_b ? b : a);
      auto call = [&](auto method, const auto& req, auto* resp) {
        for (int tries = 0; tries < 400; ++tries) {
          grpc::ClientContext ctx;
          ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
          grpc::Status st = ((*stub).*method)(&ctx, req, resp);
          if (st.error_code() != grpc::StatusCode::UNAVAILABLE &&
              st.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
            return st;
          }
          if (on_b && b_dead) {  // the Service now routes to the survivor
            on_b = false;
            stub = Stub(a);
            ++switched;
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(25));
        }
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "gave up");
      };
      pb::RegisterWorkerRequest reg;
      reg.set_name("sim-" + std::to_string(w));
      pb::RegisterWorkerResponse rr;
      if (!call(&pb::Scheduler::Stub::RegisterWorker, reg, &rr).ok()) return;
      for (;;) {
        pb::LeaseShardRequest lq;
        lq.set_worker_id(rr.worker_id());
        pb::LeaseShardResponse lease;
        if (!call(&pb::Scheduler::Stub::LeaseShard, lq, &lease).ok()) return;
        if (!lease.has_shard()) {
          pb::GetSweepRequest g;
          g.set_sweep_id(created.sweep_id());
          pb::SweepProgress p;
          if (call(&pb::Scheduler::Stub::GetSweep, g, &p).ok() && p.state() != "running") return;
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
          continue;
        }
        ++(on_b ? leases_b : leases_a);
        bool lost = false;
        for (int k = 0; k < lease.jobs_size() && !lost; ++k) {
          const pb::Job& j = lease.jobs(k);
          pb::ReportResultsRequest rep;
          rep.set_worker_id(rr.worker_id());
          rep.set_shard_id(lease.shard_id());
          rep.set_lease_token(lease.lease_token());
          rep.set_finish(k + 1 == lease.jobs_size());
          auto* m = rep.add_results();
          m->set_job_id(j.job_id());
          m->set_model_id(j.model_id());
          m->set_run(j.run());
          for (pb::Mode mode : proto::AllModes()) {
            auto* v = m->add_modes();
            v->set_mode(mode);
            v->set_status(pb::VERDICT_PASS);
          }
          pb::ReportResultsResponse resp;
          std::this_thread::sleep_for(std::chrono::milliseconds(10));
          grpc::Status st = call(&pb::Scheduler::Stub::ReportResults, rep, &resp);
          if (st.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
            ++stale;  // the lease expired while we were cut off: drop the shard
            lost = true;
          } else if (!st.ok()) {
            return;
          }
        }
      }
    });
  }
  // Both schedulers hand out leases, then b dies mid-sweep.
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while ((leases_a == 0 || leases_b == 0 || Count("SELECT count(*) FROM model_runs") < 40) &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_GT(leases_b.load(), 0) << "scheduler b served no lease";
  ASSERT_GT(leases_a.load(), 0) << "scheduler a served no lease";
  const int64_t before = Count("SELECT count(*) FROM model_runs");
  ::kill(pids_[1], SIGKILL);
  common::WaitFor(pids_[1], 10);
  pids_[1] = -1;
  b_dead = true;
  for (auto& t : fleet) t.join();

  EXPECT_LT(before, kModels) << "the kill came after the sweep";
  EXPECT_GT(switched.load(), 0) << "no worker had to leave the killed scheduler";
  pb::GetSweepRequest g;
  g.set_sweep_id(created.sweep_id());
  pb::SweepProgress p;
  grpc::ClientContext ctx;
  ASSERT_TRUE(admin->GetSweep(&ctx, g, &p).ok());
  EXPECT_EQ(p.state(), "done");
  EXPECT_EQ(p.models_expected(), kModels);
  EXPECT_EQ(p.models_recorded(), p.models_expected());
  EXPECT_EQ(p.duplicates(), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM results WHERE run = 1"), 3 * kModels);
  EXPECT_EQ(Count("SELECT count(DISTINCT (model_id, mode)) FROM results WHERE run = 1"),
            3 * kModels);
}

}  // namespace
}  // namespace ts::scheduler
