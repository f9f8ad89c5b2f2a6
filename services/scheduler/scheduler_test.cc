// The scheduler over real gRPC on loopback and a throwaway PostgreSQL.
#include "services/scheduler/scheduler.h"

#include <barrier>
#include <chrono>
#include <set>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "services/common/http_server.h"
#include "services/scheduler/scheduler_test_util.h"
#include "tests/fixtures/postgres_fixture.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

namespace pb = ::touchstone::v1;

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    opts_.db_url = TestDatabaseUrl();
    ASSERT_FALSE(opts_.db_url.empty());
    ASSERT_TRUE(opts_.tokens.Add(common::Role::kAdmin, "test-token").ok());
    auto s = Scheduler::Start(opts_);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = std::move(*s);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(sched_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    stub_ = pb::Scheduler::NewStub(channel);
  }

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "test-token") {
    return BearerContext(token);
  }

  void LoadModels(int n) {
    pb::UpsertModelsRequest up;
    for (int i = 0; i < n; ++i) {
      auto* m = up.add_models();
      m->set_id("org/m" + std::to_string(i));
      m->set_task("text-generation");
      m->set_arch("LlamaForCausalLM");
      m->set_family("llama");
      m->set_config_json("{\"model_type\": \"llama\"}");
    }
    pb::UpsertModelsResponse resp;
    auto st = stub_->UpsertModels(Ctx().get(), up, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    ASSERT_EQ(resp.inserted(), n);
  }

  // The value of an unlabelled metric on /metrics; -1 when it is not there.
  double Metric(const std::string& name) {
    auto m = common::HttpGet(sched_->http_port(), "/metrics", "test-token");
    if (!m.ok()) return -1;
    const std::string line = "\n" + name + " ";
    const size_t at = m->body.find(line);
    if (at == std::string::npos) return -1;
    return std::stod(m->body.substr(at + line.size()));
  }

  // Shuts the scheduler down, waits `down`, and starts a new one with opts_ on the same
  // database (a new port: the stub follows).
  void Restart(std::chrono::milliseconds down = std::chrono::milliseconds(0)) {
    sched_->Shutdown();
    sched_.reset();
    std::this_thread::sleep_for(down);
    auto s = Scheduler::Start(opts_);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = std::move(*s);
    stub_ = pb::Scheduler::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(sched_->grpc_port()), grpc::InsecureChannelCredentials()));
  }

  SchedulerOptions opts_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<pb::Scheduler::Stub> stub_;
};

TEST_F(SchedulerTest, BadArgumentsAreInvalidArgumentNamingTheField) {
  pb::LeaseShardRequest lease;  // worker_id missing
  pb::LeaseShardResponse lr;
  auto st = stub_->LeaseShard(Ctx().get(), lease, &lr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().substr(0, 10), "worker_id:");
  pb::CreateSweepRequest sweep;
  sweep.mutable_profile()->set_name("p");
  sweep.mutable_profile()->set_body("{}");
  sweep.add_modes("eagre");
  pb::CreateSweepResponse sr;
  st = stub_->CreateSweep(Ctx().get(), sweep, &sr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "modes[0]: unknown mode 'eagre'");
  // Names checked against the catalog in the database.
  LoadModels(3);
  sweep.clear_modes();
  sweep.mutable_filter()->add_archs("LlamaForCausalLMM");
  st = stub_->CreateSweep(Ctx().get(), sweep, &sr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().substr(0, 16), "filter.archs[0]:");
  pb::GetSweepRequest get;
  get.set_sweep_id(77);
  pb::SweepProgress p;
  EXPECT_EQ(stub_->GetSweep(Ctx().get(), get, &p).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST_F(SchedulerTest, TokenIsRequired) {
  pb::RegisterWorkerRequest reg;
  reg.set_name("w");
  pb::RegisterWorkerResponse resp;
  EXPECT_EQ(stub_->RegisterWorker(Ctx("").get(), reg, &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(stub_->RegisterWorker(Ctx("wrong").get(), reg, &resp).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &resp).ok());
  EXPECT_GT(resp.worker_id(), 0);
  EXPECT_DOUBLE_EQ(resp.heartbeat_interval_s(), opts_.lease_ttl_s / 3);
  // HTTP: /metrics (counts, no records) and /healthz need no token.
  EXPECT_EQ(common::HttpGet(sched_->http_port(), "/metrics")->status, 200);
  EXPECT_EQ(common::HttpGet(sched_->http_port(), "/healthz")->status, 200);
}

TEST_F(SchedulerTest, SweepOverGrpcWithStaleTokenRefusedAndMetrics) {
  LoadModels(5);
  pb::RegisterWorkerRequest reg;
  reg.set_name("w");
  pb::RegisterWorkerResponse w;
  ASSERT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &w).ok());
  pb::CreateSweepRequest sweep;
  sweep.mutable_profile()->set_name("p");
  sweep.mutable_profile()->set_body("{\"name\": \"p\"}");
  sweep.add_modes("eager");
  pb::CreateSweepResponse created;
  auto st = stub_->CreateSweep(Ctx().get(), sweep, &created);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(created.models(), 5);

  pb::LeaseShardRequest lq;
  lq.set_worker_id(w.worker_id());
  pb::LeaseShardResponse lease;
  ASSERT_TRUE(stub_->LeaseShard(Ctx().get(), lq, &lease).ok());
  ASSERT_TRUE(lease.has_shard());
  EXPECT_EQ(lease.profile().body(), "{\"name\": \"p\"}");
  EXPECT_EQ(lease.modes_size(), 1);
  pb::ReportResultsRequest report;
  report.set_worker_id(w.worker_id());
  report.set_shard_id(lease.shard_id());
  report.set_lease_token(lease.lease_token() + "x");
  for (const auto& j : lease.jobs()) {
    auto* m = report.add_results();
    m->set_job_id(j.job_id());
    m->set_model_id(j.model_id());
    auto* v = m->add_modes();
    v->set_mode(pb::MODE_EAGER);
    v->set_status(j.model_id() == "org/m0" ? pb::VERDICT_FAIL_ACCURACY : pb::VERDICT_PASS);
    m->set_total_ms(50);
  }
  pb::ReportResultsResponse rr;
  st = stub_->ReportResults(Ctx().get(), report, &rr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  report.set_lease_token(lease.lease_token());
  st = stub_->ReportResults(Ctx().get(), report, &rr);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(rr.accepted(), 5);
  pb::FinishShardRequest fin;
  fin.set_worker_id(w.worker_id());
  fin.set_shard_id(lease.shard_id());
  fin.set_lease_token(lease.lease_token());
  pb::FinishShardResponse fr;
  ASSERT_TRUE(stub_->FinishShard(Ctx().get(), fin, &fr).ok());
  EXPECT_EQ(fr.jobs_left(), 0);

  pb::GetSweepRequest get;
  get.set_sweep_id(created.sweep_id());
  pb::SweepProgress p;
  ASSERT_TRUE(stub_->GetSweep(Ctx().get(), get, &p).ok());
  EXPECT_EQ(p.state(), "done");
  EXPECT_EQ(p.models_recorded(), 5);
  EXPECT_EQ(p.failures(), 1);

  pb::ListResultsRequest lr;
  lr.set_sweep_id(created.sweep_id());
  lr.set_page_size(2);
  auto list_ctx = Ctx();  // a streaming call uses its context until Finish
  auto reader = stub_->ListResults(list_ctx.get(), lr);
  pb::ResultPage page;
  int rows = 0, pages = 0;
  while (reader->Read(&page)) {
    ++pages;
    rows += page.rows_size();
  }
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(rows, 5);
  EXPECT_EQ(pages, 3);

  auto m = common::HttpGet(sched_->http_port(), "/metrics", "test-token");
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->body.find("touchstone_scheduler_results_total{mode=\"eager\",status=\"pass\"} 4"),
            std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("touchstone_scheduler_leases_total 1"), std::string::npos);
  EXPECT_NE(m->body.find("touchstone_scheduler_rpc_duration_seconds_bucket"), std::string::npos);
}

// Many workers asking at once (more than the lease threads times the batch) while a report is
// in flight: every worker gets its own shard, the report is stored, and the count of open
// LeaseShard calls (which reports yield to) comes back to zero.
TEST_F(SchedulerTest, BurstOfLeasesEachGetsItsOwnShardAndTheReportStillLands) {
  constexpr int kWorkers = 40;
  LoadModels(kWorkers + 1);
  pb::CreateSweepRequest sweep;
  sweep.mutable_profile()->set_name("p");
  sweep.mutable_profile()->set_body("{}");
  sweep.add_modes("eager");
  sweep.set_shard_max_models(1);
  pb::CreateSweepResponse created;
  ASSERT_TRUE(stub_->CreateSweep(Ctx().get(), sweep, &created).ok());
  ASSERT_EQ(created.shards(), kWorkers + 1);

  auto register_worker = [&](const std::string& name) {
    pb::RegisterWorkerRequest reg;
    reg.set_name(name);
    pb::RegisterWorkerResponse w;
    EXPECT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &w).ok());
    return w.worker_id();
  };
  // The reporter holds a shard before the burst.
  const int64_t reporter = register_worker("reporter");
  pb::LeaseShardRequest lq;
  lq.set_worker_id(reporter);
  pb::LeaseShardResponse held;
  ASSERT_TRUE(stub_->LeaseShard(Ctx().get(), lq, &held).ok());
  ASSERT_TRUE(held.has_shard());
  pb::ReportResultsRequest report;
  report.set_worker_id(reporter);
  report.set_shard_id(held.shard_id());
  report.set_lease_token(held.lease_token());
  report.set_finish(true);
  for (const auto& j : held.jobs()) {
    auto* m = report.add_results();
    m->set_job_id(j.job_id());
    m->set_model_id(j.model_id());
    m->add_modes()->set_mode(pb::MODE_EAGER);
    m->mutable_modes(0)->set_status(pb::VERDICT_PASS);
  }

  std::vector<int64_t> ids;
  for (int i = 0; i < kWorkers; ++i) ids.push_back(register_worker("w" + std::to_string(i)));
  std::vector<pb::LeaseShardResponse> leases(kWorkers);
  std::vector<grpc::Status> statuses(kWorkers);
  std::barrier go(kWorkers + 1);
  std::vector<std::thread> threads;
  for (int i = 0; i < kWorkers; ++i) {
    threads.emplace_back([&, i] {
      pb::LeaseShardRequest q;
      q.set_worker_id(ids[i]);
      go.arrive_and_wait();
      statuses[i] = stub_->LeaseShard(Ctx().get(), q, &leases[i]);
    });
  }
  go.arrive_and_wait();
  pb::ReportResultsResponse rr;
  const grpc::Status rst = stub_->ReportResults(Ctx().get(), report, &rr);
  for (auto& t : threads) t.join();

  ASSERT_TRUE(rst.ok()) << rst.error_message();
  EXPECT_EQ(rr.accepted(), 1);
  std::set<int64_t> shards{held.shard_id()};
  for (int i = 0; i < kWorkers; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    ASSERT_TRUE(leases[i].has_shard()) << "worker " << i;
    EXPECT_EQ(leases[i].jobs_size(), 1);
    shards.insert(leases[i].shard_id());
  }
  EXPECT_EQ(shards.size(), static_cast<size_t>(kWorkers + 1));  // no shard handed out twice
  auto m = common::HttpGet(sched_->http_port(), "/metrics", "test-token");
  ASSERT_TRUE(m.ok());
  EXPECT_NE(m->body.find("touchstone_scheduler_lease_calls_open 0\n"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("touchstone_scheduler_leases_total " + std::to_string(kWorkers + 1) + "\n"),
            std::string::npos);
}

// A report that comes while more LeaseShard calls are open than there are lease threads holds
// its database work back for them, and touchstone_scheduler_report_yields_total counts it. The
// lease threads are held on a lock of the models table (the leasing statement reads it to hand
// out the jobs' configs; a report neither reads it nor changes a key that refers to it), so the
// backlog is there, whatever the timing, until the test lets it go.
TEST_F(SchedulerTest, ReportYieldsWhileLeaseCallsOutnumberLeaseThreads) {
  const int kCalls = opts_.lease_threads + 2;
  LoadModels(kCalls + 1);
  pb::CreateSweepRequest sweep;
  sweep.mutable_profile()->set_name("p");
  sweep.mutable_profile()->set_body("{}");
  sweep.add_modes("eager");
  sweep.set_shard_max_models(1);
  pb::CreateSweepResponse created;
  ASSERT_TRUE(stub_->CreateSweep(Ctx().get(), sweep, &created).ok());
  std::vector<int64_t> ids;
  for (int i = 0; i <= kCalls; ++i) {
    pb::RegisterWorkerRequest reg;
    reg.set_name("w" + std::to_string(i));
    pb::RegisterWorkerResponse w;
    ASSERT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &w).ok());
    ids.push_back(w.worker_id());
  }
  pb::LeaseShardRequest lq;
  lq.set_worker_id(ids[0]);
  pb::LeaseShardResponse held;
  ASSERT_TRUE(stub_->LeaseShard(Ctx().get(), lq, &held).ok());
  ASSERT_TRUE(held.has_shard());
  pb::ReportResultsRequest report;
  report.set_worker_id(ids[0]);
  report.set_shard_id(held.shard_id());
  report.set_lease_token(held.lease_token());
  auto* m = report.add_results();
  m->set_job_id(held.jobs(0).job_id());
  m->set_model_id(held.jobs(0).model_id());
  m->add_modes()->set_mode(pb::MODE_EAGER);
  m->mutable_modes(0)->set_status(pb::VERDICT_PASS);
  ASSERT_EQ(Metric("touchstone_scheduler_report_yields_total"), 0);

  pqxx::connection locker(opts_.db_url);
  pqxx::work lock(locker);
  lock.exec("LOCK TABLE models IN ACCESS EXCLUSIVE MODE");
  std::vector<pb::LeaseShardResponse> leases(kCalls);
  std::vector<grpc::Status> statuses(kCalls);
  std::vector<std::thread> threads;
  for (int i = 0; i < kCalls; ++i) {
    threads.emplace_back([&, i] {
      pb::LeaseShardRequest q;
      q.set_worker_id(ids[i + 1]);
      statuses[i] = stub_->LeaseShard(Ctx().get(), q, &leases[i]);
    });
  }
  // Every call is in (the gauge counts a call when it arrives), bounded.
  bool backlog = false;
  for (int i = 0; i < 1500 && !backlog; ++i) {
    backlog = Metric("touchstone_scheduler_lease_calls_open") == kCalls;
    if (!backlog) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pb::ReportResultsResponse rr;
  grpc::Status rst;
  double yields = -1, open_after_report = -1;
  if (backlog) {
    auto ctx = Ctx();  // a report held up by the lock fails instead of waiting for it
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    rst = stub_->ReportResults(ctx.get(), report, &rr);
    yields = Metric("touchstone_scheduler_report_yields_total");
    open_after_report = Metric("touchstone_scheduler_lease_calls_open");
  }
  lock.commit();
  for (auto& t : threads) t.join();

  ASSERT_TRUE(backlog) << "the LeaseShard calls never all showed as open";
  ASSERT_TRUE(rst.ok()) << rst.error_message();
  EXPECT_EQ(rr.accepted(), 1);
  EXPECT_EQ(yields, 1);
  EXPECT_EQ(open_after_report, kCalls);  // the backlog was still there when the report ended
  for (int i = 0; i < kCalls; ++i) {
    ASSERT_TRUE(statuses[i].ok()) << statuses[i].error_message();
    EXPECT_TRUE(leases[i].has_shard()) << "worker " << i;
  }
  // The server closes its count of a call after the reply is on its way: under load the client
  // can see the reply first.
  const auto settle = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (Metric("touchstone_scheduler_lease_calls_open") != 0 &&
         std::chrono::steady_clock::now() < settle) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Metric("touchstone_scheduler_lease_calls_open"), 0);
  EXPECT_EQ(Metric("touchstone_scheduler_report_yields_total"), 1);
}

TEST_F(SchedulerTest, RestartedSchedulerCarriesOn) {
  LoadModels(4);
  pb::RegisterWorkerRequest reg;
  reg.set_name("w");
  pb::RegisterWorkerResponse w;
  ASSERT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &w).ok());
  pb::CreateSweepRequest sweep;
  sweep.mutable_profile()->set_name("p");
  sweep.mutable_profile()->set_body("{}");
  sweep.set_shard_max_models(2);
  pb::CreateSweepResponse created;
  ASSERT_TRUE(stub_->CreateSweep(Ctx().get(), sweep, &created).ok());
  pb::LeaseShardRequest lq;
  lq.set_worker_id(w.worker_id());
  pb::LeaseShardResponse lease;
  ASSERT_TRUE(stub_->LeaseShard(Ctx().get(), lq, &lease).ok());
  // A new scheduler on the same database: the lease it never saw is still honoured.
  Restart();
  pb::HeartbeatRequest hb;
  hb.set_worker_id(w.worker_id());
  hb.set_shard_id(lease.shard_id());
  hb.set_lease_token(lease.lease_token());
  pb::HeartbeatResponse hr;
  auto st = stub_->Heartbeat(Ctx().get(), hb, &hr);
  EXPECT_TRUE(st.ok()) << st.error_message();
  pb::LeaseShardResponse second;
  ASSERT_TRUE(stub_->LeaseShard(Ctx().get(), lq, &second).ok());
  EXPECT_TRUE(second.has_shard());
  EXPECT_NE(second.shard_id(), lease.shard_id());
}

// Idle polls are answered from memory once the queue was seen empty; a sweep created here is
// leased by the very next poll.
TEST_F(SchedulerTest, IdleFleetRunsNoLeaseStatementsAndANewSweepIsLeasedAtOnce) {
  LoadModels(4);
  std::vector<int64_t> workers;
  for (int i = 0; i < 4; ++i) {
    pb::RegisterWorkerRequest reg;
    reg.set_name("w" + std::to_string(i));
    pb::RegisterWorkerResponse w;
    ASSERT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &w).ok());
    workers.push_back(w.worker_id());
  }
  const auto poll = [&](int64_t worker) {
    pb::LeaseShardRequest lq;
    lq.set_worker_id(worker);
    pb::LeaseShardResponse lease;
    auto st = stub_->LeaseShard(Ctx().get(), lq, &lease);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return lease;
  };
  for (int64_t w : workers) EXPECT_FALSE(poll(w).has_shard());  // each seen idle once
  const double statements = Metric("touchstone_scheduler_lease_statements_total");
  const double idle = Metric("touchstone_scheduler_lease_idle_answers_total");
  ASSERT_GE(statements, 1);
  int polls = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2500);
  while (std::chrono::steady_clock::now() < until) {
    pb::LeaseShardResponse l = poll(workers[polls % workers.size()]);
    EXPECT_FALSE(l.has_shard());
    EXPECT_EQ(l.retry_after_ms(), 500);
    ++polls;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_GT(polls, 100);
  // About one statement per idle window (1 s) in 2.5 s of polling, not one per poll.
  EXPECT_LE(Metric("touchstone_scheduler_lease_statements_total") - statements, 4);
  EXPECT_GE(Metric("touchstone_scheduler_lease_idle_answers_total") - idle, polls - 8);
  // A sweep created through this scheduler is leased by the next poll.
  pb::CreateSweepRequest sweep;
  sweep.mutable_profile()->set_name("p");
  sweep.mutable_profile()->set_body("{}");
  sweep.set_shard_max_models(1);
  pb::CreateSweepResponse created;
  ASSERT_TRUE(stub_->CreateSweep(Ctx().get(), sweep, &created).ok());
  EXPECT_TRUE(poll(workers[0]).has_shard());
}

// Long polls (issue 14, item 8): an idle call with wait_ms is held, not answered every 0.5 s.
// It ends with "nothing" and retry_after_ms 0 when its wait is over, is answered with a shard as
// soon as a sweep is created here or through another scheduler on the database, and is
// answered at once when the scheduler shuts down.
TEST_F(SchedulerTest, LongPollsAreHeldUntilWorkIsQueuedOrTheirWaitEnds) {
  using Clock = std::chrono::steady_clock;
  LoadModels(4);
  std::vector<int64_t> workers;
  for (int i = 0; i < 3; ++i) {
    pb::RegisterWorkerRequest reg;
    reg.set_name("lp" + std::to_string(i));
    pb::RegisterWorkerResponse w;
    ASSERT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &w).ok());
    workers.push_back(w.worker_id());
  }
  struct Poll {
    grpc::Status st;
    pb::LeaseShardResponse lease;
    double seconds = 0;
  };
  const auto long_poll = [&](pb::Scheduler::Stub* stub, int64_t worker, uint32_t wait_ms) {
    pb::LeaseShardRequest lq;
    lq.set_worker_id(worker);
    lq.set_wait_ms(wait_ms);
    Poll p;
    const auto t0 = Clock::now();
    p.st = stub->LeaseShard(Ctx().get(), lq, &p.lease);
    p.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    return p;
  };
  const auto await_parked = [&](double n) {
    for (int i = 0; i < 400 && Metric("touchstone_scheduler_lease_calls_parked") != n; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return Metric("touchstone_scheduler_lease_calls_parked");
  };

  // Nothing queued: held for its wait, then "nothing", ask again at once.
  const double statements = Metric("touchstone_scheduler_lease_statements_total");
  Poll idle = long_poll(stub_.get(), workers[0], 1500);
  ASSERT_TRUE(idle.st.ok()) << idle.st.error_message();
  EXPECT_FALSE(idle.lease.has_shard());
  EXPECT_EQ(idle.lease.retry_after_ms(), 0);
  EXPECT_GE(idle.seconds, 1.3);
  EXPECT_LT(idle.seconds, 4.0);
  EXPECT_LE(Metric("touchstone_scheduler_lease_statements_total") - statements, 2);
  pb::LeaseShardRequest too_long;
  too_long.set_worker_id(workers[0]);
  too_long.set_wait_ms(60001);
  pb::LeaseShardResponse refused;
  grpc::Status st = stub_->LeaseShard(Ctx().get(), too_long, &refused);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().substr(0, 8), "wait_ms:");

  // Two held calls; a sweep created here answers both with a shard each, at once.
  Poll a, b;
  std::thread ta([&] { a = long_poll(stub_.get(), workers[1], 20000); });
  std::thread tb([&] { b = long_poll(stub_.get(), workers[2], 20000); });
  EXPECT_EQ(await_parked(2), 2);
  pb::CreateSweepRequest sweep;
  sweep.mutable_profile()->set_name("p");
  sweep.mutable_profile()->set_body("{}");
  sweep.set_shard_max_models(1);
  sweep.mutable_filter()->add_model_ids("org/m0");
  sweep.mutable_filter()->add_model_ids("org/m1");
  pb::CreateSweepResponse created;
  const auto t_create = Clock::now();
  ASSERT_TRUE(stub_->CreateSweep(Ctx().get(), sweep, &created).ok());
  ta.join();
  tb.join();
  const double after_create = std::chrono::duration<double>(Clock::now() - t_create).count();
  ASSERT_TRUE(a.st.ok() && b.st.ok()) << a.st.error_message() << b.st.error_message();
  EXPECT_TRUE(a.lease.has_shard());
  EXPECT_TRUE(b.lease.has_shard());
  EXPECT_NE(a.lease.shard_id(), b.lease.shard_id());
  EXPECT_LT(after_create, 1.0);
  EXPECT_EQ(Metric("touchstone_scheduler_lease_calls_parked"), 0);

  // A sweep created through another scheduler on the same database: seen by this one's
  // ticker (its queue count) within a tick.
  auto other = Scheduler::Start(opts_);
  ASSERT_TRUE(other.ok()) << other.status();
  auto other_stub = pb::Scheduler::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string((*other)->grpc_port()), grpc::InsecureChannelCredentials()));
  Poll c;
  std::thread tc([&] { c = long_poll(stub_.get(), workers[0], 20000); });
  EXPECT_EQ(await_parked(1), 1);
  sweep.mutable_filter()->clear_model_ids();
  sweep.mutable_filter()->add_model_ids("org/m2");
  const auto t_other = Clock::now();
  ASSERT_TRUE(other_stub->CreateSweep(Ctx().get(), sweep, &created).ok());
  tc.join();
  ASSERT_TRUE(c.st.ok()) << c.st.error_message();
  EXPECT_TRUE(c.lease.has_shard());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t_other).count(), 3.0);
  (*other)->Shutdown();

  // Shutdown answers a held call at once ("nothing"), rather than after its 20 s.
  Poll d;
  std::thread td([&] { d = long_poll(stub_.get(), workers[1], 20000); });
  EXPECT_EQ(await_parked(1), 1);
  sched_->Shutdown();
  td.join();
  EXPECT_LT(d.seconds, 5.0);
  EXPECT_FALSE(d.lease.has_shard());
}

// A LeaseShard whose answer was lost, retried with its request id after other workers found the
// queue empty: the retry still gets its shard and token back (from the database, not the idle
// answer), and no second shard.
TEST_F(SchedulerTest, LeaseRetriedWithItsRequestIdGetsItsShardEvenWhenTheQueueIsIdle) {
  LoadModels(2);
  pb::RegisterWorkerResponse a, b;
  pb::RegisterWorkerRequest reg;
  reg.set_name("a");
  ASSERT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &a).ok());
  reg.set_name("b");
  ASSERT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &b).ok());
  pb::CreateSweepRequest sweep;
  sweep.mutable_profile()->set_name("p");
  sweep.mutable_profile()->set_body("{}");
  pb::CreateSweepResponse created;
  ASSERT_TRUE(stub_->CreateSweep(Ctx().get(), sweep, &created).ok());
  ASSERT_EQ(created.shards(), 1);
  pb::LeaseShardRequest lq;
  lq.set_worker_id(a.worker_id());
  lq.set_request_id("a-lease-000001");
  pb::LeaseShardResponse first, retry, other;
  ASSERT_TRUE(stub_->LeaseShard(Ctx().get(), lq, &first).ok());
  ASSERT_TRUE(first.has_shard());
  pb::LeaseShardRequest bq;
  bq.set_worker_id(b.worker_id());
  ASSERT_TRUE(stub_->LeaseShard(Ctx().get(), bq, &other).ok());
  EXPECT_FALSE(other.has_shard());  // the queue is now known to be empty
  ASSERT_TRUE(stub_->LeaseShard(Ctx().get(), lq, &retry).ok());
  ASSERT_TRUE(retry.has_shard());
  EXPECT_TRUE(retry.replayed());
  EXPECT_EQ(retry.shard_id(), first.shard_id());
  EXPECT_EQ(retry.lease_token(), first.lease_token());
  EXPECT_EQ(retry.jobs_size(), 2);
}

TEST(SchedulerExposureTest, OpenModeRefusesListenersOthersCanReachUnlessInsecure) {
  SchedulerOptions o;
  o.db_url = TestDatabaseUrl();
  o.listen = "0.0.0.0:0";
  auto s = Scheduler::Start(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message().substr(0, 7), "listen:") << s.status();
  o.listen = "127.0.0.1:0";
  o.http_host = "0.0.0.0";
  s = Scheduler::Start(o);
  EXPECT_EQ(s.status().message().substr(0, 10), "http_host:") << s.status();
  o.insecure = true;
  s = Scheduler::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  (*s)->Shutdown();
  // With tokens, any address.
  o.insecure = false;
  o.listen = "0.0.0.0:0";
  ASSERT_TRUE(o.tokens.Add(common::Role::kAdmin, "exposure-token").ok());
  s = Scheduler::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  auto health = common::HttpGet((*s)->http_port(), "/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
}

// The scheduler is down for three lease TTLs while its worker keeps running: the restarted one
// gives the lease its start-up grace, so the worker's heartbeat and report on its old token
// are taken, and no lease expires.
TEST_F(SchedulerTest, OutageOfThreeTtlsLosesNoLeaseThanksToTheStartupGrace) {
  LoadModels(2);
  opts_.lease_ttl_s = 1;
  Restart();
  pb::RegisterWorkerRequest reg;
  reg.set_name("w");
  pb::RegisterWorkerResponse w;
  ASSERT_TRUE(stub_->RegisterWorker(Ctx().get(), reg, &w).ok());
  pb::CreateSweepRequest sweep;
  sweep.mutable_profile()->set_name("p");
  sweep.mutable_profile()->set_body("{}");
  sweep.add_modes("eager");
  pb::CreateSweepResponse created;
  ASSERT_TRUE(stub_->CreateSweep(Ctx().get(), sweep, &created).ok());
  pb::LeaseShardRequest lq;
  lq.set_worker_id(w.worker_id());
  pb::LeaseShardResponse lease;
  ASSERT_TRUE(stub_->LeaseShard(Ctx().get(), lq, &lease).ok());
  ASSERT_TRUE(lease.has_shard());
  Restart(std::chrono::seconds(3));  // 3 TTLs with nobody answering
  std::this_thread::sleep_for(std::chrono::milliseconds(600));  // a few ticks of the new one
  pb::HeartbeatRequest hb;
  hb.set_worker_id(w.worker_id());
  hb.set_shard_id(lease.shard_id());
  hb.set_lease_token(lease.lease_token());
  hb.set_job_id(lease.jobs(0).job_id());
  pb::HeartbeatResponse hr;
  auto st = stub_->Heartbeat(Ctx().get(), hb, &hr);
  ASSERT_TRUE(st.ok()) << st.error_message();
  pb::ReportResultsRequest report;
  report.set_worker_id(w.worker_id());
  report.set_shard_id(lease.shard_id());
  report.set_lease_token(lease.lease_token());
  report.set_finish(true);
  for (const auto& j : lease.jobs()) {
    auto* m = report.add_results();
    m->set_job_id(j.job_id());
    m->set_model_id(j.model_id());
    auto* v = m->add_modes();
    v->set_mode(pb::MODE_EAGER);
    v->set_status(pb::VERDICT_PASS);
  }
  pb::ReportResultsResponse rr;
  st = stub_->ReportResults(Ctx().get(), report, &rr);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(rr.accepted(), 2);
  pqxx::connection c(opts_.db_url);
  pqxx::nontransaction n(c);
  EXPECT_EQ(n.exec("SELECT coalesce(sum(expiries), 0) FROM shards")[0][0].as<int>(), 0);
  EXPECT_EQ(n.exec("SELECT coalesce(sum(lost_leases), 0) FROM jobs")[0][0].as<int>(), 0);
  EXPECT_GE(Metric("touchstone_scheduler_lease_events_total{event=\"graced\"}"), 1);
}

}  // namespace
}  // namespace ts::scheduler
