#include "services/store/store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <pqxx/pqxx>
#include <set>
#include <thread>

#include "proto/names.h"
#include "services/query/summary_builder.h"
#include "tests/fixtures/postgres_fixture.h"

namespace ts::store {
namespace {

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto* cluster = testing::PostgresCluster::Get();
    ASSERT_NE(cluster, nullptr);
    opts_.url = cluster->NewDatabase(::testing::UnitTest::GetInstance()->current_test_info()->name());
    store_ = Open();
    ASSERT_TRUE(store_->Migrate().ok());
    pb::UpsertModelsRequest up;
    for (int i = 0; i < 10; ++i) {
      auto* m = up.add_models();
      m->set_id("org/model-" + std::to_string(i));
      m->set_task(i < 6 ? "text-generation" : "text-classification");
      m->set_arch(i < 6 ? "LlamaForCausalLM" : "BertForSequenceClassification");
      m->set_family(i < 6 ? "llama" : "bert");
      m->set_config_json("{\"model_type\": \"x\", \"i\": " + std::to_string(i) + "}");
    }
    auto r = store_->UpsertModels(up);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->inserted(), 10);
    auto w = store_->RegisterWorker(Worker("w1"));
    ASSERT_TRUE(w.ok()) << w.status();
    worker_ = w->worker_id();
  }

  std::unique_ptr<Store> Open() {
    auto s = Store::Connect(opts_);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }
  static pb::RegisterWorkerRequest Worker(const std::string& name) {
    pb::RegisterWorkerRequest r;
    r.set_name(name);
    return r;
  }
  pb::CreateSweepRequest Sweep(int shard_max = 4) {
    pb::CreateSweepRequest r;
    r.set_name("t");
    r.mutable_profile()->set_name("sim-test");
    r.mutable_profile()->set_body("{\"name\": \"sim-test\"}");
    r.set_shard_max_models(shard_max);
    return r;
  }
  // A result for every mode of `job`, all `status`.
  static pb::ModelResult Result(const pb::Job& job, const std::string& status = "pass") {
    pb::ModelResult m;
    m.set_job_id(job.job_id());
    m.set_model_id(job.model_id());
    m.set_run(job.run());
    for (const char* mode : {"eager", "compile", "train"}) {
      auto* v = m.add_modes();
      v->set_mode(*ts::proto::ModeFromName(mode));
      v->set_status(*ts::proto::VerdictFromName(status));
      v->set_error(status == "pass" ? "" : "rmse 0.03 > 0.01 in aten::gelu");
      v->add_loss_reference(1.5);
      v->add_break_reasons("unsupported op aten::nonzero");
    }
    auto* op = m.add_ops();
    op->set_op("aten::mm");
    op->set_calls(3);
    op->set_native(true);
    m.set_opcov_ratio(0.9);
    m.set_total_ms(120);
    return m;
  }
  pb::ReportResultsRequest Report(const pb::LeaseShardResponse& l,
                                  const std::vector<pb::ModelResult>& results) {
    pb::ReportResultsRequest r;
    r.set_worker_id(worker_);
    r.set_shard_id(l.shard_id());
    r.set_lease_token(l.lease_token());
    for (const auto& m : results) *r.add_results() = m;
    return r;
  }
  pb::FinishShardRequest Finish(const pb::LeaseShardResponse& l) {
    pb::FinishShardRequest f;
    f.set_worker_id(worker_);
    f.set_shard_id(l.shard_id());
    f.set_lease_token(l.lease_token());
    return f;
  }
  // Leases, reports every job with `status`, finishes; until the queue is empty.
  int Drain(Store& s, const std::string& status = "pass") {
    int shards = 0;
    for (;;) {
      auto l = s.LeaseShard(worker_);
      EXPECT_TRUE(l.ok()) << l.status();
      if (!l.ok() || !l->has_shard()) return shards;
      std::vector<pb::ModelResult> res;
      for (const auto& j : l->jobs()) res.push_back(Result(j, status));
      EXPECT_TRUE(s.ReportResults(Report(*l, res)).ok());
      EXPECT_TRUE(s.FinishShard(Finish(*l)).ok());
      ++shards;
    }
  }

  // GetSweep of a running sweep sums the shards' tallies; this counts the same things from the
  // jobs, results and model_runs tables and expects the two to agree.
  void ExpectTalliesMatchTables(Store& s, int64_t sweep_id, const std::string& where) {
    auto p = s.GetSweep(sweep_id);
    ASSERT_TRUE(p.ok()) << p.status();
    ASSERT_EQ(p->state(), "running") << where;
    pqxx::connection c(opts_.url);
    pqxx::nontransaction n(c);
    const std::string id = std::to_string(sweep_id);
    pqxx::result r = n.exec(
        "SELECT (SELECT count(*) FROM jobs WHERE sweep_id = " + id + " AND run = 1), "
        "(SELECT count(*) FROM jobs WHERE sweep_id = " + id + "), "
        "(SELECT count(*) FROM jobs WHERE sweep_id = " + id + " AND done), "
        "(SELECT count(*) FROM model_runs WHERE sweep_id = " + id + " AND run = 1), "
        "(SELECT count(DISTINCT model_id) FROM results WHERE sweep_id = " + id +
        " AND run = 1 AND status NOT IN ('pass', 'lost'))");
    EXPECT_EQ(p->models_expected(), r[0][0].as<int64_t>()) << where;
    EXPECT_EQ(p->jobs_total(), r[0][1].as<int64_t>()) << where;
    EXPECT_EQ(p->jobs_done(), r[0][2].as<int64_t>()) << where;
    EXPECT_EQ(p->models_recorded(), r[0][3].as<int64_t>()) << where;
    EXPECT_EQ(p->failures(), r[0][4].as<int64_t>()) << where;
  }

  // A sweep of 10 models run to done, all passing, then a second one against it as baseline
  // whose one primary shard is reported with models 0 and 1 failing (their confirmation runs
  // queued, not run). Returns the second sweep.
  absl::StatusOr<pb::CreateSweepResponse> HeadWhereModels0And1Fail(Store& s) {
    auto base = s.CreateSweep(Sweep(10));
    if (!base.ok()) return base.status();
    Drain(s, "pass");
    auto req = Sweep(10);
    req.set_baseline_sweep_id(base->sweep_id());
    auto sw = s.CreateSweep(req);
    if (!sw.ok()) return sw.status();
    auto l = s.LeaseShard(worker_);
    if (!l.ok()) return l.status();
    std::vector<pb::ModelResult> res;
    for (const auto& j : l->jobs()) {
      const bool bad = j.model_id() == "org/model-0" || j.model_id() == "org/model-1";
      res.push_back(Result(j, bad ? "fail_accuracy" : "pass"));
    }
    if (auto r = s.ReportResults(Report(*l, res)); !r.ok()) return r.status();
    if (auto f = s.FinishShard(Finish(*l)); !f.ok()) return f.status();
    return sw;
  }

  // n sweeps of every model, each run to done in turn.
  std::vector<int64_t> DoneSweeps(int n) {
    std::vector<int64_t> ids;
    for (int i = 0; i < n; ++i) {
      auto sw = store_->CreateSweep(Sweep(10));
      EXPECT_TRUE(sw.ok()) << sw.status();
      if (!sw.ok()) break;
      Drain(*store_);
      ids.push_back(sw->sweep_id());
    }
    return ids;
  }

  StoreOptions opts_;
  std::unique_ptr<Store> store_;
  int64_t worker_ = 0;
};

TEST_F(StoreTest, MigrationsApplyOnceAndAreIdempotent) {
  ASSERT_TRUE(store_->Migrate().ok());
  auto v = store_->AppliedMigrations();
  ASSERT_TRUE(v.ok());
  EXPECT_EQ(*v, (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 15, 16, 17}));
}

// Migration 15 on a database from before one cause, one alert: the migrations up to 14 applied
// as they were, then suspect alerts one per mode (aten::mm open in eager, acknowledged in
// compile; aten::bmm in eager) and a per-mode op alert, then Migrate. aten::mm is one alert
// (the oldest) across both modes with every model and its modes, open, its worst severity and
// widest span; the other is resolved (and updated, for Alertmanager); aten::bmm is one alert of
// one mode; the op alert keeps its mode.
TEST(StoreUpgradeTest, Migration15MergesPerModeSuspectAlertsIntoOneAcrossModes) {
  auto* cluster = testing::PostgresCluster::Get();
  ASSERT_NE(cluster, nullptr);
  const std::string url = cluster->NewDatabase("upgrade_15");
  {
    pqxx::connection c(url);
    {
      pqxx::nontransaction n(c);
      n.exec(R"(CREATE TABLE schema_migrations (version int PRIMARY KEY, name text NOT NULL,
                  applied_at timestamptz NOT NULL DEFAULT now()))");
    }
    for (const auto& m : Migrations()) {
      if (m.version >= 15) continue;
      pqxx::work w(c);
      w.exec(m.sql);
      w.exec_params("INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", m.version,
                    m.name);
      w.commit();
    }
    pqxx::work w(c);
    w.exec(R"(
      INSERT INTO profiles (name, sha, body) VALUES ('sim-2.1', 'x', '{}');
      INSERT INTO sweeps (profile_id, modes, state) SELECT profile_id, '{eager,compile}', 'done'
        FROM profiles;
      INSERT INTO sweeps (profile_id, modes, state) SELECT profile_id, '{eager,compile}', 'done'
        FROM profiles;
      INSERT INTO alerts (alert_id, state, line, mode, cause_kind, cause, cause_text, severity,
                          first_sweep, last_sweep, checked_sweep, clean_sweeps, ack_note)
      VALUES (1, 'open', 'sim', 'eager', 'suspect', 'aten::mm', 'aten::mm', 'warning', 2, 2, 2, 0,
              NULL),
             (2, 'acknowledged', 'sim', 'compile', 'suspect', 'aten::mm', 'aten::mm', 'major',
              1, 2, 2, 1, 'known'),
             (3, 'open', 'sim', 'eager', 'suspect', 'aten::bmm', 'aten::bmm', 'warning', 2, 2, 2,
              0, NULL),
             (4, 'open', 'sim', 'compile', 'op', 'aten::cumsum', 'aten::cumsum', 'warning', 2, 2,
              2, 0, NULL);
      INSERT INTO alert_models (alert_id, model_id, arch, task, sweep_id) VALUES
        (1, 'org/a', 'A', 't', 2), (1, 'org/b', 'A', 't', 2),
        (2, 'org/b', 'A', 't', 1), (2, 'org/c', 'B', 't', 1),
        (3, 'org/a', 'A', 't', 2), (4, 'org/d', 'B', 't', 2);)");
    w.commit();
  }
  StoreOptions o;
  o.url = url;
  auto s = Store::Connect(o);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE((*s)->Migrate().ok());
  auto all = (*s)->ListAlerts("", 0, 100);
  ASSERT_TRUE(all.ok()) << all.status();
  std::map<int64_t, pb::Alert> by_id;
  for (const auto& a : *all) by_id[a.alert_id()] = a;
  ASSERT_EQ(by_id.size(), 4u);
  const auto modes = [](const auto& repeated) {
    return std::vector<int>(repeated.begin(), repeated.end());
  };
  const pb::Alert& mm = by_id[1];
  EXPECT_EQ(mm.state(), "open");
  EXPECT_EQ(mm.mode(), pb::MODE_UNSPECIFIED);
  EXPECT_EQ(modes(mm.modes()), (std::vector<int>{pb::MODE_EAGER, pb::MODE_COMPILE}));
  EXPECT_EQ(mm.severity(), "major");
  EXPECT_EQ(mm.first_sweep_id(), 1);
  EXPECT_EQ(mm.clean_sweeps(), 0);
  std::map<std::string, std::vector<int>> models;
  for (const auto& m : mm.models()) models[m.model_id()] = modes(m.modes());
  EXPECT_EQ(models, (std::map<std::string, std::vector<int>>{
                        {"org/a", {pb::MODE_EAGER}},
                        {"org/b", {pb::MODE_EAGER, pb::MODE_COMPILE}},
                        {"org/c", {pb::MODE_COMPILE}}}));
  EXPECT_EQ(by_id[2].state(), "resolved");
  EXPECT_GT(by_id[2].updated_at().seconds(), 0);
  EXPECT_EQ(by_id[3].mode(), pb::MODE_UNSPECIFIED);
  EXPECT_EQ(modes(by_id[3].modes()), std::vector<int>{pb::MODE_EAGER});
  EXPECT_EQ(by_id[4].mode(), pb::MODE_COMPILE);
  EXPECT_EQ(modes(by_id[4].modes()), std::vector<int>{pb::MODE_COMPILE});
  ASSERT_EQ(by_id[4].models_size(), 1);
  EXPECT_EQ(modes(by_id[4].models(0).modes()), std::vector<int>{pb::MODE_COMPILE});
}

TEST_F(StoreTest, SweepRunsToDoneWithEveryModelRecordedOnce) {
  auto sw = store_->CreateSweep(Sweep());
  ASSERT_TRUE(sw.ok()) << sw.status();
  EXPECT_EQ(sw->models(), 10);
  EXPECT_EQ(sw->shards(), 3);  // 10 models, at most 4 a shard
  EXPECT_EQ(Drain(*store_), 3);
  auto p = store_->GetSweep(sw->sweep_id());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->state(), "done");
  EXPECT_EQ(p->models_expected(), 10);
  EXPECT_EQ(p->models_recorded(), 10);
  EXPECT_EQ(p->duplicates(), 0);
  EXPECT_EQ(p->failures(), 0);
  auto rows = store_->ListResults(sw->sweep_id(), "", 100);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 10u);
  EXPECT_EQ(rows->front().status().at("compile"), "pass");
  EXPECT_DOUBLE_EQ(rows->front().opcov_ratio(), 0.9);
  auto page2 = store_->ListResults(sw->sweep_id(), (*rows)[4].model_id(), 100);
  EXPECT_EQ(page2->size(), 5u);
}

// A mode's perf (migration 0016) goes in with the report and comes back whole: GetModel gives
// the record, ListResults the perf of each mode that has one; a mode without perf reads back
// without (never zeros). The group counters carry it the same live and kept.
TEST_F(StoreTest, PerfRoundTripsAndGroupsCarryItLiveAndKept) {
  auto sw = store_->CreateSweep(Sweep(10));
  ASSERT_TRUE(sw.ok()) << sw.status();
  const auto with_perf = [](pb::ModelResult m) {
    const int i = std::stoi(m.model_id().substr(m.model_id().rfind('-') + 1));
    for (auto& v : *m.mutable_modes()) {
      if (v.mode() == pb::MODE_TRAIN) continue;  // train: none
      pb::Perf* p = v.mutable_perf();
      p->set_device_us(100.0 + i);
      p->set_flops(2e6);
      p->set_bytes(4e5);
      p->set_mfu(0.001 * (i + 1));
      p->set_launches(7);
      p->set_fallback_us(1.5);
      p->set_transfer_bytes(64);
      p->set_peak_device_bytes(8192);
      pb::OpTime* t = p->add_top_ops();
      t->set_op("aten::mm");
      t->set_us(60.25);
      t->set_share(60.25 / p->device_us());
      const bool compile = v.mode() == pb::MODE_COMPILE;
      p->set_speedup(compile ? 1.0 + i : NAN);
      p->set_compression(compile && i % 2 == 0 ? 1.5 : NAN);
    }
    return m;
  };
  std::map<std::string, pb::ModelResult> sent;
  for (;;) {
    auto l = store_->LeaseShard(worker_);
    ASSERT_TRUE(l.ok()) << l.status();
    if (!l->has_shard()) break;
    std::vector<pb::ModelResult> res;
    for (const auto& j : l->jobs()) {
      res.push_back(with_perf(Result(j)));
      sent[j.model_id()] = res.back();
    }
    ASSERT_TRUE(store_->ReportResults(Report(*l, res)).ok());
    ASSERT_TRUE(store_->FinishShard(Finish(*l)).ok());
  }
  auto h = store_->ModelHistory("org/model-3", 5);
  ASSERT_TRUE(h.ok()) << h.status();
  ASSERT_EQ(h->sweeps_size(), 1);
  for (const auto& v : h->sweeps(0).result().modes()) {
    const pb::ModeVerdict* want = nullptr;
    for (const auto& w : sent["org/model-3"].modes()) {
      if (w.mode() == v.mode()) want = &w;
    }
    ASSERT_NE(want, nullptr);
    ASSERT_EQ(v.has_perf(), want->has_perf()) << v.mode();
    if (!v.has_perf()) continue;
    EXPECT_EQ(v.perf().device_us(), 103);
    EXPECT_EQ(v.perf().launches(), 7);
    EXPECT_EQ(v.perf().peak_device_bytes(), 8192);
    ASSERT_EQ(v.perf().top_ops_size(), 1);
    EXPECT_EQ(v.perf().top_ops(0).op(), "aten::mm");
    EXPECT_EQ(v.perf().top_ops(0).us(), 60.25);
    EXPECT_EQ(std::isnan(v.perf().speedup()), v.mode() != pb::MODE_COMPILE);
    if (v.mode() == pb::MODE_COMPILE) {
      EXPECT_EQ(v.perf().speedup(), 4);
    }
    EXPECT_TRUE(std::isnan(v.perf().compression())) << "model 3 has none";
  }
  auto rows = store_->ListResults(sw->sweep_id(), "", 100);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_EQ(rows->size(), 10u);
  for (const auto& r : *rows) {
    EXPECT_EQ(r.perf().size(), 2u) << r.model_id();
    EXPECT_FALSE(r.perf().count("train"));
    EXPECT_EQ(r.perf().at("eager").device_us(), sent[r.model_id()].modes(0).perf().device_us());
    EXPECT_EQ(r.perf().at("compile").speedup(), sent[r.model_id()].modes(1).perf().speedup());
  }
  // Live, then kept: the same perf tallies (10 models, speedups 1..10, compressions 1.5 x 5).
  auto tally = [&] {
    auto groups = store_->SweepGroups(sw->sweep_id(), "sweep_id");
    EXPECT_TRUE(groups.ok()) << groups.status();
    query::PerfTally t;
    for (const auto& g : *groups) {
      t.models += g.perf.models;
      t.log_speedup_sum += g.perf.log_speedup_sum;
      t.compression_n += g.perf.compression_n;
      t.compression_sum += g.perf.compression_sum;
      t.mfus.insert(t.mfus.end(), g.perf.mfus.begin(), g.perf.mfus.end());
    }
    std::sort(t.mfus.begin(), t.mfus.end());
    return t;
  };
  double logs = 0;
  for (int i = 0; i < 10; ++i) logs += query::OnSumGrid(std::log(1.0 + i));  // exact sums
  for (const char* when : {"live", "kept"}) {
    const query::PerfTally t = tally();
    EXPECT_EQ(t.models, 10) << when;
    EXPECT_EQ(t.log_speedup_sum, logs) << when;
    EXPECT_EQ(t.compression_n, 5) << when;
    EXPECT_NEAR(t.compression_sum, 7.5, 1e-12) << when;
    ASSERT_EQ(t.mfus.size(), 10u) << when;
    EXPECT_NEAR(t.mfus[0], 0.001, 1e-15) << when;
    ASSERT_TRUE(store_->SummarizeDoneSweeps().ok());  // keeps the sweep's answers
  }
}

// A sweep's tallies do not depend on the order its results arrived in: the same results
// reported in two orders give the same opcov and ln(speedup) sums to the last bit, live and kept
// (each term on the grid of query::OnSumGrid and summed in integers: exact; in float8 the order
// decides which low bits a large term swallows).
TEST_F(StoreTest, GroupSumsDoNotDependOnTheOrderResultsArrivedIn) {
  // ln(speedup) 40 (model 0), -40 (model 1) and 0.1; opcov 1 (model 0) and 0.1.
  const auto shaped = [](pb::ModelResult m) {
    const int i = std::stoi(m.model_id().substr(m.model_id().rfind('-') + 1));
    m.set_opcov_ratio(i == 0 ? 1.0 : 0.1);
    for (auto& v : *m.mutable_modes()) {
      if (v.mode() != pb::MODE_COMPILE) continue;
      v.mutable_perf()->set_device_us(100);
      v.mutable_perf()->set_speedup(std::exp(i == 0 ? 40.0 : i == 1 ? -40.0 : 0.1));
    }
    return m;
  };
  std::vector<std::vector<store::GroupTally>> kept;
  for (const bool reversed : {false, true}) {
    auto sw = store_->CreateSweep(Sweep(10));
    ASSERT_TRUE(sw.ok()) << sw.status();
    auto l = store_->LeaseShard(worker_);
    ASSERT_TRUE(l.ok() && l->has_shard()) << l.status();
    ASSERT_EQ(l->jobs_size(), 10);
    std::vector<pb::ModelResult> res;
    for (const auto& j : l->jobs()) res.push_back(shaped(Result(j)));
    if (reversed) std::reverse(res.begin(), res.end());
    for (const auto& r : res) ASSERT_TRUE(store_->ReportResults(Report(*l, {r})).ok());
    ASSERT_TRUE(store_->FinishShard(Finish(*l)).ok());
    auto live = store_->SweepGroups(sw->sweep_id(), "sweep_id");
    ASSERT_TRUE(live.ok()) << live.status();
    ASSERT_TRUE(store_->SummarizeDoneSweeps().ok());
    auto done = store_->SweepGroups(sw->sweep_id(), "sweep_id");
    ASSERT_TRUE(done.ok()) << done.status();
    kept.push_back(*live);
    kept.push_back(*done);
  }
  ASSERT_EQ(kept.size(), 4u);
  for (const auto& groups : kept) {
    ASSERT_EQ(groups.size(), kept[0].size());
    for (size_t g = 0; g < groups.size(); ++g) {
      EXPECT_EQ(groups[g].arch, kept[0][g].arch);
      EXPECT_EQ(groups[g].perf.models, kept[0][g].perf.models);
      // Bit for bit, not near: this is what the order used to change.
      EXPECT_EQ(groups[g].opcov_sum, kept[0][g].opcov_sum);
      EXPECT_EQ(groups[g].perf.log_speedup_sum, kept[0][g].perf.log_speedup_sum);
    }
  }
  // Llama (models 0-5): 40, -40 and four of 0.1; BERT (6-9): four of 0.1. Exactly the sums of
  // the terms on the grid.
  const auto grid = [](double x) { return query::OnSumGrid(x); };
  for (const auto& g : kept[0]) {
    const bool llama = g.arch == "LlamaForCausalLM";
    const double logs = llama ? grid(std::log(std::exp(40.0))) + grid(std::log(std::exp(-40.0)))
                              : 0.0;
    EXPECT_EQ(g.perf.log_speedup_sum, logs + 4 * grid(std::log(std::exp(0.1)))) << g.arch;
    EXPECT_EQ(g.opcov_sum, (llama ? 1 + 5 * grid(0.1) : 4 * grid(0.1))) << g.arch;
  }
}

TEST_F(StoreTest, RepeatedReportIsIdempotent) {
  auto sw = store_->CreateSweep(Sweep(10));
  ASSERT_TRUE(sw.ok());
  auto l = store_->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  std::vector<pb::ModelResult> res = {Result(l->jobs(0)), Result(l->jobs(1))};
  auto first = store_->ReportResults(Report(*l, res));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->accepted(), 2);
  auto again = store_->ReportResults(Report(*l, res));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->accepted(), 0);
  EXPECT_EQ(again->duplicates(), 2);
}

TEST_F(StoreTest, LastReportCanFinishTheShard) {
  auto sw = store_->CreateSweep(Sweep(10));
  ASSERT_TRUE(sw.ok());
  auto l = store_->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  std::vector<pb::ModelResult> res;
  for (const auto& j : l->jobs()) res.push_back(Result(j));
  auto part = Report(*l, {res.begin(), res.begin() + 4});
  ASSERT_TRUE(store_->ReportResults(part).ok());
  auto last = Report(*l, {res.begin() + 4, res.end()});
  last.set_finish(true);
  auto r = store_->ReportResults(last);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->jobs_left(), 0);
  auto p = store_->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->state(), "done");
  EXPECT_EQ(p->models_recorded(), 10);
  // The lease ended with the shard.
  EXPECT_EQ(store_->FinishShard(Finish(*l)).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, CancelledSweepLeasesNothingMoreAndItsHoldersDrain) {
  auto sw = store_->CreateSweep(Sweep(2));  // 5 shards
  ASSERT_TRUE(sw.ok());
  auto held = store_->LeaseShard(worker_);
  ASSERT_TRUE(held.ok() && held->has_shard());
  ASSERT_TRUE(store_->ReportResults(Report(*held, {Result(held->jobs(0))})).ok());
  auto c = store_->CancelSweep(sw->sweep_id());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state(), "cancelled");
  EXPECT_EQ(c->shards_queued(), 0);
  EXPECT_EQ(c->models_recorded(), 1);
  // No more leases from it; its holder is told to drain, and its shard ends without requeueing.
  EXPECT_FALSE(store_->LeaseShard(worker_)->has_shard());
  pb::HeartbeatRequest hb;
  hb.set_worker_id(worker_);
  hb.set_shard_id(held->shard_id());
  hb.set_lease_token(held->lease_token());
  auto h = store_->Heartbeat(hb);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_TRUE(h->drain());
  auto f = Finish(*held);
  f.set_release(true);
  ASSERT_TRUE(store_->FinishShard(f).ok());
  auto p = store_->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->state(), "cancelled");
  EXPECT_EQ(p->shards_queued() + p->shards_leased(), 0);
  EXPECT_FALSE(store_->LeaseShard(worker_)->has_shard());
  EXPECT_EQ(store_->CancelSweep(4242).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, StaleLeaseTokenIsRefusedAndStoresNothing) {
  auto sw = store_->CreateSweep(Sweep(10));
  ASSERT_TRUE(sw.ok());
  auto l = store_->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  pb::LeaseShardResponse stale = *l;
  stale.set_lease_token("not-the-token");
  auto r = store_->ReportResults(Report(stale, {Result(l->jobs(0))}));
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(r.status().message().find("lease_token"), std::string::npos);
  pb::HeartbeatRequest hb;
  hb.set_shard_id(l->shard_id());
  hb.set_lease_token("nope");
  EXPECT_EQ(store_->Heartbeat(hb).status().code(), absl::StatusCode::kFailedPrecondition);
  auto p = store_->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->models_recorded(), 0);
  hb.set_shard_id(999999);
  EXPECT_EQ(store_->Heartbeat(hb).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, LeaseRetriedWithItsRequestIdGetsTheSameShardAndToken) {
  ASSERT_TRUE(store_->CreateSweep(Sweep(5)).ok());  // two shards
  // The first call leased a shard, and its answer was lost on the way back.
  auto first = store_->LeaseShard(worker_, "lease-req-0001");
  ASSERT_TRUE(first.ok() && first->has_shard());
  EXPECT_FALSE(first->replayed());
  auto retry = store_->LeaseShard(worker_, "lease-req-0001");
  ASSERT_TRUE(retry.ok() && retry->has_shard()) << retry.status();
  EXPECT_TRUE(retry->replayed());
  EXPECT_EQ(retry->shard_id(), first->shard_id());
  EXPECT_EQ(retry->lease_token(), first->lease_token());
  EXPECT_EQ(retry->jobs_size(), first->jobs_size());
  EXPECT_EQ(retry->modes_size(), 3);
  EXPECT_EQ(retry->profile().name(), "sim-test");
  // A new request is a new lease: the other shard, then nothing.
  auto second = store_->LeaseShard(worker_, "lease-req-0002");
  ASSERT_TRUE(second.ok() && second->has_shard());
  EXPECT_NE(second->shard_id(), first->shard_id());
  EXPECT_FALSE(store_->LeaseShard(worker_, "lease-req-0003")->has_shard());
  // Another worker cannot take a lease by replaying someone else's request id.
  auto other = store_->RegisterWorker(Worker("w2"));
  auto stolen = store_->LeaseShard(other->worker_id(), "lease-req-0001");
  ASSERT_TRUE(stolen.ok());
  EXPECT_FALSE(stolen->has_shard());
  // Once the shard is finished, the old request id leases nothing.
  std::vector<pb::ModelResult> all;
  for (const auto& j : first->jobs()) all.push_back(Result(j));
  ASSERT_TRUE(store_->ReportResults(Report(*first, all)).ok());
  ASSERT_TRUE(store_->FinishShard(Finish(*first)).ok());
  EXPECT_FALSE(store_->LeaseShard(worker_, "lease-req-0001")->has_shard());
}

TEST_F(StoreTest, CreateSweepRetriedWithItsRequestIdMakesOneSweep) {
  pb::CreateSweepRequest req = Sweep(5);
  req.set_request_id("create-req-0001");
  auto a = store_->CreateSweep(req);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->replayed());
  auto b = store_->CreateSweep(req);  // the in-doubt commit's retry
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_TRUE(b->replayed());
  EXPECT_EQ(b->sweep_id(), a->sweep_id());
  EXPECT_EQ(b->models(), a->models());
  EXPECT_EQ(b->shards(), a->shards());
  EXPECT_EQ(store_->Queue()->shards_queued, a->shards());  // no second sweep's shards
  // The same id for another request is refused, naming the field; nothing is made.
  req.set_sample(3);
  auto c = store_->CreateSweep(req);
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(c.status().message().substr(0, 11), "request_id:") << c.status();
  EXPECT_EQ(store_->Queue()->sweeps_running, 1);
  // A refused call leaves no answer behind: after the fix the same id creates the sweep.
  pb::CreateSweepRequest bad = Sweep(5);
  bad.set_request_id("create-req-0002");
  bad.mutable_filter()->add_tasks("no-such-task");
  EXPECT_FALSE(store_->CreateSweep(bad).ok());
  bad.mutable_filter()->clear_tasks();
  auto d = store_->CreateSweep(bad);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_FALSE(d->replayed());
  EXPECT_NE(d->sweep_id(), a->sweep_id());
  // Answers older than the cut-off are forgotten.
  auto forgotten = store_->ForgetOldRequests(0);
  ASSERT_TRUE(forgotten.ok());
  EXPECT_EQ(*forgotten, 2);
}

TEST_F(StoreTest, ReportRetriedAfterItFinishedTheShardGetsTheFirstAnswer) {
  auto sw = store_->CreateSweep(Sweep(10));
  auto l = store_->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  std::vector<pb::ModelResult> all;
  for (const auto& j : l->jobs()) all.push_back(Result(j));
  pb::ReportResultsRequest rep = Report(*l, all);
  rep.set_finish(true);
  rep.set_request_id("report-req-0001");
  auto first = store_->ReportResults(rep);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->accepted(), 10);
  // The answer was lost; the shard is done and its token gone, yet the retry is answered.
  auto retry = store_->ReportResults(rep);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->replayed());
  EXPECT_EQ(retry->accepted(), 10);
  EXPECT_EQ(retry->jobs_left(), 0);
  auto p = store_->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->state(), "done");
  EXPECT_EQ(p->models_recorded(), 10);
  EXPECT_EQ(p->duplicates(), 0);
  // Without a request id the same retry is refused as stale (what workers saw before).
  rep.clear_request_id();
  EXPECT_EQ(store_->ReportResults(rep).status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(StoreTest, TwoConcurrentIdenticalReportsStoreOnce) {
  auto sw = store_->CreateSweep(Sweep(10));
  auto l = store_->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  std::vector<pb::ModelResult> all;
  for (const auto& j : l->jobs()) all.push_back(Result(j));
  pb::ReportResultsRequest rep = Report(*l, all);
  rep.set_finish(true);
  rep.set_request_id("report-twins-01");
  auto s1 = Open();
  auto s2 = Open();
  // Both start together on their own connections; whichever inserts the request's row second
  // waits for the first to commit, then answers from it.
  std::atomic<int> ready{0};
  absl::StatusOr<pb::ReportResultsResponse> a = absl::UnknownError("not run");
  absl::StatusOr<pb::ReportResultsResponse> b = absl::UnknownError("not run");
  std::thread ta([&] {
    ++ready;
    while (ready < 2) std::this_thread::yield();
    a = s1->ReportResults(rep);
  });
  std::thread tb([&] {
    ++ready;
    while (ready < 2) std::this_thread::yield();
    b = s2->ReportResults(rep);
  });
  ta.join();
  tb.join();
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->replayed() + b->replayed(), 1);  // one stored, the other answered from it
  EXPECT_EQ(a->accepted(), 10);
  EXPECT_EQ(b->accepted(), 10);
  pqxx::connection c(opts_.url);
  pqxx::nontransaction n(c);
  EXPECT_EQ(n.exec("SELECT count(*) FROM results WHERE sweep_id = " +
                   std::to_string(sw->sweep_id()))[0][0].as<int>(),
            30);
  auto p = store_->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->models_recorded(), 10);
  EXPECT_EQ(p->duplicates(), 0);
}

TEST_F(StoreTest, ReportAfterTheShardWasReLeasedIsRefusedAndTheNewHoldersResultsKept) {
  opts_.lease_ttl_s = 0;
  auto s = Open();
  auto sw = s->CreateSweep(Sweep(10));
  auto old_lease = s->LeaseShard(worker_);
  ASSERT_TRUE(old_lease.ok() && old_lease->has_shard());
  ASSERT_EQ(s->ExpireLeases()->expired, 1);
  auto w2 = s->RegisterWorker(Worker("w2"));
  auto new_lease = s->LeaseShard(w2->worker_id());
  ASSERT_TRUE(new_lease.ok() && new_lease->has_shard());
  ASSERT_EQ(new_lease->shard_id(), old_lease->shard_id());
  pb::ReportResultsRequest fresh = Report(*new_lease, {Result(new_lease->jobs(0), "pass")});
  fresh.set_worker_id(w2->worker_id());
  ASSERT_TRUE(s->ReportResults(fresh).ok());
  // The old holder comes back with a different verdict for the same model: refused.
  pb::ReportResultsRequest late = Report(*old_lease, {Result(old_lease->jobs(0), "fail_accuracy")});
  late.set_request_id("late-report-01");
  EXPECT_EQ(s->ReportResults(late).status().code(), absl::StatusCode::kFailedPrecondition);
  auto rows = s->ListResults(sw->sweep_id(), "", 100);
  ASSERT_TRUE(rows.ok());
  int stored = 0;
  for (const auto& r : *rows) {
    if (r.status().empty()) continue;
    ++stored;
    EXPECT_EQ(r.status().at("eager"), "pass") << r.model_id();
  }
  EXPECT_EQ(stored, 1);
}

TEST_F(StoreTest, LostLeaseChargesOnlyTheJobInFlight) {
  opts_.lease_ttl_s = 0;
  auto s = Open();
  auto sw = s->CreateSweep(Sweep(10));
  auto l = s->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  ASSERT_EQ(l->jobs_size(), 10);
  // The worker reported the first two models and said it was running the fourth (the third
  // finished but waits in its report batch) when it was lost.
  ASSERT_TRUE(s->ReportResults(Report(*l, {Result(l->jobs(0)), Result(l->jobs(1))})).ok());
  pb::HeartbeatRequest hb;
  hb.set_worker_id(worker_);
  hb.set_shard_id(l->shard_id());
  hb.set_lease_token(l->lease_token());
  hb.set_job_id(l->jobs(3).job_id());
  ASSERT_TRUE(s->Heartbeat(hb).ok());
  ASSERT_EQ(s->ExpireLeases()->expired, 1);
  pqxx::connection c(opts_.url);
  pqxx::nontransaction n(c);
  const auto lost = [&] {
    std::map<int64_t, int> out;
    for (const auto& row : n.exec("SELECT job_id, lost_leases FROM jobs WHERE sweep_id = " +
                                  std::to_string(sw->sweep_id()))) {
      out[row[0].as<int64_t>()] = row[1].as<int>();
    }
    return out;
  };
  for (const auto& [job, count] : lost()) {
    EXPECT_EQ(count, job == l->jobs(3).job_id() ? 1 : 0) << "job " << job;
  }
  // Lost again without a heartbeat (the worker died on its first model): the first job it
  // would run is charged, never the ones that did not start.
  auto again = s->LeaseShard(worker_);
  ASSERT_TRUE(again.ok() && again->has_shard());
  ASSERT_EQ(s->ExpireLeases()->expired, 1);
  for (const auto& [job, count] : lost()) {
    const int want = job == l->jobs(3).job_id() ? 1 : job == l->jobs(2).job_id() ? 1 : 0;
    EXPECT_EQ(count, want) << "job " << job;
  }
}

TEST_F(StoreTest, WorkerLosingLeasesInARowIsQuarantinedAndItsChargesAreTakenBack) {
  opts_.lease_ttl_s = 0;
  opts_.quarantine_after = 3;
  auto s = Open();
  auto sw = s->CreateSweep(Sweep(2));  // five shards of two
  ASSERT_TRUE(sw.ok());
  auto bad = s->RegisterWorker(Worker("flaky-host/1"));
  int quarantined = 0;
  for (int i = 0; i < 3; ++i) {
    auto l = s->LeaseShard(bad->worker_id());
    ASSERT_TRUE(l.ok() && l->has_shard()) << i;
    auto e = s->ExpireLeases();
    ASSERT_TRUE(e.ok()) << e.status();
    quarantined += e->quarantined;
  }
  EXPECT_EQ(quarantined, 1);
  pqxx::connection c(opts_.url);
  pqxx::nontransaction n(c);
  EXPECT_EQ(n.exec("SELECT coalesce(sum(lost_leases), 0) FROM jobs")[0][0].as<int>(), 0)
      << "the bad worker's charges were not taken back";
  auto refused = s->LeaseShard(bad->worker_id());
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->has_shard());
  EXPECT_TRUE(refused->quarantined());
  EXPECT_GT(refused->retry_after_ms(), 500);
  // Restarted by its supervisor under the same name: still quarantined.
  auto again = s->RegisterWorker(Worker("flaky-host/1"));
  EXPECT_TRUE(s->LeaseShard(again->worker_id())->quarantined());
  auto rows = s->ListWorkers();
  ASSERT_TRUE(rows.ok()) << rows.status();
  int listed_quarantined = 0;
  for (const auto& w : *rows) {
    if (w.name == "flaky-host/1") {
      ++listed_quarantined;
      EXPECT_EQ(w.failures, 3);
      EXPECT_FALSE(w.quarantined_until.empty());
    }
  }
  EXPECT_EQ(listed_quarantined, 2);
  EXPECT_EQ(s->Queue()->workers_quarantined, 2);
  // A good worker runs the sweep (the first shard was split after its two losses): nobody was
  // charged, nothing is a crash.
  EXPECT_GE(Drain(*s), 5);
  auto p = s->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->state(), "done");
  EXPECT_EQ(p->failures(), 0);
}

TEST_F(StoreTest, WorkerThatStoresAResultStartsItsCountAgain) {
  opts_.lease_ttl_s = 0;
  opts_.quarantine_after = 3;
  auto s = Open();
  ASSERT_TRUE(s->CreateSweep(Sweep(2)).ok());
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 2; ++i) {  // two lost leases: one short of quarantine
      ASSERT_TRUE(s->LeaseShard(worker_)->has_shard());
      ASSERT_EQ(s->ExpireLeases()->quarantined, 0);
    }
    auto l = s->LeaseShard(worker_);
    ASSERT_TRUE(l.ok() && l->has_shard());
    ASSERT_TRUE(s->ReportResults(Report(*l, {Result(l->jobs(0))})).ok());
    EXPECT_EQ(s->ExpireLeases()->quarantined, 0);
  }
  EXPECT_FALSE(s->LeaseShard(worker_)->quarantined());
}

TEST_F(StoreTest, ExtendedLeasesOutliveTheirTtlUntilTheGraceEnds) {
  opts_.lease_ttl_s = 0;  // expired as soon as taken
  auto s = Open();
  ASSERT_TRUE(s->CreateSweep(Sweep(5)).ok());
  auto l = s->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  auto g = s->ExtendLeases(60);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(*g, 1);
  EXPECT_EQ(s->ExpireLeases()->expired, 0);
  // The holder reports on its token as if nothing happened.
  EXPECT_TRUE(s->ReportResults(Report(*l, {Result(l->jobs(0))})).ok());
}

TEST_F(StoreTest, ReportNamesTheBadField) {
  auto sw = store_->CreateSweep(Sweep(10));
  auto l = store_->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  pb::ModelResult wrong_model = Result(l->jobs(0));
  wrong_model.set_model_id("org/other");
  auto a = store_->ReportResults(Report(*l, {Result(l->jobs(1)), wrong_model}));
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a.status().message().substr(0, 20), "results[1].model_id:");
  pb::ModelResult wrong_job = Result(l->jobs(0));
  wrong_job.set_job_id(123456);
  auto b = store_->ReportResults(Report(*l, {wrong_job}));
  EXPECT_EQ(b.status().message().substr(0, 18), "results[0].job_id:");
  pb::ModelResult missing_mode = Result(l->jobs(0));
  missing_mode.mutable_modes()->RemoveLast();
  auto c = store_->ReportResults(Report(*l, {missing_mode}));
  EXPECT_EQ(c.status().message().substr(0, 17), "results[0].modes:");
  // Nothing of the refused reports was stored.
  EXPECT_EQ(store_->GetSweep(sw->sweep_id())->models_recorded(), 0);
}

TEST_F(StoreTest, ExpiredLeaseIsRequeuedWithNextAttemptAndOnlyPendingJobs) {
  opts_.lease_ttl_s = 0;  // every lease is already expired when the next transaction starts
  auto s = Open();
  auto sw = s->CreateSweep(Sweep(10));
  ASSERT_TRUE(sw.ok());
  auto l = s->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  ASSERT_EQ(l->attempt(), 1);
  ASSERT_EQ(l->jobs_size(), 10);
  ASSERT_TRUE(s->ReportResults(Report(*l, {Result(l->jobs(0)), Result(l->jobs(1))})).ok());
  auto e = s->ExpireLeases();
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(e->expired, 1);
  // The old holder is refused from now on.
  EXPECT_EQ(s->ReportResults(Report(*l, {Result(l->jobs(2))})).status().code(),
            absl::StatusCode::kFailedPrecondition);
  auto again = s->LeaseShard(worker_);
  ASSERT_TRUE(again.ok() && again->has_shard());
  EXPECT_EQ(again->shard_id(), l->shard_id());
  EXPECT_EQ(again->attempt(), 2);
  EXPECT_EQ(again->jobs_size(), 8);  // the two reported models are not run again
}

TEST_F(StoreTest, RequeuedShardWithEveryResultInIsClosedAndTheNextOneLeased) {
  opts_.lease_ttl_s = 0;
  auto s = Open();
  ASSERT_TRUE(s->CreateSweep(Sweep(5)).ok());  // two shards of 5
  auto l = s->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  std::vector<pb::ModelResult> all;
  for (const auto& j : l->jobs()) all.push_back(Result(j));
  ASSERT_TRUE(s->ReportResults(Report(*l, all)).ok());  // the worker dies before finishing
  ASSERT_TRUE(s->ExpireLeases().ok());
  // The requeued shard has nothing left to run: the lease closes it and hands out the other.
  auto next = s->LeaseShard(worker_);
  ASSERT_TRUE(next.ok() && next->has_shard()) << next.status();
  EXPECT_NE(next->shard_id(), l->shard_id());
  EXPECT_EQ(next->jobs_size(), 5);
  EXPECT_EQ(next->attempt(), 1);
}

TEST_F(StoreTest, ShardThatKeepsLosingWorkersIsSplitAndTheCulpritRecordedLostNotFailed) {
  opts_.lease_ttl_s = 0;
  auto s = Open();
  auto sw = s->CreateSweep(Sweep(10));
  ASSERT_TRUE(sw.ok());
  // Two lost leases of the whole shard: split into 10 single-model shards.
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(s->LeaseShard(worker_)->has_shard());
    auto e = s->ExpireLeases();
    ASSERT_TRUE(e.ok()) << e.status();
  }
  auto q = s->Queue();
  EXPECT_EQ(q->shards_queued, 10);
  ExpectTalliesMatchTables(*s, sw->sweep_id(), "after the split");
  // The first single-model shard loses its worker once more: 3 losses -> lost, which is the
  // infrastructure's failure: recorded, not a failure of the model.
  auto l = s->LeaseShard(worker_);
  ASSERT_EQ(l->jobs_size(), 1);
  const std::string culprit = l->jobs(0).model_id();
  auto e = s->ExpireLeases();
  EXPECT_EQ(e->lost, 1);
  ExpectTalliesMatchTables(*s, sw->sweep_id(), "after the loss");
  EXPECT_EQ(s->GetSweep(sw->sweep_id())->failures(), 0);
  EXPECT_EQ(s->GetSweep(sw->sweep_id())->models_recorded(), 1);
  // Every other model passes.
  EXPECT_EQ(Drain(*s), 9);
  auto p = s->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->state(), "done");
  EXPECT_EQ(p->models_recorded(), 10);
  EXPECT_EQ(p->failures(), 0);
  EXPECT_EQ(p->duplicates(), 0);
  auto rows = s->ListResults(sw->sweep_id(), "", 100);
  ASSERT_EQ(rows->size(), 10u);
  for (const auto& r : *rows) {
    EXPECT_EQ(r.status().at("eager"), r.model_id() == culprit ? "lost" : "pass") << r.model_id();
  }
  // The done sweep's tallies (what tables and the gate read) hold it as lost, not crash.
  auto groups = s->SweepGroups(sw->sweep_id(), "sweep_id");
  ASSERT_TRUE(groups.ok()) << groups.status();
  // One model, in each of the sweep's modes.
  EXPECT_EQ(query::VerdictCount(*groups, "lost"), static_cast<int64_t>(rows->at(0).status().size()));
  EXPECT_EQ(query::VerdictCount(*groups, "crash"), 0);
}

TEST_F(StoreTest, NewFailuresGetTwoConfirmationRunsAndAreSettled) {
  // Primary: models 0 and 1 fail; confirmations: model 0 fails again (deterministic), model 1
  // passes once (flaky).
  auto sw = HeadWhereModels0And1Fail(*store_);
  ASSERT_TRUE(sw.ok()) << sw.status();
  EXPECT_EQ(store_->GetSweep(sw->sweep_id())->jobs_total(), 14);
  ExpectTalliesMatchTables(*store_, sw->sweep_id(), "with the confirmations queued");
  for (;;) {
    auto c = store_->LeaseShard(worker_);
    ASSERT_TRUE(c.ok());
    if (!c->has_shard()) break;
    ASSERT_EQ(c->jobs_size(), 1);
    const auto& j = c->jobs(0);
    EXPECT_GT(j.run(), 1);
    const bool fail = j.model_id() == "org/model-0" || j.run() == 2;
    ASSERT_TRUE(store_->ReportResults(Report(*c, {Result(j, fail ? "fail_accuracy" : "pass")})).ok());
    ASSERT_TRUE(store_->FinishShard(Finish(*c)).ok());
  }
  auto p = store_->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->state(), "done");
  EXPECT_EQ(p->confirmed_deterministic(), 1);
  EXPECT_EQ(p->confirmed_flaky(), 1);
  EXPECT_EQ(p->models_recorded(), 10);
  auto rows = store_->ListResults(sw->sweep_id(), "", 100);
  ASSERT_EQ(rows->size(), 10u);
  EXPECT_EQ((*rows)[0].confirmation(), "deterministic");
  EXPECT_EQ((*rows)[1].confirmation(), "flaky");
  for (size_t i = 2; i < rows->size(); ++i) {
    EXPECT_EQ((*rows)[i].confirmation(), "") << (*rows)[i].model_id();  // never regressed
  }
}

// A confirmation run the infrastructure lost (its worker lost 3 times: `lost`) is no
// observation. Model 0's run 2 is lost and its run 3 fails again: deterministic, not flaky.
// Model 1's runs 2 and 3 are both lost: one observation only, so it stays pending.
TEST_F(StoreTest, LostConfirmationRunsAreNoObservation) {
  opts_.lease_ttl_s = 0;
  opts_.quarantine_after = 100;  // one worker loses every lease here: not the point
  auto s = Open();
  auto sw = HeadWhereModels0And1Fail(*s);
  ASSERT_TRUE(sw.ok()) << sw.status();
  int lost = 0;
  for (int guard = 0; guard < 100; ++guard) {
    auto c = s->LeaseShard(worker_);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_FALSE(c->quarantined());
    if (!c->has_shard()) break;
    ASSERT_EQ(c->jobs_size(), 1);
    const auto& j = c->jobs(0);
    const bool lose = j.model_id() == "org/model-1" || j.run() == 2;
    if (lose) {  // the worker dies with it, three times over
      auto e = s->ExpireLeases();
      ASSERT_TRUE(e.ok()) << e.status();
      lost += e->lost;
      continue;
    }
    ASSERT_TRUE(s->ReportResults(Report(*c, {Result(j, "fail_accuracy")})).ok());
    ASSERT_TRUE(s->FinishShard(Finish(*c)).ok());
  }
  EXPECT_EQ(lost, 3);  // model 0's run 2, model 1's runs 2 and 3
  auto p = s->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->state(), "done");
  EXPECT_EQ(p->confirmed_deterministic(), 1);
  EXPECT_EQ(p->confirmed_flaky(), 0);
  auto rows = s->ListResults(sw->sweep_id(), "", 100);
  ASSERT_EQ(rows->size(), 10u);
  EXPECT_EQ((*rows)[0].model_id(), "org/model-0");
  EXPECT_EQ((*rows)[0].confirmation(), "deterministic");
  EXPECT_EQ((*rows)[1].confirmation(), "pending");
}

// The per-task split that sweeps.cc's SelectModels documents for a sample of `sample` models:
// within each task the k-th of n models (by the seeded hash) has frac k/n, and the sample takes
// the `sample` smallest fracs over all tasks. Ties between tasks are broken by the seeded hash,
// so a tie across the cut has no seed-free answer: `decided` is false then.
std::map<std::string, int> StratifiedSplit(const std::map<std::string, int>& task_sizes,
                                           int sample, bool* decided) {
  std::vector<std::pair<double, std::string>> fracs;
  for (const auto& [task, n] : task_sizes) {
    for (int k = 1; k <= n; ++k) fracs.emplace_back(static_cast<double>(k) / n, task);
  }
  std::stable_sort(fracs.begin(), fracs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  const size_t take = std::min(fracs.size(), static_cast<size_t>(sample));
  *decided = take == fracs.size() || fracs[take - 1].first != fracs[take].first;
  std::map<std::string, int> split;
  for (size_t i = 0; i < take; ++i) ++split[fracs[i].second];
  return split;
}

// Models per task in a sweep, from its jobs.
std::map<std::string, int> SweepSplit(const std::string& url, int64_t sweep_id) {
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  std::map<std::string, int> split;
  for (const auto& row : n.exec_params(
           "SELECT m.task, count(*) FROM jobs j JOIN models m USING (model_id) "
           "WHERE j.sweep_id = $1 GROUP BY m.task",
           sweep_id)) {
    split[row[0].c_str()] = row[1].as<int>();
  }
  return split;
}

TEST_F(StoreTest, FilterAndSampleSelectModels) {
  auto req = Sweep();
  req.mutable_filter()->add_tasks("text-classification");
  auto sw = store_->CreateSweep(req);
  ASSERT_TRUE(sw.ok()) << sw.status();
  EXPECT_EQ(sw->models(), 4);
  EXPECT_EQ(SweepSplit(opts_.url, sw->sweep_id()),
            (std::map<std::string, int>{{"text-classification", 4}}));
  // Stratified by task: every sample size whose cut the rule decides without the hash, under
  // two seeds. A plain LIMIT (by model_id: text-generation first; or by hash alone) misses the
  // split for most sizes.
  const std::map<std::string, int> sizes = {{"text-generation", 6}, {"text-classification", 4}};
  bool decided = false;
  ASSERT_EQ(StratifiedSplit(sizes, 5, &decided),
            (std::map<std::string, int>{{"text-generation", 3}, {"text-classification", 2}}));
  int checked = 0;
  for (uint64_t seed : {0, 7}) {
    for (int sample = 1; sample < 10; ++sample) {
      const std::map<std::string, int> want = StratifiedSplit(sizes, sample, &decided);
      if (!decided) continue;
      auto sampled = Sweep();
      sampled.set_sample(sample);
      sampled.set_seed(seed);
      auto s2 = store_->CreateSweep(sampled);
      ASSERT_TRUE(s2.ok()) << s2.status();
      EXPECT_EQ(s2->models(), sample);
      EXPECT_EQ(SweepSplit(opts_.url, s2->sweep_id()), want)
          << "sample " << sample << ", seed " << seed;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 2 * 7);  // sizes 4 and 9 cut a tie at 1/2 and 1
  auto bad = Sweep();
  bad.mutable_filter()->add_tasks("text-classification");
  bad.mutable_filter()->add_tasks("text-generaton");
  auto b = store_->CreateSweep(bad);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(b.status().message().substr(0, 16), "filter.tasks[1]:");
  auto base = Sweep();
  base.set_baseline_sweep_id(4242);
  EXPECT_EQ(store_->CreateSweep(base).status().message().substr(0, 18), "baseline_sweep_id:");
}

TEST_F(StoreTest, ShardsArePackedByHistoricalDuration) {
  auto first = store_->CreateSweep(Sweep(10));
  ASSERT_TRUE(first.ok());
  // History: model-0 took 9 s, every other model 1 s.
  for (;;) {
    auto l = store_->LeaseShard(worker_);
    ASSERT_TRUE(l.ok());
    if (!l->has_shard()) break;
    std::vector<pb::ModelResult> res;
    for (const auto& j : l->jobs()) {
      res.push_back(Result(j));
      res.back().set_total_ms(j.model_id() == "org/model-0" ? 9000 : 1000);
    }
    ASSERT_TRUE(store_->ReportResults(Report(*l, res)).ok());
    ASSERT_TRUE(store_->FinishShard(Finish(*l)).ok());
  }
  // 18 s of expected work, 9 s a shard: model-0 alone in one shard, the nine others together.
  auto req = Sweep(10);
  req.set_shard_target_s(9);
  auto second = store_->CreateSweep(req);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->shards(), 2);
  pqxx::connection c(opts_.url);
  pqxx::nontransaction n(c);
  auto rows = n.exec_params(R"(
    SELECT s.estimated_ms, count(j.job_id), bool_or(j.model_id = 'org/model-0')
    FROM shards s JOIN jobs j USING (shard_id) WHERE s.sweep_id = $1
    GROUP BY s.shard_id, s.estimated_ms ORDER BY s.estimated_ms)",
                            second->sweep_id());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_DOUBLE_EQ(rows[0][0].as<double>(), 9000);
  EXPECT_DOUBLE_EQ(rows[1][0].as<double>(), 9000);
  EXPECT_EQ(rows[0][1].as<int>() + rows[1][1].as<int>(), 10);
  for (const auto& row : rows) {
    if (row[2].as<bool>()) {
      EXPECT_EQ(row[1].as<int>(), 1) << "model-0 shares its shard";
    }
  }
}

// The history that packs a new sweep comes from the newest three done sweeps only, so the
// cost of CreateSweep does not grow with the sweeps kept.
TEST_F(StoreTest, PackingReadsTheTimingsOfTheNewestThreeDoneSweepsOnly) {
  for (int k = 0; k < 4; ++k) {
    ASSERT_TRUE(store_->CreateSweep(Sweep(10)).ok());
    for (;;) {
      auto l = store_->LeaseShard(worker_);
      ASSERT_TRUE(l.ok());
      if (!l->has_shard()) break;
      std::vector<pb::ModelResult> res;
      for (const auto& j : l->jobs()) {
        res.push_back(Result(j));
        // The oldest sweep says 100 s; the three newer ones 2 s.
        res.back().set_total_ms(k == 0 ? 100000 : 2000);
      }
      ASSERT_TRUE(store_->ReportResults(Report(*l, res)).ok());
      ASSERT_TRUE(store_->FinishShard(Finish(*l)).ok());
    }
  }
  auto s = store_->CreateSweep(Sweep(10));
  ASSERT_TRUE(s.ok()) << s.status();
  pqxx::connection c(opts_.url);
  pqxx::nontransaction n(c);
  EXPECT_DOUBLE_EQ(n.exec_params("SELECT sum(estimated_ms) FROM shards WHERE sweep_id = $1",
                                 s->sweep_id())[0][0]
                       .as<double>(),
                   10 * 2000.0);
}

TEST_F(StoreTest, ConcurrentLeasesNeverShareAShard) {
  auto sw = store_->CreateSweep(Sweep(1));  // 10 single-model shards
  ASSERT_TRUE(sw.ok());
  std::vector<std::set<int64_t>> got(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto s = Open();
      for (;;) {
        auto l = s->LeaseShard(worker_);
        if (!l.ok() || !l->has_shard()) return;
        got[static_cast<size_t>(t)].insert(l->shard_id());
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<int64_t> all;
  size_t total = 0;
  for (const auto& g : got) {
    total += g.size();
    all.insert(g.begin(), g.end());
  }
  EXPECT_EQ(total, 10u);
  EXPECT_EQ(all.size(), 10u);
}

TEST_F(StoreTest, BatchLeaseGivesEachWorkerItsOwnShardAndNamesUnknownOnes) {
  ASSERT_TRUE(store_->CreateSweep(Sweep(4)).ok());  // 10 models: shards of 4, 4, 2
  auto w2 = store_->RegisterWorker(Worker("w2"));
  auto w3 = store_->RegisterWorker(Worker("w3"));
  auto w4 = store_->RegisterWorker(Worker("w4"));
  ASSERT_TRUE(w2.ok() && w3.ok() && w4.ok());
  const std::vector<int64_t> ids = {worker_, 987654, w2->worker_id(), w3->worker_id(), w4->worker_id()};
  auto v = store_->LeaseShards(ids);
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->size(), ids.size());
  EXPECT_EQ((*v)[1].status().code(), absl::StatusCode::kNotFound);  // answered alone
  EXPECT_NE((*v)[1].status().message().find("worker_id"), std::string_view::npos);
  std::set<int64_t> shards, models;
  int leased = 0;
  for (size_t i : {0u, 2u, 3u, 4u}) {
    ASSERT_TRUE((*v)[i].ok()) << (*v)[i].status();
    const auto& l = *(*v)[i];
    if (!l.has_shard()) {
      EXPECT_GT(l.retry_after_ms(), 0);  // three shards for four workers
      continue;
    }
    ++leased;
    shards.insert(l.shard_id());
    EXPECT_EQ(l.profile().name(), "sim-test");
    EXPECT_EQ(l.modes_size(), 3);
    for (const auto& j : l.jobs()) EXPECT_TRUE(models.insert(j.job_id()).second);
    // The lease is the worker's: its token renews it.
    pb::HeartbeatRequest hb;
    hb.set_worker_id(ids[i]);
    hb.set_shard_id(l.shard_id());
    hb.set_lease_token(l.lease_token());
    EXPECT_TRUE(store_->Heartbeat(hb).ok());
  }
  EXPECT_EQ(leased, 3);
  EXPECT_EQ(shards.size(), 3u);
  EXPECT_EQ(models.size(), 10u);  // every job handed out once
}

// ---- Retention ----

int64_t Scalar(const std::string& url, const std::string& sql) {
  pqxx::connection c(url);
  pqxx::nontransaction n(c);
  return n.exec(sql)[0][0].as<int64_t>();
}
bool TableExists(const std::string& url, const std::string& name) {
  return Scalar(url, "SELECT count(*) FROM pg_class WHERE relname = '" + name + "'") > 0;
}

TEST_F(StoreTest, PruneDropsAFinishedSweepsPartitionsAndRowsAndKeepsItsCounts) {
  auto old = store_->CreateSweep(Sweep());
  ASSERT_TRUE(old.ok());
  ASSERT_EQ(Drain(*store_, "fail_accuracy"), 3);
  auto kept = store_->CreateSweep(Sweep());
  ASSERT_TRUE(kept.ok());
  Drain(*store_);
  const std::string o = std::to_string(old->sweep_id()), k = std::to_string(kept->sweep_id());
  const auto before = store_->GetSweep(old->sweep_id());
  ASSERT_TRUE(before.ok());
  ASSERT_EQ(before->failures(), 10);

  PruneRequest dry;
  dry.sweep_ids = {old->sweep_id()};
  dry.dry_run = true;
  auto d = store_->PruneSweeps(dry);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->pruned.size(), 1u);
  EXPECT_EQ(d->pruned[0].models_recorded, 10);
  EXPECT_TRUE(TableExists(opts_.url, "results_" + o));  // a dry run changes nothing
  EXPECT_EQ(store_->GetSweep(old->sweep_id())->state(), "done");

  PruneRequest req;
  req.sweep_ids = {old->sweep_id()};
  auto r = store_->PruneSweeps(req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->pruned.size(), 1u);
  EXPECT_EQ(r->pruned[0].sweep_id, old->sweep_id());
  EXPECT_EQ(r->pruned[0].state, "done");
  EXPECT_TRUE(r->completed.empty());
  EXPECT_FALSE(TableExists(opts_.url, "results_" + o));
  EXPECT_FALSE(TableExists(opts_.url, "model_runs_" + o));
  EXPECT_EQ(Scalar(opts_.url, "SELECT count(*) FROM jobs WHERE sweep_id = " + o), 0);
  EXPECT_EQ(Scalar(opts_.url, "SELECT count(*) FROM shards WHERE sweep_id = " + o), 0);
  // The other sweep is untouched.
  EXPECT_TRUE(TableExists(opts_.url, "results_" + k));
  EXPECT_EQ(Scalar(opts_.url, "SELECT count(*) FROM results WHERE sweep_id = " + k), 30);
  EXPECT_EQ(store_->ListResults(kept->sweep_id(), "", 100)->size(), 10u);
  // The tombstone answers with the counts it had.
  auto p = store_->GetSweep(old->sweep_id());
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->state(), "pruned");
  EXPECT_EQ(p->models_expected(), before->models_expected());
  EXPECT_EQ(p->models_recorded(), 10);
  EXPECT_EQ(p->failures(), 10);
  EXPECT_EQ(p->duplicates(), 0);
  auto gone = store_->ListResults(old->sweep_id(), "", 100);
  EXPECT_EQ(gone.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(gone.status().message().substr(0, 9), "sweep_id:");
  EXPECT_EQ(store_->ListResults(999, "", 100).status().code(), absl::StatusCode::kNotFound);
  // A pruned sweep cannot be a new sweep's baseline; pruning it again changes nothing.
  auto next = Sweep();
  next.set_baseline_sweep_id(old->sweep_id());
  auto refused = store_->CreateSweep(next);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message().substr(0, 18), "baseline_sweep_id:");
  auto again = store_->PruneSweeps(req);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->pruned.empty());
  EXPECT_EQ(again->already, std::vector<int64_t>{old->sweep_id()});
}

TEST_F(StoreTest, PruneRulesSpareRunningSweepsTheirBaselinesAndTheNewest) {
  const std::vector<int64_t> ids = DoneSweeps(4);
  ASSERT_EQ(ids.size(), 4u);
  // A running sweep against ids[0] as its baseline.
  auto req = Sweep(10);
  req.set_baseline_sweep_id(ids[0]);
  auto running = store_->CreateSweep(req);
  ASSERT_TRUE(running.ok());

  PruneRequest bad;
  EXPECT_EQ(store_->PruneSweeps(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad.sweep_ids = {ids[1], 12345};
  auto nf = store_->PruneSweeps(bad);
  EXPECT_EQ(nf.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(nf.status().message(), "sweep_ids[1]: no sweep 12345");
  bad.sweep_ids = {running->sweep_id()};
  auto run = store_->PruneSweeps(bad);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(run.status().message().substr(0, 13), "sweep_ids[0]:");
  bad.sweep_ids = {ids[0]};
  auto base = store_->PruneSweeps(bad);
  EXPECT_EQ(base.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(base.status().message().find("baseline of running sweep"), std::string::npos);
  EXPECT_TRUE(TableExists(opts_.url, "results_" + std::to_string(ids[1])));  // nothing went

  // Keep the newest finished one; everything older goes but the running sweep's baseline.
  PruneRequest rule;
  rule.older_than_s = 0;
  rule.keep_last = 1;
  auto r = store_->PruneSweeps(rule);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<int64_t> pruned;
  for (const auto& p : r->pruned) pruned.push_back(p.sweep_id);
  EXPECT_EQ(pruned, (std::vector<int64_t>{ids[1], ids[2]}));
  ASSERT_EQ(r->kept.size(), 1u);
  EXPECT_EQ(r->kept[0].substr(0, 6 + std::to_string(ids[0]).size()), "sweep " + std::to_string(ids[0]));
  for (int64_t id : {ids[0], ids[3], running->sweep_id()}) {
    EXPECT_TRUE(TableExists(opts_.url, "results_" + std::to_string(id))) << id;
  }
  EXPECT_EQ(store_->GetSweep(running->sweep_id())->state(), "running");
  // An age rule nothing is old enough for prunes nothing.
  PruneRequest young;
  young.older_than_s = 86400;
  auto y = store_->PruneSweeps(young);
  ASSERT_TRUE(y.ok());
  EXPECT_TRUE(y->pruned.empty());
  // Once the running sweep is done, its baseline can go.
  Drain(*store_);
  ASSERT_EQ(store_->GetSweep(running->sweep_id())->state(), "done");
  auto later = store_->PruneSweeps(rule);
  ASSERT_TRUE(later.ok());
  ASSERT_EQ(later->pruned.size(), 2u);
  EXPECT_EQ(later->pruned[0].sweep_id, ids[0]);
  EXPECT_EQ(later->pruned[1].sweep_id, ids[3]);
  EXPECT_TRUE(TableExists(opts_.url, "results_" + std::to_string(running->sweep_id())));
}

// What a prune leaves when it dies after its tombstone transaction, in the middle of
// DETACH ... CONCURRENTLY: the results partition is left "detach pending" (here: the detach is
// cancelled while it waits for a reader). The next prune finalizes and drops it.
TEST_F(StoreTest, PruneCutOffBeforeItsPartitionsWentIsFinishedByTheNextCall) {
  const std::vector<int64_t> ids = DoneSweeps(2);
  ASSERT_EQ(ids.size(), 2u);
  const std::string id = std::to_string(ids[0]);
  pqxx::connection c(opts_.url);
  {
    pqxx::nontransaction n(c);
    n.exec("UPDATE sweeps SET state = 'pruned', pruned_at = now(), summary = '{}' WHERE sweep_id = " + id);
  }
  {
    pqxx::connection reader(opts_.url);
    pqxx::work snapshot(reader);
    snapshot.exec("SELECT count(*) FROM results");
    std::atomic<bool> detach_failed{false};
    std::thread detach([&] {
      try {
        pqxx::connection d(opts_.url);
        pqxx::nontransaction n(d);
        n.exec("ALTER TABLE results DETACH PARTITION results_" + id + " CONCURRENTLY");
      } catch (const std::exception&) {
        detach_failed = true;  // cancelled, as intended
      }
    });
    int64_t cancelled = 0;
    for (int i = 0; i < 100 && cancelled == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      cancelled = Scalar(opts_.url,
                         "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE query "
                         "LIKE 'ALTER TABLE results DETACH%' AND wait_event_type = 'Lock'");
    }
    detach.join();
    snapshot.commit();
    ASSERT_EQ(cancelled, 1);
    ASSERT_TRUE(detach_failed);
  }
  ASSERT_EQ(Scalar(opts_.url, "SELECT count(*) FROM pg_inherits WHERE inhdetachpending AND "
                              "inhrelid = 'results_" + id + "'::regclass"),
            1);
  PruneRequest again;
  again.sweep_ids = {ids[0]};  // already pruned: nothing new, but the leftovers go
  auto r = store_->PruneSweeps(again);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->pruned.empty());
  EXPECT_EQ(r->completed, std::vector<int64_t>{ids[0]});
  EXPECT_FALSE(TableExists(opts_.url, "results_" + id));
  EXPECT_FALSE(TableExists(opts_.url, "model_runs_" + id));
  EXPECT_EQ(store_->ListResults(ids[1], "", 100)->size(), 10u);
  EXPECT_EQ(store_->GetSweep(ids[0])->state(), "pruned");
}

// Polls `sql` (a count) until it is positive, at most `tries` times 20 ms apart; true if it was.
bool Eventually(const std::string& url, const std::string& sql, int tries = 1500) {
  for (int i = 0; i < tries; ++i) {
    if (Scalar(url, sql) > 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// A long read over the results (a dashboard query, ListResults) is open while an old sweep is
// pruned: the prune's DETACH ... CONCURRENTLY waits for it, but the running sweep's reports do
// not wait for the prune. Had the prune locked the parent table (a plain DETACH), the report's
// COPY would queue behind it: its backend would wait on a lock until the reader ends.
TEST_F(StoreTest, PruneNeverHoldsUpAnotherSweepsReports) {
  const std::vector<int64_t> old = DoneSweeps(1);
  ASSERT_EQ(old.size(), 1u);
  auto live = store_->CreateSweep(Sweep(10));
  ASSERT_TRUE(live.ok());
  auto lease = store_->LeaseShard(worker_);
  ASSERT_TRUE(lease.ok() && lease->has_shard());
  std::vector<pb::ModelResult> res;
  for (const auto& j : lease->jobs()) res.push_back(Result(j));
  const pb::ReportResultsRequest report = Report(*lease, res);
  StoreOptions reporter_opts = opts_;
  reporter_opts.url += std::string(reporter_opts.url.find('?') == std::string::npos ? "?" : "&") +
                       "application_name=prune-test-reporter";
  auto reporter_or = Store::Connect(reporter_opts);
  ASSERT_TRUE(reporter_or.ok()) << reporter_or.status();
  std::unique_ptr<Store> reporter = std::move(*reporter_or);

  pqxx::connection reader(opts_.url);
  pqxx::work snapshot(reader);
  snapshot.exec("SELECT count(*) FROM results");  // holds the old sweep's partition

  std::atomic<bool> prune_done{false};
  absl::StatusOr<PruneResult> pruned = absl::UnknownError("not run");
  std::thread pruner([&] {
    auto s = Open();
    PruneRequest req;
    req.sweep_ids = {old[0]};
    pruned = s->PruneSweeps(req);
    prune_done = true;
  });
  const std::string detach_waits =
      "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query = "
      "'ALTER TABLE results DETACH PARTITION results_" + std::to_string(old[0]) +
      " CONCURRENTLY'";
  const bool detach_waited = Eventually(opts_.url, detach_waits);
  absl::StatusOr<pb::ReportResultsResponse> rep = absl::UnknownError("not run");
  std::atomic<bool> reported{false};
  bool report_blocked = false, detach_waited_out_the_report = false;
  if (detach_waited) {
    std::thread report_thread([&] {
      rep = reporter->ReportResults(report);
      reported = true;
    });
    // Until the report is in, or its backend waits on a lock (which only the prune could hold:
    // nothing else runs), or the bound runs out.
    const std::string report_waits =
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
        "application_name = 'prune-test-reporter'";
    for (int i = 0; i < 1500 && !reported && !report_blocked; ++i) {
      report_blocked = Scalar(opts_.url, report_waits) > 0;
      if (!report_blocked) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    detach_waited_out_the_report = reported && Scalar(opts_.url, detach_waits) == 1;
    EXPECT_FALSE(prune_done);  // still waiting for the reader
    snapshot.commit();
    report_thread.join();
  } else {
    snapshot.commit();
  }
  pruner.join();
  ASSERT_TRUE(detach_waited) << "the prune's DETACH ... CONCURRENTLY never waited for the reader";
  EXPECT_FALSE(report_blocked) << "the report waited on a lock held by the prune";
  EXPECT_TRUE(detach_waited_out_the_report)
      << "the report was not in while the DETACH still waited for the reader";
  ASSERT_TRUE(rep.ok()) << rep.status();
  EXPECT_EQ(rep->accepted(), 10);
  ASSERT_TRUE(pruned.ok()) << pruned.status();
  ASSERT_EQ(pruned->pruned.size(), 1u);
  EXPECT_FALSE(TableExists(opts_.url, "results_" + std::to_string(old[0])));
  EXPECT_EQ(Scalar(opts_.url, "SELECT count(*) FROM results WHERE sweep_id = " +
                                  std::to_string(live->sweep_id())), 30);
}

// Progress of a running sweep comes from per-shard tallies (no scan of the sweep); partial
// reports, a retried (duplicate) report, mixed verdicts and a requeued shard keep them equal
// to the tables' counts, and the done sweep's kept counts equal the tables' too.
TEST_F(StoreTest, RunningProgressFromShardTalliesAgreesWithTheTables) {
  auto sw = store_->CreateSweep(Sweep(4));
  ASSERT_TRUE(sw.ok());
  ExpectTalliesMatchTables(*store_, sw->sweep_id(), "before any lease");
  auto l = store_->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  ASSERT_EQ(l->jobs_size(), 4);
  const std::vector<pb::ModelResult> first = {Result(l->jobs(0), "fail_accuracy"), Result(l->jobs(1))};
  ASSERT_TRUE(store_->ReportResults(Report(*l, first)).ok());
  ExpectTalliesMatchTables(*store_, sw->sweep_id(), "after a partial report");
  auto again = store_->ReportResults(Report(*l, first));  // a retry: duplicates, not counted
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->duplicates(), 2);
  auto p = store_->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->models_recorded(), 2);
  EXPECT_EQ(p->failures(), 1);
  ExpectTalliesMatchTables(*store_, sw->sweep_id(), "after a duplicate report");
  // The shard is released with two jobs left: requeued, their totals stay.
  auto f = Finish(*l);
  f.set_release(true);
  ASSERT_EQ(store_->FinishShard(f)->jobs_left(), 2);
  ExpectTalliesMatchTables(*store_, sw->sweep_id(), "after the requeue");
  Drain(*store_, "fail_accuracy");
  const std::string summary_sql = "SELECT count(*) FROM sweeps WHERE summary IS NOT NULL AND sweep_id = " +
                                  std::to_string(sw->sweep_id());
  EXPECT_EQ(Scalar(opts_.url, summary_sql), 0);  // settling does not count (the last report stays cheap)
  auto summarized = store_->SummarizeDoneSweeps();
  ASSERT_TRUE(summarized.ok()) << summarized.status();
  EXPECT_EQ(*summarized, 1);
  EXPECT_EQ(Scalar(opts_.url, summary_sql), 1);
  EXPECT_EQ(*store_->SummarizeDoneSweeps(), 0);
  auto done = store_->GetSweep(sw->sweep_id());
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state(), "done");
  EXPECT_EQ(done->models_expected(), 10);
  EXPECT_EQ(done->models_recorded(), 10);
  EXPECT_EQ(done->failures(), 9);  // model 1 passed; the rest failed a mode
  EXPECT_EQ(done->jobs_done(), 10);
  EXPECT_EQ(done->duplicates(), 0);
  // The kept counts are the tables' counts.
  pqxx::connection c(opts_.url);
  pqxx::nontransaction n(c);
  const std::string id = std::to_string(sw->sweep_id());
  EXPECT_EQ(done->models_recorded(),
            n.exec("SELECT count(*) FROM model_runs WHERE run = 1 AND sweep_id = " + id)[0][0].as<int64_t>());
  EXPECT_EQ(done->failures(), n.exec("SELECT count(DISTINCT model_id) FROM results WHERE run = 1 AND "
                                     "status <> 'pass' AND sweep_id = " + id)[0][0].as<int64_t>());
}

// Migration 3 on a database with a sweep half done (an upgrade mid-sweep): the tallies it
// back-fills agree with the tables.
TEST_F(StoreTest, ProgressMigrationBackfillsTalliesOfARunningSweep) {
  auto sw = store_->CreateSweep(Sweep(4));
  ASSERT_TRUE(sw.ok());
  auto l = store_->LeaseShard(worker_);
  ASSERT_TRUE(l.ok() && l->has_shard());
  ASSERT_TRUE(store_->ReportResults(Report(*l, {Result(l->jobs(0), "fail_accuracy"), Result(l->jobs(1))})).ok());
  const Migration* m3 = nullptr;
  for (const auto& m : Migrations()) {
    if (m.version == 3) m3 = &m;
  }
  ASSERT_NE(m3, nullptr);
  {
    // The shards table as it was before migration 3, then migration 3 itself.
    pqxx::connection c(opts_.url);
    pqxx::work w(c);
    w.exec("ALTER TABLE shards DROP COLUMN jobs_total, DROP COLUMN jobs_done, "
           "DROP COLUMN primary_total, DROP COLUMN primary_done, DROP COLUMN primary_failed");
    w.exec(m3->sql);
    w.commit();
  }
  auto fresh = Open();
  ExpectTalliesMatchTables(*fresh, sw->sweep_id(), "after the backfill");
  auto p = fresh->GetSweep(sw->sweep_id());
  EXPECT_EQ(p->models_expected(), 10);
  EXPECT_EQ(p->models_recorded(), 2);
  EXPECT_EQ(p->failures(), 1);
}

TEST_F(StoreTest, SummarizeDoneSweepsTakesAtMostMaxOldestFirst) {
  const std::vector<int64_t> ids = DoneSweeps(2);
  ASSERT_EQ(ids.size(), 2u);
  auto has_summary = [&](int64_t id) {
    return Scalar(opts_.url, "SELECT count(*) FROM sweeps WHERE summary IS NOT NULL AND sweep_id = " +
                                 std::to_string(id)) == 1;
  };
  EXPECT_FALSE(has_summary(ids[0]));
  EXPECT_EQ(*store_->SummarizeDoneSweeps(1), 1);
  EXPECT_TRUE(has_summary(ids[0]));
  EXPECT_FALSE(has_summary(ids[1]));
  EXPECT_EQ(*store_->SummarizeDoneSweeps(5), 1);
  EXPECT_TRUE(has_summary(ids[1]));
  EXPECT_EQ(*store_->SummarizeDoneSweeps(5), 0);
  EXPECT_EQ(store_->GetSweep(ids[1])->models_recorded(), 10);
}

TEST_F(StoreTest, UnknownWorkerCannotLease) {
  ASSERT_TRUE(store_->CreateSweep(Sweep()).ok());
  auto l = store_->LeaseShard(987654);
  EXPECT_EQ(l.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(StoreTest, ReconnectsAfterTheServerRestarts) {
  ASSERT_TRUE(store_->Ping().ok());
  ASSERT_TRUE(testing::PostgresCluster::Get()->server().Restart().ok());
  // The first call finds the connection gone (UNAVAILABLE); the next one reconnects.
  absl::Status st = store_->Ping();
  if (!st.ok()) {
    EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
    st = store_->Ping();
  }
  EXPECT_TRUE(st.ok()) << st;
}

}  // namespace
}  // namespace ts::store
