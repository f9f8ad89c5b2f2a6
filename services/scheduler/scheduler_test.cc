// The scheduler over real gRPC on loopback and a throwaway PostgreSQL.
#include "services/scheduler/scheduler.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "services/common/http_server.h"
#include "tests/fixtures/postgres_fixture.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

namespace pb = ::touchstone::v1;

class SchedulerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto* cluster = testing::PostgresCluster::Get();
    ASSERT_NE(cluster, nullptr);
    opts_.db_url =
        cluster->NewDatabase(::testing::UnitTest::GetInstance()->current_test_info()->name());
    opts_.token = "test-token";
    auto s = Scheduler::Start(opts_);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = std::move(*s);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(sched_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    stub_ = pb::Scheduler::NewStub(channel);
  }

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "test-token") {
    auto ctx = std::make_unique<grpc::ClientContext>();
    if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
    return ctx;
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
  // HTTP: /metrics needs the token, /healthz does not.
  EXPECT_EQ(common::HttpGet(sched_->http_port(), "/metrics")->status, 401);
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
    v->set_mode("eager");
    v->set_status(j.model_id() == "org/m0" ? "fail_accuracy" : "pass");
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
  sched_->Shutdown();
  sched_.reset();
  auto s = Scheduler::Start(opts_);
  ASSERT_TRUE(s.ok()) << s.status();
  sched_ = std::move(*s);
  stub_ = pb::Scheduler::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(sched_->grpc_port()), grpc::InsecureChannelCredentials()));
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

}  // namespace
}  // namespace ts::scheduler
