// Issue 11 over real gRPC on loopback and a throwaway PostgreSQL: sweeps whose records are
// written here by hand (primary runs and their confirmation reruns, reported through the real
// ReportResults path), then regression detection (Store::DetectRegressions) and its alerts:
// the regressed (model, mode) set, one alert per cause, flaky and crashing flips never alerted,
// idempotence, a third identical sweep, resolution after 3 clean sweeps, reopening.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <cstdio>
#include <map>
#include <set>
#include <thread>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "services/common/http_server.h"
#include "services/common/process.h"
#include "services/scheduler/alert_delivery.h"
#include "services/scheduler/scheduler.h"
#include "services/scheduler/scheduler_test_util.h"
#include "services/store/store.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "tests/fixtures/subprocess.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

namespace pb = ::touchstone::v1;

constexpr int kModels = 20;  // org/m0..9: GPT2LMHeadModel, org/m10..19: BertForMaskedLM

// One mode's verdict in a run: status, error, first suspect ("" none).
struct V {
  pb::Verdict status = pb::VERDICT_PASS;
  std::string error;
  std::string suspect;
};
// (model index, mode, run) -> verdict; anything not listed passes.
using Night = std::function<V(int model, pb::Mode mode, int run)>;

V Pass() { return {}; }

// sim-2.1's night: a gelu defect breaks eager on m0..m5 (one cause), cumsum stops compiling m10,
// m11 hits a device error (its message differs only in numbers from run to run), m12 fails
// eager on its primary run only (flaky), m13 crashes every run (infrastructure).
V Broken(int i, pb::Mode mode, int run) {
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

  // The (model, mode) pairs the alerts cover.
  static std::set<std::pair<std::string, pb::Mode>> Covered(const std::vector<pb::Alert>& alerts) {
    std::set<std::pair<std::string, pb::Mode>> out;
    for (const auto& a : alerts) {
      for (const auto& m : a.models()) out.insert({m.model_id(), a.mode()});
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

const Night kClean = [](int, pb::Mode, int) { return Pass(); };

TEST_F(AlertsTest, OneAlertPerCauseCoveringExactlyTheDeterministicRegressions) {
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  const int64_t head = RunSweep("sim-2.1", base, Broken);
  const pb::DetectRegressionsResponse d = Detect(head);
  EXPECT_EQ(d.line(), "sim");
  EXPECT_EQ(d.flips(), 9);          // m0..5, m10, m11, m12 (m13's crash never counts)
  EXPECT_EQ(d.deterministic(), 8);  // all but m12
  EXPECT_EQ(d.flaky(), 1);
  EXPECT_EQ(d.opened_size(), 3);
  const std::vector<pb::Alert> alerts = Alerts("open");
  ASSERT_EQ(alerts.size(), 3u);
  std::set<std::pair<std::string, pb::Mode>> want;
  for (int i = 0; i <= 5; ++i) want.insert({"org/m" + std::to_string(i), pb::MODE_EAGER});
  want.insert({"org/m10", pb::MODE_COMPILE});
  want.insert({"org/m11", pb::MODE_EAGER});
  EXPECT_EQ(Covered(alerts), want);
  std::map<std::string, pb::Alert> by_cause;
  for (const auto& a : alerts) by_cause[a.cause_kind() + " " + a.cause()] = a;
  ASSERT_TRUE(by_cause.count("suspect aten::gelu"));
  const pb::Alert& gelu = by_cause["suspect aten::gelu"];
  EXPECT_EQ(gelu.models_size(), 6);  // one cause across six models: one alert
  EXPECT_EQ(gelu.first_sweep_id(), head);
  EXPECT_EQ(gelu.severity(), "major");
  EXPECT_EQ(std::vector<std::string>(gelu.archs().begin(), gelu.archs().end()),
            std::vector<std::string>{"GPT2LMHeadModel"});
  ASSERT_TRUE(by_cause.count("op aten::cumsum"));
  EXPECT_EQ(by_cause["op aten::cumsum"].mode(), pb::MODE_COMPILE);
  int signatures = 0;
  for (const auto& [k, a] : by_cause) {
    if (a.cause_kind() == "signature") {
      ++signatures;
      EXPECT_EQ(a.cause_text(), "queue N stalled at X");
    }
  }
  EXPECT_EQ(signatures, 1);
}

TEST_F(AlertsTest, DetectingTwiceChangesNothingAndAnIdenticalSweepOpensNothing) {
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  const int64_t head = RunSweep("sim-2.1", base, Broken);
  Detect(head);
  std::string before;
  for (const auto& a : Alerts()) before += a.DebugString();
  const pb::DetectRegressionsResponse again = Detect(head);
  EXPECT_EQ(again.opened_size() + again.updated_size() + again.reopened_size(), 0);
  std::string after;
  for (const auto& a : Alerts()) after += a.DebugString();
  EXPECT_EQ(after, before);
  // A third sweep, identical: nothing flips, the causes are still there, nothing new opens.
  const int64_t third = RunSweep("sim-2.1", head, Broken);
  const pb::DetectRegressionsResponse d3 = Detect(third);
  EXPECT_EQ(d3.deterministic(), 0);
  EXPECT_EQ(d3.opened_size(), 0);
  EXPECT_EQ(d3.resolved_size(), 0);
  const std::vector<pb::Alert> alerts = Alerts("open");
  ASSERT_EQ(alerts.size(), 3u);
  for (const auto& a : alerts) {
    EXPECT_EQ(a.last_sweep_id(), third) << a.cause();
    EXPECT_EQ(a.clean_sweeps(), 0);
  }
}

TEST_F(AlertsTest, ThreeCleanSweepsResolveAndARecurrenceReopens) {
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  int64_t prev = RunSweep("sim-2.1", base, Broken);
  Detect(prev);
  for (int night = 1; night <= 3; ++night) {
    prev = RunSweep("sim-2.2", prev, kClean);
    const pb::DetectRegressionsResponse d = Detect(prev);
    EXPECT_EQ(d.resolved_size(), night == 3 ? 3 : 0) << night;
    EXPECT_EQ(Alerts("open").size(), night == 3 ? 0u : 3u) << night;
  }
  ASSERT_EQ(Alerts("resolved").size(), 3u);
  const int64_t back = RunSweep("sim-2.3", prev, [](int i, pb::Mode mode, int) {
    if (mode == pb::MODE_EAGER && i == 7) return V{pb::VERDICT_FAIL_ACCURACY, "x", "aten::gelu"};
    return Pass();
  });
  const pb::DetectRegressionsResponse d = Detect(back);
  EXPECT_EQ(d.opened_size(), 0);
  ASSERT_EQ(d.reopened_size(), 1);
  const std::vector<pb::Alert> open = Alerts("open");
  ASSERT_EQ(open.size(), 1u);
  EXPECT_EQ(open[0].cause(), "aten::gelu");
  EXPECT_EQ(open[0].reopened(), 1);
  EXPECT_EQ(open[0].last_sweep_id(), back);
  EXPECT_EQ(open[0].models_size(), 7);  // m0..5 from the first time, m7 now
}

TEST_F(AlertsTest, FlakyTwiceInFiveSweepsIsQuarantinedAndNeverAlerted) {
  const auto flaky = [](int i, pb::Mode mode, int run) {
    if (mode == pb::MODE_EAGER && i == 3 && run == 1) return V{pb::VERDICT_FAIL_ACCURACY, "f", ""};
    return Pass();
  };
  int64_t prev = RunSweep("sim-2.0", 0, kClean);
  prev = RunSweep("sim-2.1", prev, flaky);
  const pb::DetectRegressionsResponse first = Detect(prev);
  EXPECT_EQ(first.flaky(), 1);
  EXPECT_EQ(first.newly_quarantined(), 0);  // one flake
  prev = RunSweep("sim-2.1", prev, kClean);
  Detect(prev);
  prev = RunSweep("sim-2.1", prev, flaky);
  const pb::DetectRegressionsResponse d = Detect(prev);
  EXPECT_EQ(d.newly_quarantined(), 1);  // the second flake in 4 sweeps
  EXPECT_EQ(d.quarantined(), 1);        // its flip is counted as quarantined, not alerted
  EXPECT_EQ(d.flaky(), 0);
  EXPECT_TRUE(Alerts().empty());
  // Quarantined: even a deterministic failure of m3's eager raises no alert.
  prev = RunSweep("sim-2.1", prev, [](int i, pb::Mode mode, int) {
    if (mode == pb::MODE_EAGER && i == 3) return V{pb::VERDICT_FAIL_ACCURACY, "f", ""};
    return Pass();
  });
  const pb::DetectRegressionsResponse q = Detect(prev);
  EXPECT_EQ(q.quarantined(), 0);  // fail -> fail: no flip
  EXPECT_TRUE(Alerts().empty());
  // Three passes in a row release it.
  for (int night = 1; night <= 3; ++night) {
    prev = RunSweep("sim-2.1", prev, kClean);
    EXPECT_EQ(Detect(prev).released(), night == 3 ? 1 : 0) << night;
  }
}

TEST_F(AlertsTest, ErrorsNameTheField) {
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  const int64_t head = RunSweep("sim-2.1", base, Broken);
  auto d = store_->DetectRegressions(9999, 0);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(d.status().message(), "sweep_id: no sweep 9999");
  d = store_->DetectRegressions(base, 0);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  d = store_->DetectRegressions(head, head);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(d.status().message().substr(0, 18), "baseline_sweep_id:");
  auto a = store_->AckAlert(77, "n", "");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Alerts().empty());  // nothing was written by the refused calls
}

TEST_F(AlertsTest, QueryApiListsPagesAcknowledgesAndRefusesReaders) {
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  const int64_t head = RunSweep("sim-2.1", base, Broken);
  pb::DetectRegressionsRequest dr;
  dr.set_sweep_id(head);
  pb::DetectRegressionsResponse detected;
  EXPECT_EQ(query_->DetectRegressions(Ctx("reader-token").get(), dr, &detected).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  grpc::Status st = query_->DetectRegressions(Ctx().get(), dr, &detected);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(detected.opened_size(), 3);
  // Every page of one alert each: the three, newest first.
  std::vector<int64_t> ids;
  pb::ListAlertsRequest lr;
  lr.set_state("open");
  lr.set_page_size(1);
  for (int pages = 0; pages < 10; ++pages) {
    pb::ListAlertsResponse page;
    st = query_->ListAlerts(Ctx("reader-token").get(), lr, &page);
    ASSERT_TRUE(st.ok()) << st.error_message();
    for (const auto& a : page.alerts()) ids.push_back(a.alert_id());
    if (page.next_page_token().empty()) break;
    lr.set_page_token(page.next_page_token());
  }
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_GT(ids[0], ids[1]);
  EXPECT_GT(ids[1], ids[2]);
  pb::AckAlertRequest ack;
  ack.set_alert_id(ids[0]);
  ack.set_note("known: gelu tolerance in 2.1, fix in 2.2");
  ack.set_by("oncall");
  pb::Alert acked;
  EXPECT_EQ(query_->AckAlert(Ctx("reader-token").get(), ack, &acked).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  st = query_->AckAlert(Ctx().get(), ack, &acked);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(acked.state(), "acknowledged");
  EXPECT_EQ(acked.ack_note(), ack.note());
  EXPECT_EQ(acked.ack_by(), "oncall");
  EXPECT_GT(acked.ack_at().seconds(), 0);
  pb::ListAlertsRequest all;
  all.set_state("acknowledged");
  pb::ListAlertsResponse got;
  ASSERT_TRUE(query_->ListAlerts(Ctx("reader-token").get(), all, &got).ok());
  ASSERT_EQ(got.alerts_size(), 1);
  EXPECT_EQ(got.alerts(0).alert_id(), ids[0]);
  // Bad arguments name the field.
  all.set_state("closed");
  st = query_->ListAlerts(Ctx("reader-token").get(), all, &got);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().substr(0, 6), "state:");
  ack.clear_note();
  st = query_->AckAlert(Ctx().get(), ack, &acked);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().substr(0, 5), "note:");
  ack.set_note("n");
  ack.set_alert_id(424242);
  st = query_->AckAlert(Ctx().get(), ack, &acked);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "alert_id: no alert 424242");
  dr.set_baseline_sweep_id(-1);
  st = query_->DetectRegressions(Ctx().get(), dr, &detected);
  EXPECT_EQ(st.error_message().substr(0, 18), "baseline_sweep_id:");
}

// A few thousand results: 2,000 more models in 10 classes of 200, two modes. Half of class
// Arch0 breaks eager on one suspect op (100 models: the class test fires), every 50th model
// stops compiling on one op. Times DetectRegressions (printed; the report quotes it).
TEST_F(AlertsTest, AFewThousandResultsGroupIntoTwoAlertsAndTheClassTestFires) {
  pb::UpsertModelsRequest up;
  for (int i = 20; i < 2020; ++i) {
    auto* m = up.add_models();
    m->set_id("org/m" + std::to_string(i));
    m->set_task(i % 2 ? "text-generation" : "fill-mask");
    m->set_arch("Arch" + std::to_string((i - 20) / 200));
    m->set_family("f");
    m->set_config_json("{}");
  }
  pb::UpsertModelsResponse ur;
  ASSERT_TRUE(stub_->UpsertModels(Ctx().get(), up, &ur).ok());
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  const int64_t head = RunSweep("sim-2.1", base, [](int i, pb::Mode mode, int) {
    if (i >= 20 && i < 220 && i % 2 == 0 && mode == pb::MODE_EAGER) {
      return V{pb::VERDICT_FAIL_ACCURACY, "rmse_ratio 4 > 2", "aten::gelu"};
    }
    if (i >= 20 && i % 50 == 1 && mode == pb::MODE_COMPILE) {
      return V{pb::VERDICT_COMPILE_FAIL, "unsupported op aten::cumsum", ""};
    }
    return Pass();
  });
  const auto t0 = std::chrono::steady_clock::now();
  const pb::DetectRegressionsResponse d = Detect(head);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  const auto t1 = std::chrono::steady_clock::now();
  const pb::DetectRegressionsResponse again = Detect(head);  // answers kept, alerts written
  const double ms_again =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t1).count();
  std::printf("DetectRegressions: %d models x 2 modes, %lld flips: %.1f ms (answers kept in "
              "it); again: %.1f ms\n",
              2020, static_cast<long long>(d.flips()), ms, ms_again);
  EXPECT_EQ(again.opened_size(), 0);
  EXPECT_EQ(d.deterministic(), 140);  // 100 eager + 40 compile
  EXPECT_EQ(d.opened_size(), 2);
  bool arch0 = false;
  for (const auto& t : d.fired()) {
    if (t.kind() == "arch" && t.group() == "Arch0" && t.mode() == pb::MODE_EAGER) {
      arch0 = t.mcnemar() && t.flips() == 100 && t.fixes() == 0;
    }
  }
  EXPECT_TRUE(arch0);
  EXPECT_EQ(d.tests(), 2 * (12 + 2));  // (12 classes + 2 tasks) x 2 modes
  for (const auto& a : Alerts("open")) {
    EXPECT_EQ(a.severity(), "critical") << a.cause();
    EXPECT_EQ(a.models_size(), a.cause() == "aten::gelu" ? 100 : 40);
  }
  EXPECT_LT(ms, 30000);
}

// The drop rule end to end: 50 more models in one class; 7 clean nights, then one more model
// fails eager each night (2 points a night). Each night's single flip is far from McNemar's
// bound; the drop rule against the 7-night median fires on the third night of the slide.
TEST_F(AlertsTest, AClassSlidingTwoPointsANightIsCaughtOnTheThirdNight) {
  pb::UpsertModelsRequest up;
  for (int i = 20; i < 70; ++i) {
    auto* m = up.add_models();
    m->set_id("org/m" + std::to_string(i));
    m->set_task("image-classification");
    m->set_arch("SlideArch");
    m->set_family("slide");
    m->set_config_json("{}");
  }
  pb::UpsertModelsResponse ur;
  ASSERT_TRUE(stub_->UpsertModels(Ctx().get(), up, &ur).ok());
  int64_t prev = RunSweep("sim-2.0", 0, kClean);
  for (int night = 1; night <= 7; ++night) {
    prev = RunSweep("sim-2.0", prev, kClean);
    EXPECT_TRUE(Detect(prev).fired().empty()) << night;
  }
  std::vector<bool> fired;
  for (int night = 1; night <= 4; ++night) {
    prev = RunSweep("sim-2.1", prev, [night](int i, pb::Mode mode, int) {
      if (mode == pb::MODE_EAGER && i >= 20 && i < 20 + night) {
        return V{pb::VERDICT_FAIL_ACCURACY, "rmse_ratio 3 > 2", "aten::softmax"};
      }
      return Pass();
    });
    const pb::DetectRegressionsResponse d = Detect(prev);
    EXPECT_EQ(d.deterministic(), 1) << night;
    bool drop = false;
    for (const auto& t : d.fired()) {
      EXPECT_FALSE(t.mcnemar()) << night;
      if (t.kind() == "arch" && t.group() == "SlideArch" && t.mode() == pb::MODE_EAGER) {
        drop = t.drop();
        EXPECT_EQ(t.median(), 100.0);
        EXPECT_EQ(t.rate(), 100.0 - 2 * night);
      }
    }
    fired.push_back(drop);
  }
  EXPECT_EQ(fired, (std::vector<bool>{false, false, true, true}));
  const std::vector<pb::Alert> open = Alerts("open");
  ASSERT_EQ(open.size(), 1u);  // one cause (aten::softmax), four models
  EXPECT_EQ(open[0].models_size(), 4);
  EXPECT_EQ(open[0].severity(), "critical");  // the class test fired on its models
}

// The scheduler's ticker detects a done sweep with a baseline by itself, once.
TEST_F(AlertsTest, TheTickerDetectsADoneSweepWithABaseline) {
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  const int64_t head = RunSweep("sim-2.1", base, Broken);
  SchedulerOptions fast = opts_;
  fast.tick_s = 0.05;
  auto s = Scheduler::Start(fast);
  ASSERT_TRUE(s.ok()) << s.status();
  pqxx::connection c(opts_.db_url);
  bool detected = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (!detected && std::chrono::steady_clock::now() < deadline) {
    pqxx::nontransaction n(c);
    detected = !n.exec_params("SELECT 1 FROM sweeps WHERE sweep_id = $1 AND detected_at IS NOT "
                              "NULL", head).empty();
    if (!detected) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_TRUE(detected);
  (*s)->Shutdown();
  EXPECT_EQ(Alerts("open").size(), 3u);
  EXPECT_EQ(Covered(Alerts()).size(), 8u);
  pqxx::nontransaction n(c);
  EXPECT_TRUE(n.exec_params("SELECT 1 FROM sweeps WHERE sweep_id = $1 AND detected_at IS NOT "
                            "NULL", base).empty());  // no baseline: nothing to detect
}

TEST(AlertDeliveryTest, UrlsAreCheckedAndResolvedAlertsCarryTheirEnd) {
  for (const char* bad : {"ftp://h:9093", "http://:9093", "http://h:99999", "http://h:x"}) {
    AlertmanagerOptions o;
    o.url = bad;
    auto d = AlertDelivery::Create(o);
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(std::string(d.status().message()).substr(0, 13), "alertmanager:") << bad;
  }
  AlertmanagerOptions good;
  good.url = "http://am.example:9093/prefix/";
  EXPECT_TRUE(AlertDelivery::Create(good).ok());
  pb::Alert a;
  a.set_alert_id(4);
  a.set_state("resolved");
  a.set_mode(pb::MODE_COMPILE);
  a.set_cause("aten::cumsum");
  a.mutable_created_at()->set_seconds(1700000000);
  a.mutable_updated_at()->set_seconds(1700003600);
  a.add_models()->set_model_id("org/m10");
  const nlohmann::json j = nlohmann::json::parse(AlertmanagerJson({a}, ""));
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["startsAt"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(j[0]["endsAt"], "2023-11-14T23:13:20Z");
  EXPECT_EQ(j[0]["labels"]["alert_id"], "4");
  EXPECT_EQ(j[0]["labels"]["mode"], "compile");
  EXPECT_FALSE(j[0]["annotations"].contains("link"));  // no dashboard configured
  a.set_state("open");
  EXPECT_FALSE(nlohmann::json::parse(AlertmanagerJson({a}, ""))[0].contains("endsAt"));
}

// A free loopback port: bound, read, released (Alertmanager takes it; nothing else here binds).
int FreePort() {
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
bool Eventually(const std::function<bool()>& done, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

// Delivery to Debian's prometheus-alertmanager (scripts/setup installs it), started here on
// loopback: first down (posts fail and back off; nothing is marked delivered), then up (the
// alerts arrive, read back from its /api/v2/alerts with their labels and annotations).
TEST_F(AlertsTest, AlertsReachARealAlertmanagerOnceItIsUp) {
  const std::string binary = "/usr/bin/prometheus-alertmanager";
  ASSERT_EQ(::access(binary.c_str(), X_OK), 0) << binary << ": run scripts/setup";
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  RunSweep("sim-2.1", base, Broken);
  const int port = FreePort();
  ASSERT_GT(port, 0);
  SchedulerOptions o = opts_;
  o.tick_s = 0.05;
  o.alertmanager_url = "http://127.0.0.1:" + std::to_string(port);
  o.dashboard_url = "http://dash.example";
  o.alert_retry_max_s = 0.2;
  auto sched = Scheduler::Start(o);
  ASSERT_TRUE(sched.ok()) << sched.status();
  pqxx::connection c(opts_.db_url);
  const auto count = [&](const std::string& sql) {
    pqxx::nontransaction n(c);
    return n.exec(sql)[0][0].as<int64_t>();
  };
  // Down: detection opens the alerts (the sweep had ended regardless); none is delivered.
  ASSERT_TRUE(Eventually([&] { return count("SELECT count(*) FROM alerts") == 3; }, 30));
  EXPECT_EQ(count("SELECT count(*) FROM alerts WHERE delivered_at IS NOT NULL"), 0);
  // Up.
  char dir_tmpl[] = "/tmp/ts_alertmanager_XXXXXX";
  ASSERT_NE(::mkdtemp(dir_tmpl), nullptr);
  const std::string dir = dir_tmpl;
  {
    std::ofstream cfg(dir + "/alertmanager.yml");
    cfg << "route:\n  receiver: 'null'\nreceivers:\n  - name: 'null'\n";
  }
  common::SpawnOptions so;
  so.log_path = dir + "/alertmanager.log";
  auto pid = common::Spawn({binary, "--config.file=" + dir + "/alertmanager.yml",
                            "--storage.path=" + dir, "--cluster.listen-address=",
                            "--web.listen-address=127.0.0.1:" + std::to_string(port)},
                           so);
  ASSERT_TRUE(pid.ok()) << pid.status();
  nlohmann::json got;
  const bool arrived = Eventually(
      [&] {
        auto r = common::HttpGet(port, "/api/v2/alerts");
        if (!r.ok() || r->status != 200) return false;
        got = nlohmann::json::parse(r->body, nullptr, false);
        return got.is_array() && got.size() == 3;
      },
      60);
  ASSERT_TRUE(arrived) << testing::ReadText(dir + "/alertmanager.log");
  std::map<std::string, nlohmann::json> by_signature;
  for (const auto& a : got) by_signature[a["labels"]["signature"].get<std::string>()] = a;
  ASSERT_TRUE(by_signature.count("aten::gelu")) << got.dump();
  const nlohmann::json& gelu = by_signature["aten::gelu"];
  EXPECT_EQ(gelu["labels"]["alertname"], "TouchstoneRegression");
  EXPECT_EQ(gelu["labels"]["severity"], "major");
  EXPECT_EQ(gelu["labels"]["mode"], "eager");
  EXPECT_EQ(gelu["labels"]["arch"], "GPT2LMHeadModel");
  EXPECT_EQ(gelu["labels"]["task"], "text-generation");
  EXPECT_EQ(gelu["annotations"]["models"],
            "org/m0, org/m1, org/m2, org/m3, org/m4, org/m5");
  EXPECT_EQ(gelu["annotations"]["link"], "http://dash.example/model/org/m0");
  EXPECT_TRUE(by_signature.count("aten::cumsum"));
  EXPECT_TRUE(Eventually(
      [&] { return count("SELECT count(*) FROM alerts WHERE delivered_at IS NOT NULL") == 3; },
      10));
  (*sched)->Shutdown();
  common::Stop(*pid, 5);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ts::scheduler
