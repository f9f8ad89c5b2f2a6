// Issue 11: Alertmanager delivery. The v2 JSON, and delivery end to end to Debian's
// prometheus-alertmanager started on loopback (down, then up; the periodic resend of firing
// alerts and the delivery of a resolution); a change committed during a delivery round is not
// marked delivered unsent.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "services/common/http_server.h"
#include "services/common/process.h"
#include "services/scheduler/alert_delivery.h"
#include "services/scheduler/alerts_test_util.h"
#include "tests/fixtures/subprocess.h"

namespace ts::scheduler {
namespace {

using namespace alerts_testing;  // NOLINT: the shared fixture
namespace pb = ::touchstone::v1;

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
  // A suspect op's alert spans modes: no mode label (labels name an alert, and its modes may
  // grow), the modes in an annotation and in the summary.
  pb::Alert across;
  across.set_alert_id(5);
  across.set_state("open");
  across.set_cause_kind("suspect");
  across.set_cause("aten::mm");
  across.set_cause_text("aten::mm");
  across.set_line("sim");
  across.set_first_sweep_id(3);
  across.add_modes(pb::MODE_EAGER);
  across.add_modes(pb::MODE_TRAIN);
  across.add_models()->set_model_id("org/m1");
  const nlohmann::json k = nlohmann::json::parse(AlertmanagerJson({across}, ""));
  EXPECT_FALSE(k[0]["labels"].contains("mode")) << k.dump();
  EXPECT_EQ(k[0]["annotations"]["modes"], "eager, train");
  EXPECT_EQ(k[0]["annotations"]["summary"],
            "1 model(s) regressed in eager, train on sim since sweep 3: suspect aten::mm");
}

// Debian's prometheus-alertmanager (scripts/setup installs it) on a free loopback port, with a
// null receiver and its storage in a folder of its own; stopped and removed by the destructor.
class LiveAlertmanager {
 public:
  static constexpr const char* kBinary = "/usr/bin/prometheus-alertmanager";

  LiveAlertmanager() : port_(FreePort()) {}

  // Starts it on port(): an address known before (a scheduler may post to it while it is down).
  void Start() {
    ASSERT_EQ(::access(kBinary, X_OK), 0) << kBinary << ": run scripts/setup";
    ASSERT_GT(port_, 0);
    char dir_tmpl[] = "/tmp/ts_alertmanager_XXXXXX";
    ASSERT_NE(::mkdtemp(dir_tmpl), nullptr);
    dir_ = dir_tmpl;
    std::ofstream(dir_ + "/alertmanager.yml")
        << "route:\n  receiver: 'null'\nreceivers:\n  - name: 'null'\n";
    common::SpawnOptions so;
    so.log_path = dir_ + "/alertmanager.log";
    auto pid = common::Spawn({kBinary, "--config.file=" + dir_ + "/alertmanager.yml",
                              "--storage.path=" + dir_, "--cluster.listen-address=",
                              "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
                             so);
    ASSERT_TRUE(pid.ok()) << pid.status();
    pid_ = *pid;
  }
  ~LiveAlertmanager() {
    if (pid_ > 0) common::Stop(pid_, 5);
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return testing::ReadText(dir_ + "/alertmanager.log"); }

  // Its active alerts (GET /api/v2/alerts: a resolved one is left out) by our alert_id label;
  // nullopt while it does not answer.
  std::optional<std::map<std::string, nlohmann::json>> Active() const {
    auto r = common::HttpGet(port_, "/api/v2/alerts");
    if (!r.ok() || r->status != 200) return std::nullopt;
    const nlohmann::json got = nlohmann::json::parse(r->body, nullptr, false);
    if (!got.is_array()) return std::nullopt;
    std::map<std::string, nlohmann::json> out;
    for (const auto& a : got) out[a["labels"]["alert_id"].get<std::string>()] = a;
    return out;
  }

 private:
  int port_ = 0;
  pid_t pid_ = -1;
  std::string dir_;
};

// Delivery to a real Alertmanager started on loopback: first down (posts fail and back off;
// nothing is marked delivered), then up (the alerts arrive, read back from its /api/v2/alerts
// with their labels and annotations).
TEST_F(AlertsTest, AlertsReachARealAlertmanagerOnceItIsUp) {
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  RunSweep("sim-2.1", base, Broken);
  LiveAlertmanager am;
  SchedulerOptions o = opts_;
  o.tick_s = 0.05;
  o.alertmanager_url = am.url();
  o.dashboard_url = "http://dash.example";
  o.alert_retry_max_s = 0.2;
  auto sched = Scheduler::Start(o);
  ASSERT_TRUE(sched.ok()) << sched.status();
  // Down: detection opens the alerts (the sweep had ended regardless); none is delivered.
  ASSERT_TRUE(Eventually([&] { return Count("SELECT count(*) FROM alerts") == 3; }, 30));
  EXPECT_EQ(Count("SELECT count(*) FROM alerts WHERE delivered_at IS NOT NULL"), 0);
  // Up.
  am.Start();
  std::map<std::string, nlohmann::json> got;
  const bool arrived = Eventually(
      [&] {
        auto active = am.Active();
        if (active) got = *active;
        return got.size() == 3;
      },
      60);
  ASSERT_TRUE(arrived) << am.log();
  std::map<std::string, nlohmann::json> by_signature;
  for (const auto& [id, a] : got) by_signature[a["labels"]["signature"].get<std::string>()] = a;
  ASSERT_TRUE(by_signature.count("aten::gelu")) << nlohmann::json(got).dump();
  const nlohmann::json& gelu = by_signature["aten::gelu"];
  EXPECT_EQ(gelu["labels"]["alertname"], "TouchstoneRegression");
  EXPECT_EQ(gelu["labels"]["severity"], "major");
  EXPECT_FALSE(gelu["labels"].contains("mode")) << "a suspect op's alert spans modes";
  EXPECT_EQ(gelu["annotations"]["modes"], "eager");
  EXPECT_EQ(gelu["labels"]["arch"], "GPT2LMHeadModel");
  EXPECT_EQ(gelu["labels"]["task"], "text-generation");
  EXPECT_EQ(gelu["annotations"]["models"],
            "org/m0, org/m1, org/m2, org/m3, org/m4, org/m5");
  EXPECT_EQ(gelu["annotations"]["link"], "http://dash.example/model/org/m0");
  ASSERT_TRUE(by_signature.count("aten::cumsum"));
  EXPECT_EQ(by_signature["aten::cumsum"]["labels"]["mode"], "compile");  // per mode: an op
  EXPECT_TRUE(Eventually(
      [&] { return Count("SELECT count(*) FROM alerts WHERE delivered_at IS NOT NULL") == 3; },
      10));
  (*sched)->Shutdown();
}

// What Alertmanager needs over time, against the real one. An alert that keeps firing without
// changing is posted again every alert_resend_s (Alertmanager drops a firing alert it has not
// heard of within its resolve_timeout): its updatedAt there moves on while the store's alert does
// not. An alert resolved by three clean sweeps is posted once more with its endsAt, which takes it
// out of Alertmanager's active alerts at once (not 5 minutes later), while the one whose cause
// still fails stays.
TEST_F(AlertsTest, FiringAlertsAreResentAndResolutionsAreDelivered) {
  LiveAlertmanager am;
  am.Start();
  int64_t head = RunSweep("sim-2.1", RunSweep("sim-2.0", 0, kClean), Broken);
  SchedulerOptions o = opts_;
  o.tick_s = 0.05;
  o.alertmanager_url = am.url();
  o.alert_resend_s = 1;
  o.alert_retry_max_s = 0.2;
  auto sched = Scheduler::Start(o);
  ASSERT_TRUE(sched.ok()) << sched.status();
  ASSERT_TRUE(Eventually([&] { return Count("SELECT count(*) FROM alerts") == 3; }, 30));
  const auto delivered = [&] {
    return Count("SELECT count(*) FROM alerts WHERE delivered_at = updated_at");
  };
  ASSERT_TRUE(Eventually([&] { return delivered() == 3; }, 30)) << am.log();
  const std::string gelu =
      std::to_string(Count("SELECT alert_id FROM alerts WHERE cause = 'aten::gelu'"));
  std::map<std::string, nlohmann::json> first;
  ASSERT_TRUE(Eventually(
      [&] {
        auto a = am.Active();
        if (a) first = *a;
        return first.size() == 3;
      },
      30))
      << am.log();
  ASSERT_EQ(first.count(gelu), 1u);
  const std::string versions_sql =
      "SELECT sum(extract(epoch FROM updated_at) * 1e6)::bigint FROM alerts";
  const int64_t versions = Count(versions_sql);

  // Resent: every alert's updatedAt in Alertmanager moves on; the store's alerts did not change.
  std::map<std::string, nlohmann::json> later;
  const bool resent = Eventually(
      [&] {
        auto a = am.Active();
        if (!a || a->size() != 3) return false;
        later = *a;
        for (const auto& [id, alert] : first) {
          if (!later.count(id) || later[id]["updatedAt"] == alert["updatedAt"]) return false;
        }
        return true;
      },
      15);
  EXPECT_TRUE(resent) << "before: " << nlohmann::json(first).dump()
                      << "\nafter: " << nlohmann::json(later).dump();
  EXPECT_EQ(Count(versions_sql), versions)
      << "an alert changed: the posts above were not periodic resends";

  // Resolved: three sweeps of the line in which only the gelu regression still fails.
  const Night gelu_only = [](int i, pb::Mode mode, int run) {
    return mode == pb::MODE_EAGER && i <= 5 ? Broken(i, mode, run) : Pass();
  };
  for (const char* profile : {"sim-2.2", "sim-2.3", "sim-2.4"}) {
    head = RunSweep(profile, head, gelu_only);
    ASSERT_TRUE(Eventually(  // detected by the scheduler's ticker
        [&] {
          return Count("SELECT count(*) FROM sweeps WHERE detected_at IS NULL "
                       "AND baseline_sweep IS NOT NULL") == 0;
        },
        30));
  }
  EXPECT_EQ(Count("SELECT count(*) FROM alerts WHERE state = 'resolved'"), 2);
  EXPECT_EQ(Count("SELECT count(*) FROM alerts WHERE state = 'resolved' AND cause = 'aten::gelu'"),
            0);
  std::map<std::string, nlohmann::json> now;
  const bool gone = Eventually(
      [&] {
        auto a = am.Active();
        if (a) now = *a;
        return a && now.size() == 1;
      },
      10);
  EXPECT_TRUE(gone) << nlohmann::json(now).dump() << am.log();
  EXPECT_EQ(now.count(gelu), 1u) << nlohmann::json(now).dump();
  EXPECT_EQ(delivered(), 3) << "a resolution was not marked delivered";
  (*sched)->Shutdown();
}

// The race the first version had: a change whose transaction began before the delivery round
// read its snapshot, committed after it. Its updated_at (the transaction's start) is older than
// the snapshot, so "delivered at the read time" would have counted it delivered unsent; marking
// by version leaves it to the next round.
TEST_F(AlertsTest, AChangeCommittedDuringADeliveryRoundIsSentAgain) {
  const int64_t base = RunSweep("sim-2.0", 0, kClean);
  Detect(RunSweep("sim-2.1", base, Broken));
  auto first = store_->AlertsToDeliver();
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_EQ(first->alerts.size(), 3u);
  EXPECT_EQ(first->changed, 3);
  const int64_t id = first->alerts[0].alert_id();
  pqxx::connection c(opts_.db_url);
  pqxx::work early(c);  // now() is fixed here, before the round below reads
  early.exec("SELECT 1");
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  auto round = store_->AlertsToDeliver();
  ASSERT_TRUE(round.ok()) << round.status();
  early.exec_params("UPDATE alerts SET cause_text = 'changed', updated_at = now() "
                    "WHERE alert_id = $1",
                    id);
  early.commit();
  ASSERT_TRUE(store_->MarkAlertsDelivered(round->alerts).ok());
  auto next = store_->AlertsToDeliver();
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(next->changed, 1);  // the late change only; the other two were delivered
  auto late = std::find_if(next->alerts.begin(), next->alerts.end(),
                           [&](const pb::Alert& a) { return a.alert_id() == id; });
  ASSERT_NE(late, next->alerts.end()) << "the changed alert is not in the next round";
  EXPECT_EQ(late->cause_text(), "changed");
  ASSERT_TRUE(store_->MarkAlertsDelivered(next->alerts).ok());
  EXPECT_EQ(store_->AlertsToDeliver()->changed, 0);
}

}  // namespace
}  // namespace ts::scheduler
