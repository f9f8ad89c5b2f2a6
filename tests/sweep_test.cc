// Distributed sweeps with real processes: touchstone-scheduler and touchstone-worker binaries,
// a throwaway PostgreSQL, gRPC over loopback. Each test kills something mid-sweep and checks
// that every model is still recorded exactly once.
#include "tests/sweep_fixture.h"

namespace ts {
namespace {

// w1 is killed while it holds a shard with at least two of its jobs still to run (its reports
// go two at a time, so it cannot finish the shard between the look and the kill). That lease
// expires, the shard is requeued and w2 finishes it.
TEST_F(SweepTest, WorkerKilledMidShardLosesNothingAndDuplicatesNothing) {
  StartScheduler();
  const int64_t sweep = CreateSweep(40, Cheap, json::array());
  StartWorker("w1");
  StartWorker("w2");
  WaitFor(sweep, [](const auto& p) { return p.models_recorded() >= 6; }, 120);
  pqxx::connection c(db_);
  pqxx::nontransaction n(c);
  pqxx::result held;
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  while (held.empty() && Clock::now() < deadline) {
    held = n.exec_params(R"(
      SELECT s.shard_id, s.attempt, s.expiries FROM shards s JOIN workers w USING (worker_id)
      WHERE s.sweep_id = $1 AND w.name = 'w1' AND s.state = 'leased' AND s.jobs_done = 0
        AND s.jobs_total >= 4)",
                         sweep);
    if (held.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_EQ(held.size(), 1u) << "w1 never held a shard with jobs to run";
  Kill9("w1");  // its runner child dies with it (PR_SET_PDEATHSIG); its lease expires in 2 s
  const int64_t shard = held[0][0].as<int64_t>();
  auto p = WaitFor(sweep, [](const auto& q) { return q.state() == "done"; }, 240);
  EXPECT_EQ(p.failures(), 0);
  ExpectExactlyOnce(sweep);
  // The shard w1 held: its lease expired, and it was leased again and finished by w2.
  auto after = n.exec_params(R"(
    SELECT s.attempt, s.expiries, s.state, w.name FROM shards s JOIN workers w USING (worker_id)
    WHERE s.shard_id = $1)",
                             shard);
  ASSERT_EQ(after.size(), 1u);
  EXPECT_GT(after[0][0].as<int>(), held[0][1].as<int>()) << "shard " << shard << " never re-leased";
  EXPECT_GT(after[0][1].as<int>(), held[0][2].as<int>()) << "shard " << shard << " never expired";
  EXPECT_EQ(std::string(after[0][2].c_str()), "done");
  EXPECT_EQ(std::string(after[0][3].c_str()), "w2");
  auto m = common::HttpGet(http_port_, "/metrics", kToken);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_NE(m->body.find("touchstone_scheduler_lease_events_total{event=\"expired\"} "),
            std::string::npos);
  EXPECT_EQ(m->body.find("touchstone_scheduler_lease_events_total{event=\"expired\"} 0\n"),
            std::string::npos)
      << "the scheduler counted no expired lease";
}

TEST_F(SweepTest, WorkerDrainsOnSigtermAndReleasesItsShard) {
  StartScheduler();
  const int64_t sweep = CreateSweep(24, Cheap, json::array(), 120, /*shard_max=*/24);
  StartWorker("w1");
  WaitFor(sweep, [](const auto& p) { return p.models_recorded() >= 2; }, 120);
  ::kill(procs_["w1"], SIGTERM);
  const auto t0 = Clock::now();
  auto e = common::WaitFor(procs_["w1"], 60);
  ASSERT_TRUE(e.exited);
  procs_["w1"] = -1;
  EXPECT_EQ(e.code, 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 30);
  // Released, not expired: the shard is queued again at once, with what was done recorded.
  auto p = Progress(sweep);
  EXPECT_EQ(p.shards_leased(), 0);
  EXPECT_EQ(p.shards_queued(), 1);
  EXPECT_GE(p.models_recorded(), 2);
  EXPECT_LT(p.models_recorded(), 24);
  StartWorker("w2");
  WaitFor(sweep, [](const auto& q) { return q.state() == "done"; }, 240);
  ExpectExactlyOnce(sweep);
  // The hand-back counted no failed attempt: two leases (w1's, w2's) and no expiry, the count
  // that splits a shard and records its models `lost` (StoreOptions::max_lost_leases).
  pqxx::connection c(db_);
  pqxx::nontransaction n(c);
  auto shard = n.exec_params(R"(
    SELECT s.attempt, s.expiries, w.name FROM shards s JOIN workers w USING (worker_id)
    WHERE s.sweep_id = $1)",
                             sweep);
  ASSERT_EQ(shard.size(), 1u);
  EXPECT_EQ(shard[0][0].as<int>(), 2);
  EXPECT_EQ(shard[0][1].as<int>(), 0);
  EXPECT_EQ(std::string(shard[0][2].c_str()), "w2");
  EXPECT_NE(ReadText(dir_ / "w1.log").find("drained"), std::string::npos);
}

// An idle worker waits in a long poll (no poll every 0.5 s), takes a new sweep's shard as soon
// as it is created, and on SIGTERM while waiting drains at once (its long poll is cancelled).
TEST_F(SweepTest, IdleWorkerLongPollsTakesANewSweepAtOnceAndDrainsAtOnce) {
  lease_ttl_ = "30";  // a wait is at most one TTL: the worker's full 10 s, cancelled by the drain
  StartScheduler();
  StartWorker("w1");
  const auto parked = [this] {
    auto m = common::HttpGet(http_port_, "/metrics", kToken);
    const std::string name = "\ntouchstone_scheduler_lease_calls_parked ";
    const size_t at = m.ok() ? m->body.find(name) : std::string::npos;
    return at == std::string::npos ? -1.0 : std::stod(m->body.substr(at + name.size()));
  };
  const auto await_parked = [&] {
    for (int i = 0; i < 600 && parked() != 1; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return parked();
  };
  ASSERT_EQ(await_parked(), 1) << ReadText(dir_ / "w1.log");
  const int64_t sweep = CreateSweep(2, Cheap, json::array());
  WaitFor(sweep, [](const auto& q) { return q.state() == "done"; }, 120);
  ExpectExactlyOnce(sweep);
  ASSERT_EQ(await_parked(), 1);
  ::kill(procs_["w1"], SIGTERM);
  const auto t0 = Clock::now();
  auto e = common::WaitFor(procs_["w1"], 30);
  ASSERT_TRUE(e.exited);
  procs_["w1"] = -1;
  EXPECT_EQ(e.code, 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - t0).count(), 3.0)
      << "the long poll (10 s) should be cancelled by the drain";
}

TEST_F(SweepTest, CancelledSweepStopsItsShardsButNotTheWorkers) {
  StartScheduler();
  const int64_t sweep = CreateSweep(40, Cheap, json::array());
  StartWorker("w1");
  WaitFor(sweep, [](const auto& p) { return p.models_recorded() >= 4; }, 120);
  pb::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep);
  pb::SweepProgress cp;
  auto st = Call(&pb::Scheduler::Stub::CancelSweep, cancel, &cp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(cp.state(), "cancelled");
  // The worker hears it at its next heartbeat (TTL/3), ends the shard and keeps running.
  auto p = WaitFor(sweep, [](const auto& q) { return q.shards_leased() == 0; }, 30);
  EXPECT_EQ(p.shards_queued(), 0);
  EXPECT_LT(p.models_recorded(), 40);
  EXPECT_EQ(p.duplicates(), 0);
  EXPECT_FALSE(common::WaitFor(procs_["w1"], 0).exited) << "the worker should keep serving";
  // A new sweep is picked up by the same worker.
  models_.clear();
  const int64_t next = CreateSweep(4, Cheap, json::array());
  WaitFor(next, [](const auto& q) { return q.state() == "done"; }, 120);
  ExpectExactlyOnce(next);
}

TEST_F(SweepTest, SchedulerKilledAndRestartedCarriesOn) {
  StartScheduler();
  const int64_t sweep = CreateSweep(40, Cheap, json::array());
  StartWorker("w1");
  StartWorker("w2");
  WaitFor(sweep, [](const auto& p) { return p.models_recorded() >= 6; }, 120);
  const int port = grpc_port_;
  Kill9("scheduler");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // workers see UNAVAILABLE
  StartScheduler(port);  // same address: workers reconnect by themselves
  auto p = WaitFor(sweep, [](const auto& q) { return q.state() == "done"; }, 240);
  EXPECT_EQ(p.failures(), 0);
  ExpectExactlyOnce(sweep);
}

// Issue 14: an outage longer than the lease TTL (the scheduler down for 3 TTLs while the
// workers keep running their models): the restarted scheduler's start-up grace lets them
// re-attach on their tokens, so no lease expires, no model is charged a lost lease, and every
// result they finished during the outage is stored once.
TEST_F(SweepTest, SchedulerDownThreeTtlsLosesNoResultAndChargesNoModel) {
  // 5 s rather than the fixture's 2: no lease may expire in the whole sweep, and a heartbeat
  // held up 2 s is ordinary on a machine running the rest of the suite beside this test.
  lease_ttl_ = "5";
  StartScheduler();
  const int64_t sweep = CreateSweep(40, Cheap, json::array());
  StartWorker("w1");
  StartWorker("w2");
  WaitFor(sweep, [](const auto& p) { return p.models_recorded() >= 6; }, 120);
  const int port = grpc_port_;
  Kill9("scheduler");
  std::this_thread::sleep_for(std::chrono::seconds(15));  // three TTLs
  StartScheduler(port);
  auto p = WaitFor(sweep, [](const auto& q) { return q.state() == "done"; }, 240);
  EXPECT_EQ(p.failures(), 0);
  ExpectExactlyOnce(sweep);
  pqxx::connection c(db_);
  pqxx::nontransaction n(c);
  const std::string id = std::to_string(sweep);
  EXPECT_EQ(n.exec("SELECT coalesce(sum(expiries), 0) FROM shards WHERE sweep_id = " + id)[0][0]
                .as<int>(),
            0);
  EXPECT_EQ(n.exec("SELECT coalesce(sum(lost_leases), 0) FROM jobs WHERE sweep_id = " + id)[0][0]
                .as<int>(),
            0);
  EXPECT_EQ(n.exec("SELECT count(*) FROM results WHERE sweep_id = " + id +
                   " AND status <> 'pass'")[0][0]
                .as<int>(),
            0);
}

TEST_F(SweepTest, PostgresRestartedMidSweepServicesReconnect) {
  StartScheduler();
  const int64_t sweep = CreateSweep(40, Cheap, json::array());
  StartWorker("w1");
  StartWorker("w2");
  WaitFor(sweep, [](const auto& p) { return p.models_recorded() >= 6; }, 120);
  ASSERT_TRUE(testing::PostgresCluster::Get()->server().KillAndRestart().ok());
  auto p = WaitFor(sweep, [](const auto& q) { return q.state() == "done"; }, 240);
  EXPECT_EQ(p.failures(), 0);
  ExpectExactlyOnce(sweep);
  auto health = common::HttpGet(http_port_, "/healthz");
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->status, 200);
}

TEST_F(SweepTest, AbortIsCrashForThatModelOnlyAndHangIsTimeout) {
  StartScheduler();
  auto act = [](const json& row) { return row["config"].value("hidden_act", std::string()); };
  int bert = 0, llama = 0, resnet = 0;
  // gelu aborts the process in eager mode; silu hangs for a minute in eager mode.
  const json defects = json::array(
      {{{"id", "T1"}, {"op", "aten::gelu"}, {"mode", "eager"}, {"effect", {{"kind", "abort"}}},
        {"note", "test"}},
       {{"id", "T2"}, {"op", "aten::silu"}, {"mode", "eager"},
        {"effect", {{"kind", "sleep_ms"}, {"value", 60000}}}, {"note", "test"}}});
  const int64_t sweep = CreateSweep(
      8,
      [&](const json& row) {
        if (row["family"] == "bert" && act(row) == "gelu" && bert < 3) return ++bert > 0;
        if (row["family"] == "llama" && act(row) == "silu" && llama < 2) return ++llama > 0;
        if (row["family"] == "resnet" && resnet < 3) return ++resnet > 0;  // relu only
        return false;
      },
      defects, /*model_timeout_s=*/3, /*shard_max=*/8);
  StartWorker("w1");
  StartWorker("w2");
  WaitFor(sweep, [](const auto& q) { return q.state() == "done"; }, 300);
  ExpectExactlyOnce(sweep);
  auto v = Verdicts(sweep);
  ASSERT_EQ(v.size(), 8u);
  for (const auto& [id, modes] : v) {
    const std::string family = models_[id]["family"];
    if (family == "bert") {
      EXPECT_EQ(modes.at("eager").first, "crash") << id;
      EXPECT_NE(modes.at("eager").second.find("SIGABRT"), std::string::npos) << modes.at("eager").second;
      EXPECT_EQ(modes.at("compile").first, "pass") << id << ": " << modes.at("compile").second;
    } else if (family == "llama") {
      EXPECT_EQ(modes.at("eager").first, "timeout") << id;
      EXPECT_EQ(modes.at("compile").first, "pass") << id << ": " << modes.at("compile").second;
    } else {
      for (const auto& [mode, s] : modes) EXPECT_EQ(s.first, "pass") << id << " " << mode << ": " << s.second;
    }
  }
}

// The one-command sweep (embedded PostgreSQL, scheduler, workers) gives the same per-task table
// as the single-process run-catalog on the same sample; `touchstone db prune` then drops it
// from the same embedded database.
TEST(SweepCommandTest, SweepMatchesRunCatalogOnTheSameSampleAndCanBePruned) {
  char tmpl[] = "/tmp/ts-sweepcmd-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  const std::string catalog = (dir / "catalog.jsonl").string();
  {
    std::ofstream out(catalog);
    for (const auto& row : Catalog()) out << row.dump() << "\n";
  }
  const std::string profile = std::string(TS_PROFILES_DIR) + "/sim-2.0.json";
  auto sweep = testing::RunProcess(
      {kBin + "/touchstone", "sweep", "--catalog", catalog, "--sample", "24", "--workers", "2",
       "--profile", profile, "--state-dir", (dir / "state").string(), "--json",
       (dir / "sweep.json").string()},
      "", 600);
  ASSERT_EQ(sweep.exit_code, 0) << testing::Describe(sweep) << sweep.err;
  EXPECT_NE(sweep.out.find("Total"), std::string::npos) << sweep.out;
  json s = json::parse(ReadText(dir / "sweep.json"));
  EXPECT_EQ(s["models_expected"], 24);
  EXPECT_EQ(s["models_recorded"], 24);
  EXPECT_EQ(s["duplicates"], 0);
  EXPECT_GT(s["sweep_id"].get<int64_t>(), 0);
  auto single = testing::RunProcess({kBin + "/touchstone", "run-catalog", "--catalog", catalog,
                                     "--sample", "24", "--profile", profile, "--format", "json"},
                                    "", 600);
  ASSERT_EQ(single.exit_code, 0) << testing::Describe(single) << single.err;
  json r = json::parse(single.out);
  // Same verdicts; percentages equal up to summation order.
  std::function<bool(const json&, const json&)> same = [&](const json& a, const json& b) {
    if (a.is_number() && b.is_number()) return std::abs(a.get<double>() - b.get<double>()) < 1e-9;
    if (a.type() != b.type() || a.size() != b.size()) return false;
    if (a.is_object()) {
      for (const auto& [k, v] : a.items()) {
        if (!b.contains(k) || !same(v, b[k])) return false;
      }
      return true;
    }
    if (a.is_array()) {
      for (size_t i = 0; i < a.size(); ++i) {
        if (!same(a[i], b[i])) return false;
      }
      return true;
    }
    return a == b;
  };
  EXPECT_TRUE(same(s["tasks"], r["tasks"])) << s["tasks"].dump() << "\n" << r["tasks"].dump();
  EXPECT_TRUE(same(s["total"], r["total"])) << s["total"].dump() << "\n" << r["total"].dump();
  EXPECT_EQ(s["statuses"], r["statuses"]);
  // run-catalog's stage times: every stage ran for the 24 models, and the stages the engine
  // times separately sum to no more than its total.
  const json& st = r["stage_seconds"];
  double stages = 0;
  for (const char* k : {"build", "reference", "eager", "compile", "train"}) {
    ASSERT_TRUE(st.contains(k)) << st.dump();
    EXPECT_GT(st[k].get<double>(), 0) << k;
    stages += st[k].get<double>();
  }
  EXPECT_LE(stages, st["total"].get<double>() * 1.0001) << st.dump();
  EXPECT_LE(st["total"].get<double>(), r["seconds"].get<double>()) << st.dump();
  // The embedded PostgreSQL was stopped at the end.
  EXPECT_FALSE(fs::exists(dir / "state" / "pg" / "data" / "postmaster.pid"));

  // Retention on the same embedded database: a dry run names the sweep and keeps it, the prune
  // drops it, and bad flags are named.
  const std::string id = std::to_string(s["sweep_id"].get<int64_t>());
  auto prune = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {kBin + "/touchstone", "db", "prune", "--state-dir",
                                     (dir / "state").string()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::RunProcess(argv, "", 120);
  };
  auto dry = prune({"--keep", "0", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << testing::Describe(dry) << dry.err;
  EXPECT_NE(dry.out.find("would prune sweep " + id + " "), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("24 models recorded"), std::string::npos) << dry.out;
  auto done = prune({"--sweep", id});
  ASSERT_EQ(done.exit_code, 0) << testing::Describe(done) << done.err;
  EXPECT_NE(done.out.find("pruned sweep " + id + " "), std::string::npos) << done.out;
  auto again = prune({"--sweep", id});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("sweep " + id + " was already pruned"), std::string::npos) << again.out;
  auto bad = prune({"--older-than", "soon"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--older-than:"), std::string::npos) << bad.err;
  auto missing = prune({"--sweep", "999"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("sweep_ids[0]: no sweep 999"), std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(dir / "state" / "pg" / "data" / "postmaster.pid"));
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace ts
