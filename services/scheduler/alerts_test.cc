// Issue 11 over real gRPC on loopback and a throwaway PostgreSQL: regression detection
// (Store::DetectRegressions) and its alerts: the regressed (model, mode) set, one alert per
// cause, flaky and crashing flips never alerted, idempotence, a third identical sweep,
// resolution after 3 clean sweeps, reopening, quarantine, the class tests, the ticker.
#include <chrono>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "services/scheduler/alerts_test_util.h"

namespace ts::scheduler {
namespace {

using namespace alerts_testing;  // NOLINT: the shared fixture
namespace pb = ::touchstone::v1;

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

// One cause, one alert (issue 34): a kernel that is wrong in every mode it runs in is one suspect
// op, so its regressions in eager and in compile are one alert whose modes are a dimension of
// it, each model saying which modes it broke; a second suspect op is a second alert. A cause
// that is not a suspect op stays per mode. The alert stays open while the op still fails in any
// of its modes, and widens when it breaks a mode it had not.
TEST_F(AlertsTest, ASuspectOpIsOneAlertAcrossTheModesItBreaks) {
  const Night mm = [](int i, pb::Mode mode, int) -> V {
    if (i <= 3) return {pb::VERDICT_FAIL_ACCURACY, "rmse_ratio 3 > 2", "aten::mm"};  // both modes
    if (i == 4 && mode == pb::MODE_EAGER) return {pb::VERDICT_FAIL_ACCURACY, "x", "aten::bmm"};
    if (i == 10 && mode == pb::MODE_COMPILE) {
      return {pb::VERDICT_COMPILE_FAIL, "unsupported op aten::cumsum", ""};
    }
    return Pass();
  };
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  const int64_t head = RunSweep("sim-2.1", base, mm);
  const pb::DetectRegressionsResponse d = Detect(head);
  EXPECT_EQ(d.deterministic(), 4 * 2 + 1 + 1);
  EXPECT_EQ(d.opened_size(), 3);  // aten::mm, aten::bmm, aten::cumsum (compile)
  std::map<std::string, pb::Alert> by_cause;
  for (const auto& a : Alerts("open")) by_cause[a.cause()] = a;
  ASSERT_EQ(by_cause.size(), 3u);
  const pb::Alert& mm_alert = by_cause["aten::mm"];
  EXPECT_EQ(mm_alert.cause_kind(), "suspect");
  EXPECT_EQ(mm_alert.mode(), pb::MODE_UNSPECIFIED);
  EXPECT_EQ(std::vector<int>(mm_alert.modes().begin(), mm_alert.modes().end()),
            (std::vector<int>{pb::MODE_EAGER, pb::MODE_COMPILE}));
  ASSERT_EQ(mm_alert.models_size(), 4);
  for (const auto& m : mm_alert.models()) {
    EXPECT_EQ(m.modes_size(), 2) << m.model_id();
  }
  const pb::Alert& bmm = by_cause["aten::bmm"];
  EXPECT_EQ(std::vector<int>(bmm.modes().begin(), bmm.modes().end()),
            std::vector<int>{pb::MODE_EAGER});
  const pb::Alert& cumsum = by_cause["aten::cumsum"];
  EXPECT_EQ(cumsum.cause_kind(), "op");
  EXPECT_EQ(cumsum.mode(), pb::MODE_COMPILE);
  EXPECT_EQ(std::vector<int>(cumsum.modes().begin(), cumsum.modes().end()),
            std::vector<int>{pb::MODE_COMPILE});
  std::set<std::pair<std::string, pb::Mode>> want;
  for (int i = 0; i <= 3; ++i) {
    want.insert({"org/m" + std::to_string(i), pb::MODE_EAGER});
    want.insert({"org/m" + std::to_string(i), pb::MODE_COMPILE});
  }
  want.insert({"org/m4", pb::MODE_EAGER});
  want.insert({"org/m10", pb::MODE_COMPILE});
  EXPECT_EQ(Covered(Alerts("open")), want);

  // Next night mm is fixed in eager only: its alert stays open (still failing in compile), no
  // new alert; bmm now also breaks compile on m4, and its one alert widens to both modes.
  const Night next = [](int i, pb::Mode mode, int) -> V {
    if (i <= 3 && mode == pb::MODE_COMPILE) return {pb::VERDICT_FAIL_ACCURACY, "y", "aten::mm"};
    if (i == 4) return {pb::VERDICT_FAIL_ACCURACY, "x", "aten::bmm"};
    if (i == 10 && mode == pb::MODE_COMPILE) {
      return {pb::VERDICT_COMPILE_FAIL, "unsupported op aten::cumsum", ""};
    }
    return Pass();
  };
  const int64_t later = RunSweep("sim-2.2", head, next);
  const pb::DetectRegressionsResponse d2 = Detect(later);
  EXPECT_EQ(d2.opened_size(), 0);
  EXPECT_EQ(d2.resolved_size(), 0);
  by_cause.clear();
  for (const auto& a : Alerts("open")) by_cause[a.cause()] = a;
  ASSERT_EQ(by_cause.size(), 3u);
  EXPECT_EQ(by_cause["aten::mm"].last_sweep_id(), later);
  EXPECT_EQ(by_cause["aten::mm"].clean_sweeps(), 0);
  const pb::Alert& wider = by_cause["aten::bmm"];
  EXPECT_EQ(std::vector<int>(wider.modes().begin(), wider.modes().end()),
            (std::vector<int>{pb::MODE_EAGER, pb::MODE_COMPILE}));
  ASSERT_EQ(wider.models_size(), 1);
  EXPECT_EQ(wider.models(0).modes_size(), 2);
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

}  // namespace
}  // namespace ts::scheduler
