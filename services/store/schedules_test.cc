// Schedules in the store (issue 13) on a throwaway PostgreSQL, with the clock passed in: a due
// time starts one sweep whatever the number of stores (schedulers) racing for it; a due time
// that finds the schedule's previous sweep running is a recorded skip; the baseline is the
// schedule's previous done sweep.
#include <gtest/gtest.h>
#include <time.h>

#include <atomic>
#include <pqxx/pqxx>
#include <thread>

#include "proto/names.h"
#include "services/store/store.h"
#include "tests/fixtures/postgres_fixture.h"

namespace ts::store {
namespace {

Store::TimePoint Utc(int y, int mo, int d, int h, int mi, int s = 0) {
  struct tm tm {};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  return std::chrono::system_clock::from_time_t(timegm(&tm));
}

class ScheduleStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto* cluster = testing::PostgresCluster::Get();
    ASSERT_NE(cluster, nullptr);
    opts_.url =
        cluster->NewDatabase(::testing::UnitTest::GetInstance()->current_test_info()->name());
    store_ = Open();
    ASSERT_TRUE(store_->Migrate().ok());
    pb::UpsertModelsRequest up;
    for (int i = 0; i < 6; ++i) {
      auto* m = up.add_models();
      m->set_id("org/model-" + std::to_string(i));
      m->set_task(i < 3 ? "text-generation" : "text-classification");
      m->set_arch(i < 3 ? "LlamaForCausalLM" : "BertForSequenceClassification");
      m->set_family(i < 3 ? "llama" : "bert");
      m->set_config_json("{\"i\": " + std::to_string(i) + "}");
    }
    ASSERT_TRUE(store_->UpsertModels(up).ok());
  }
  std::unique_ptr<Store> Open() {
    auto s = Store::Connect(opts_);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }
  static pb::AddScheduleRequest Nightly(const std::string& name = "nightly") {
    pb::AddScheduleRequest r;
    r.set_name(name);
    r.set_cron("0 2 * * *");
    r.mutable_sweep()->set_sample(4);
    r.mutable_sweep()->mutable_profile()->set_name("sim-test");
    r.mutable_sweep()->mutable_profile()->set_body("{\"name\": \"sim-test\"}");
    return r;
  }
  // Every sweep a schedule started: (sweep_id, baseline or 0), oldest first.
  std::vector<std::pair<int64_t, int64_t>> ScheduledSweeps() {
    pqxx::connection c(opts_.url);
    pqxx::nontransaction n(c);
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const auto& r : n.exec("SELECT sweep_id, coalesce(baseline_sweep, 0) FROM sweeps "
                                "WHERE schedule_id IS NOT NULL ORDER BY sweep_id")) {
      out.emplace_back(r[0].as<int64_t>(), r[1].as<int64_t>());
    }
    return out;
  }
  // Leases every shard, reports every job pass, finishes: the sweep is done.
  void RunQueue() {
    auto w = store_->RegisterWorker([] {
      pb::RegisterWorkerRequest r;
      r.set_name("w");
      return r;
    }());
    ASSERT_TRUE(w.ok());
    for (;;) {
      auto l = store_->LeaseShard(w->worker_id());
      ASSERT_TRUE(l.ok()) << l.status();
      if (!l->has_shard()) return;
      pb::ReportResultsRequest rep;
      rep.set_worker_id(w->worker_id());
      rep.set_shard_id(l->shard_id());
      rep.set_lease_token(l->lease_token());
      rep.set_finish(true);
      for (const auto& j : l->jobs()) {
        auto* m = rep.add_results();
        m->set_job_id(j.job_id());
        m->set_model_id(j.model_id());
        m->set_run(j.run());
        for (auto mode : proto::AllModes()) {
          auto* v = m->add_modes();
          v->set_mode(mode);
          v->set_status(*proto::VerdictFromName("pass"));
        }
      }
      ASSERT_TRUE(store_->ReportResults(rep).ok());
    }
  }
  StoreOptions opts_;
  std::unique_ptr<Store> store_;
};

TEST_F(ScheduleStoreTest, DueTimeStartsOneSweepAcrossRacingSchedulers) {
  auto added = store_->AddSchedule(Nightly(), Utc(2026, 12, 4, 1, 0));
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_EQ(added->next_due(), "2026-12-04T02:00:00Z");
  EXPECT_EQ(added->cron(), "0 2 * * *");
  EXPECT_EQ(added->profile_sha().size(), 64u);
  {
    // The filter's probe (a CreateSweep rolled back) left no sweep behind.
    pqxx::connection c(opts_.url);
    pqxx::nontransaction n(c);
    EXPECT_EQ(n.exec("SELECT count(*) FROM sweeps")[0][0].as<int>(), 0);
    EXPECT_EQ(
        n.exec("SELECT count(*) FROM pg_class WHERE relname ~ '^results_[0-9]+$'")[0][0].as<int>(),
        0);
  }
  // Not due yet.
  auto early = store_->StartDueSchedules(Utc(2026, 12, 4, 1, 59, 59));
  ASSERT_TRUE(early.ok()) << early.status();
  EXPECT_EQ(early->started, 0);

  // Eight schedulers' tickers, each with its own connection, all at the due time at once.
  constexpr int kRacers = 8;
  std::vector<std::unique_ptr<Store>> stores;
  for (int i = 0; i < kRacers; ++i) stores.push_back(Open());
  std::atomic<int> started{0}, ready{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kRacers; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (ready < kRacers) std::this_thread::yield();
      auto t = stores[i]->StartDueSchedules(Utc(2026, 12, 4, 2, 0, 1));
      EXPECT_TRUE(t.ok()) << t.status();
      if (t.ok()) started += t->started;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(started, 1);
  EXPECT_EQ(ScheduledSweeps().size(), 1u);
  // Again at the same time: nothing more.
  auto again = store_->StartDueSchedules(Utc(2026, 12, 4, 2, 0, 30));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->started + again->skipped + again->failed, 0);

  auto list = store_->ListSchedules(5);
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].next_due(), "2026-12-05T02:00:00Z");
  ASSERT_EQ((*list)[0].runs_size(), 1);
  EXPECT_EQ((*list)[0].runs(0).due_at(), "2026-12-04T02:00:00Z");
  EXPECT_EQ((*list)[0].runs(0).outcome(), "started");
  EXPECT_EQ((*list)[0].runs(0).sweep_id(), ScheduledSweeps()[0].first);
}

TEST_F(ScheduleStoreTest, RunningPreviousSweepMakesTheDueTimeARecordedSkip) {
  ASSERT_TRUE(store_->AddSchedule(Nightly(), Utc(2026, 12, 4, 1, 0)).ok());
  auto first = store_->StartDueSchedules(Utc(2026, 12, 4, 2, 0, 5));
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->started, 1);
  const int64_t sweep1 = ScheduledSweeps()[0].first;
  EXPECT_EQ(ScheduledSweeps()[0].second, 0);  // no previous done sweep: no baseline

  // The next night the first sweep still runs (no worker took it): a skip, recorded.
  auto skip = store_->StartDueSchedules(Utc(2026, 12, 5, 2, 0, 5));
  ASSERT_TRUE(skip.ok());
  EXPECT_EQ(skip->skipped, 1);
  EXPECT_EQ(skip->started, 0);
  EXPECT_EQ(ScheduledSweeps().size(), 1u);
  auto list = store_->ListSchedules(5);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ((*list)[0].runs_size(), 2);
  EXPECT_EQ((*list)[0].runs(0).due_at(), "2026-12-05T02:00:00Z");
  EXPECT_EQ((*list)[0].runs(0).outcome(), "skipped");
  EXPECT_EQ((*list)[0].runs(0).sweep_id(), sweep1);
  EXPECT_NE((*list)[0].runs(0).detail().find("still running"), std::string::npos);

  // Once it is done, the next due time starts a sweep against it.
  RunQueue();
  auto p = store_->GetSweep(sweep1);
  ASSERT_TRUE(p.ok());
  ASSERT_EQ(p->state(), "done");
  auto third = store_->StartDueSchedules(Utc(2026, 12, 6, 2, 0, 5));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->started, 1);
  auto sweeps = ScheduledSweeps();
  ASSERT_EQ(sweeps.size(), 2u);
  EXPECT_EQ(sweeps[1].second, sweep1);
}

TEST_F(ScheduleStoreTest, MissedDueTimesStartOnceAndMoveOn) {
  ASSERT_TRUE(store_->AddSchedule(Nightly(), Utc(2026, 12, 4, 1, 0)).ok());
  // No scheduler ran for three nights.
  auto t = store_->StartDueSchedules(Utc(2026, 12, 7, 3, 0));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->started, 1);
  auto list = store_->ListSchedules(5);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ((*list)[0].next_due(), "2026-12-08T02:00:00Z");
  EXPECT_EQ((*list)[0].runs(0).due_at(), "2026-12-04T02:00:00Z");
}

TEST_F(ScheduleStoreTest, DisabledScheduleDoesNotFireAndEnablingSkipsMissedTimes) {
  pb::AddScheduleRequest r = Nightly();
  r.set_disabled(true);
  auto added = store_->AddSchedule(r, Utc(2026, 12, 4, 1, 0));
  ASSERT_TRUE(added.ok()) << added.status();
  EXPECT_FALSE(added->enabled());
  auto t = store_->StartDueSchedules(Utc(2026, 12, 6, 3, 0));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->started, 0);
  auto on = store_->SetScheduleEnabled("nightly", true, Utc(2026, 12, 6, 3, 0));
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_TRUE(on->enabled());
  EXPECT_EQ(on->next_due(), "2026-12-07T02:00:00Z");
  t = store_->StartDueSchedules(Utc(2026, 12, 6, 3, 1));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->started, 0);
  EXPECT_EQ(store_->SetScheduleEnabled("nope", false, Utc(2026, 12, 6, 3, 0)).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(ScheduleStoreTest, BadSchedulesAreRefusedNamingTheField) {
  pb::AddScheduleRequest bad_cron = Nightly();
  bad_cron.set_cron("0 25 * * *");
  auto st = store_->AddSchedule(bad_cron, Utc(2026, 12, 4, 1, 0)).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("cron: hour"), std::string::npos) << st;

  pb::AddScheduleRequest bad_filter = Nightly("typo");
  bad_filter.mutable_sweep()->mutable_filter()->add_tasks("text-generatoin");
  st = store_->AddSchedule(bad_filter, Utc(2026, 12, 4, 1, 0)).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(st.message()).find("sweep.filter.tasks[0]"), std::string::npos) << st;
  // The refused filter's probe left no sweep behind.
  pqxx::connection c(opts_.url);
  pqxx::nontransaction n(c);
  EXPECT_EQ(n.exec("SELECT count(*) FROM sweeps")[0][0].as<int>(), 0);

  ASSERT_TRUE(store_->AddSchedule(Nightly(), Utc(2026, 12, 4, 1, 0)).ok());
  EXPECT_EQ(store_->AddSchedule(Nightly(), Utc(2026, 12, 4, 1, 0)).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(store_->RemoveSchedule("nightly").ok());
  EXPECT_EQ(store_->RemoveSchedule("nightly").code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ts::store
