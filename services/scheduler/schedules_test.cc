// Schedules through two schedulers on one database (issue 13): real gRPC on loopback, a
// throwaway PostgreSQL, a clock the test moves. Both tickers race for every due time; each due
// time starts one sweep, and one that finds the schedule's sweep still running is a recorded
// skip.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <pqxx/pqxx>
#include <thread>

#include "services/scheduler/scheduler.h"
#include "services/scheduler/scheduler_test_util.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

namespace pb = ::touchstone::v1;
using SysClock = std::chrono::system_clock;

SysClock::time_point Utc(int d, int h, int mi, int s = 0) {
  struct tm tm {};
  tm.tm_year = 2026 - 1900;
  tm.tm_mon = 11;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return SysClock::from_time_t(timegm(&tm));
}

class SchedulesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = TestDatabaseUrl();
    ASSERT_FALSE(url_.empty());
    now_ = SysClock::to_time_t(Utc(4, 1, 0));
    for (int i = 0; i < 2; ++i) {
      SchedulerOptions o;
      o.db_url = url_;
      o.tick_s = 0.02;  // both tickers look often: many chances to race
      ASSERT_TRUE(o.tokens.Add(common::Role::kAdmin, "admin").ok());
      ASSERT_TRUE(o.tokens.Add(common::Role::kReader, "reader").ok());
      o.clock = [this] { return SysClock::from_time_t(now_.load()); };
      auto s = Scheduler::Start(o);
      ASSERT_TRUE(s.ok()) << s.status();
      stubs_.push_back(pb::Scheduler::NewStub(grpc::CreateChannel(
          "127.0.0.1:" + std::to_string((*s)->grpc_port()), grpc::InsecureChannelCredentials())));
      scheds_.push_back(std::move(*s));
    }
    pb::UpsertModelsRequest up;
    for (int i = 0; i < 8; ++i) {
      auto* m = up.add_models();
      m->set_id("org/m" + std::to_string(i));
      m->set_task("text-generation");
      m->set_arch("LlamaForCausalLM");
      m->set_family("llama");
      m->set_config_json("{\"model_type\": \"llama\"}");
    }
    pb::UpsertModelsResponse ur;
    ASSERT_TRUE(stubs_[0]->UpsertModels(BearerContext("admin").get(), up, &ur).ok());
  }
  void TearDown() override {
    for (auto& s : scheds_) s->Shutdown();
  }
  int Count(const std::string& sql) {
    pqxx::connection c(url_);
    pqxx::nontransaction n(c);
    return n.exec(sql)[0][0].as<int>();
  }
  // Waits (up to 20 s) until the schedule has `runs` recorded runs, then lets both tickers run
  // a while longer (any second start would show).
  void WaitForRuns(int runs) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (Count("SELECT count(*) FROM schedule_runs") < runs &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
  }
  std::string url_;
  std::atomic<time_t> now_;
  std::vector<std::unique_ptr<Scheduler>> scheds_;
  std::vector<std::unique_ptr<pb::Scheduler::Stub>> stubs_;
};

TEST_F(SchedulesTest, EachDueTimeStartsOnceAcrossTwoSchedulersAndARunningSweepIsASkip) {
  pb::AddScheduleRequest add;
  add.set_name("nightly");
  add.set_cron("0 2 * * *");
  add.mutable_sweep()->set_sample(4);
  add.mutable_sweep()->mutable_profile()->set_name("sim-test");
  add.mutable_sweep()->mutable_profile()->set_body("{\"name\": \"sim-test\"}");
  pb::Schedule added;
  auto st = stubs_[0]->AddSchedule(BearerContext("admin").get(), add, &added);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(added.next_due(), "2026-12-04T02:00:00Z");
  // A reader may not manage schedules.
  pb::ListSchedulesResponse list;
  EXPECT_EQ(stubs_[1]->ListSchedules(BearerContext("reader").get(), {}, &list).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // Nothing before the due time, however long both tickers run.
  now_ = SysClock::to_time_t(Utc(4, 1, 59, 58));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Count("SELECT count(*) FROM sweeps"), 0);

  now_ = SysClock::to_time_t(Utc(4, 2, 0, 1));
  WaitForRuns(1);
  EXPECT_EQ(Count("SELECT count(*) FROM sweeps WHERE schedule_id IS NOT NULL"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM schedule_runs WHERE outcome = 'started'"), 1);

  // Next night: no worker ran the first sweep, so it is still running: a skip, once.
  now_ = SysClock::to_time_t(Utc(5, 2, 0, 1));
  WaitForRuns(2);
  EXPECT_EQ(Count("SELECT count(*) FROM sweeps"), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM schedule_runs WHERE outcome = 'skipped'"), 1);

  // The sweep is cancelled: the night after starts a new one.
  pb::CancelSweepRequest cancel;
  cancel.set_sweep_id(Count("SELECT min(sweep_id) FROM sweeps"));
  pb::SweepProgress p;
  ASSERT_TRUE(stubs_[1]->CancelSweep(BearerContext("admin").get(), cancel, &p).ok());
  now_ = SysClock::to_time_t(Utc(6, 2, 0, 1));
  WaitForRuns(3);
  EXPECT_EQ(Count("SELECT count(*) FROM sweeps WHERE schedule_id IS NOT NULL"), 2);

  ASSERT_TRUE(stubs_[1]->ListSchedules(BearerContext("admin").get(), {}, &list).ok());
  ASSERT_EQ(list.schedules_size(), 1);
  const pb::Schedule& s = list.schedules(0);
  EXPECT_EQ(s.next_due(), "2026-12-07T02:00:00Z");
  ASSERT_EQ(s.runs_size(), 3);
  EXPECT_EQ(s.runs(0).outcome(), "started");
  EXPECT_EQ(s.runs(1).outcome(), "skipped");
  EXPECT_EQ(s.runs(1).due_at(), "2026-12-05T02:00:00Z");
  EXPECT_EQ(s.runs(2).outcome(), "started");

  // Disabled: the next due time passes without a run.
  pb::SetScheduleEnabledRequest off;
  off.set_name("nightly");
  off.set_enabled(false);
  pb::Schedule changed;
  ASSERT_TRUE(stubs_[0]->SetScheduleEnabled(BearerContext("admin").get(), off, &changed).ok());
  EXPECT_FALSE(changed.enabled());
  now_ = SysClock::to_time_t(Utc(7, 2, 0, 1));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Count("SELECT count(*) FROM schedule_runs"), 3);

  pb::RemoveScheduleRequest rm;
  rm.set_name("nightly");
  pb::RemoveScheduleResponse removed;
  ASSERT_TRUE(stubs_[1]->RemoveSchedule(BearerContext("admin").get(), rm, &removed).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM schedules"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM sweeps"), 2);  // its sweeps stay
}

TEST_F(SchedulesTest, BadSchedulesAreRefusedNamingTheField) {
  pb::AddScheduleRequest add;
  add.set_name("bad name!");
  add.set_cron("0 2 * * *");
  pb::Schedule out;
  auto st = stubs_[0]->AddSchedule(BearerContext("admin").get(), add, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().rfind("name:", 0), 0u) << st.error_message();
  add.set_name("ok");
  add.set_cron("0 2 * *");
  st = stubs_[0]->AddSchedule(BearerContext("admin").get(), add, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("want 5 fields"), std::string::npos) << st.error_message();
  add.set_cron("0 2 * * *");
  st = stubs_[0]->AddSchedule(BearerContext("admin").get(), add, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "sweep.profile.name: required");
  add.mutable_sweep()->mutable_profile()->set_name("p");
  add.mutable_sweep()->mutable_profile()->set_body("{}");
  add.set_baseline("yesterday");
  st = stubs_[0]->AddSchedule(BearerContext("admin").get(), add, &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().rfind("baseline:", 0), 0u) << st.error_message();
}

}  // namespace
}  // namespace ts::scheduler
