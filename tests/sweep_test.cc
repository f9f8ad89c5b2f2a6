// Distributed sweeps with real processes: touchstone-scheduler and touchstone-worker binaries,
// a throwaway PostgreSQL, gRPC over loopback. Each test kills something mid-sweep and checks
// that every model is still recorded exactly once.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <pqxx/pqxx>

#include "services/common/http_server.h"
#include "services/common/process.h"
#include "tests/fixtures/postgres_fixture.h"
#include "tests/fixtures/subprocess.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

const std::string kBin = TS_BIN_DIR;
const std::string kToken = "sweep-test-token";

using ::ts::testing::ReadText;

// One catalog for the whole binary (3,000 generated rows), read without torch.
const std::vector<json>& Catalog() {
  static const std::vector<json> rows = [] {
    const std::string path = "/tmp/ts-sweep-test-catalog-" + std::to_string(::getpid()) + ".jsonl";
    auto r = testing::RunProcess({kBin + "/touchstone", "catalog", "generate", "--count", "3000",
                                  "--out", path},
                                 "", 300);
    EXPECT_EQ(r.exit_code, 0) << testing::Describe(r) << r.err;
    std::vector<json> out;
    std::ifstream in(path);
    std::string line;
    while (std::getline(in, line)) out.push_back(json::parse(line));
    fs::remove(path);
    return out;
  }();
  return rows;
}

class SweepTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto* cluster = testing::PostgresCluster::Get();
    ASSERT_NE(cluster, nullptr);
    db_ = cluster->NewDatabase(::testing::UnitTest::GetInstance()->current_test_info()->name());
    char tmpl[] = "/tmp/ts-sweep-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    std::ofstream(dir_ / "token") << kToken << "\n";  // a bare token: admin (auth.h)
    fs::permissions(dir_ / "token", fs::perms::owner_read | fs::perms::owner_write);
    profile_ = json::parse(ReadText(fs::path(TS_PROFILES_DIR) / "sim-2.0.json"));
    profile_.erase("defects");
  }
  void TearDown() override {
    for (auto& [name, pid] : procs_) {
      if (pid > 0) common::Stop(pid, 5);
    }
    if (::testing::Test::HasFailure()) {
      for (const auto& e : fs::directory_iterator(dir_)) {
        if (e.path().extension() == ".log") {
          std::string t = ReadText(e.path());
          if (t.size() > 3000) t = t.substr(t.size() - 3000);
          std::fprintf(stderr, "---- %s\n%s\n", e.path().filename().c_str(), t.c_str());
        }
      }
    }
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  common::SpawnOptions Log(const std::string& name) {
    common::SpawnOptions o;
    o.log_path = (dir_ / name).string();
    return o;
  }

  void StartScheduler(int port = 0) {
    fs::remove(dir_ / "ports");
    auto pid = common::Spawn(
        {kBin + "/touchstone-scheduler", "--db", db_, "--listen",
         "127.0.0.1:" + std::to_string(port), "--http-port", "0", "--token-file",
         (dir_ / "token").string(), "--port-file", (dir_ / "ports").string(), "--lease-ttl", "2"},
        Log("scheduler.log"));
    ASSERT_TRUE(pid.ok()) << pid.status();
    procs_["scheduler"] = *pid;
    for (int i = 0; i < 600 && !fs::exists(dir_ / "ports"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(fs::exists(dir_ / "ports")) << ReadText(dir_ / "scheduler.log");
    json ports = json::parse(ReadText(dir_ / "ports"));
    grpc_port_ = ports["grpc_port"];
    http_port_ = ports["http_port"];
    stub_ = pb::Scheduler::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(grpc_port_), grpc::InsecureChannelCredentials()));
  }

  // A second scheduler process on the same database (issue 13); returns its gRPC port. The
  // fixture's stub stays on the first.
  int StartAnotherScheduler(const std::string& name) {
    const fs::path ports = dir_ / (name + ".ports");
    auto pid = common::Spawn(
        {kBin + "/touchstone-scheduler", "--db", db_, "--listen", "127.0.0.1:0", "--http-port",
         "0", "--token-file", (dir_ / "token").string(), "--port-file", ports.string(),
         "--lease-ttl", "2"},
        Log(name + ".log"));
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) return 0;
    procs_[name] = *pid;
    for (int i = 0; i < 600 && !fs::exists(ports); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    EXPECT_TRUE(fs::exists(ports)) << ReadText(dir_ / (name + ".log"));
    return fs::exists(ports) ? json::parse(ReadText(ports))["grpc_port"].get<int>() : 0;
  }

  // port 0: the fixture's scheduler.
  void StartWorker(const std::string& name, int port = 0) {
    auto pid = common::Spawn(
        {kBin + "/touchstone-worker", "--scheduler",
         "127.0.0.1:" + std::to_string(port ? port : grpc_port_),
         "--token-file", (dir_ / "token").string(), "--name", name, "--state-dir",
         (dir_ / name).string(), "--http-port", "-1", "--report-batch", "2"},
        Log(name + ".log"));
    ASSERT_TRUE(pid.ok()) << pid.status();
    procs_[name] = *pid;
  }

  void Kill9(const std::string& name) {
    ::kill(procs_[name], SIGKILL);
    common::WaitFor(procs_[name], 10);
    procs_[name] = -1;
  }

  template <typename Req, typename Resp>
  grpc::Status Call(grpc::Status (pb::Scheduler::Stub::*m)(grpc::ClientContext*, const Req&, Resp*),
                    const Req& req, Resp* resp) {
    for (int i = 0;; ++i) {
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", "Bearer " + kToken);
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
      grpc::Status st = (stub_.get()->*m)(&ctx, req, resp);
      if (st.ok() || st.error_code() != grpc::StatusCode::UNAVAILABLE || i > 100) return st;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  // Loads the catalog rows matching `pick` (up to n) and creates a sweep over them.
  int64_t CreateSweep(int n, const std::function<bool(const json&)>& pick, const json& defects,
                      double model_timeout_s = 120, int shard_max = 4) {
    pb::UpsertModelsRequest up;
    pb::CreateSweepRequest req;
    for (const auto& row : Catalog()) {
      if (up.models_size() >= n) break;
      if (!pick(row)) continue;
      auto* m = up.add_models();
      m->set_id(row["id"]);
      m->set_task(row["task"]);
      m->set_arch(row["arch"]);
      m->set_family(row["family"]);
      m->set_config_json(row["config"].dump());
      req.mutable_filter()->add_model_ids(row["id"]);
      models_[row["id"]] = row;
    }
    pb::UpsertModelsResponse ur;
    auto st = Call(&pb::Scheduler::Stub::UpsertModels, up, &ur);
    EXPECT_TRUE(st.ok()) << st.error_message();
    json p = profile_;
    if (!defects.empty()) p["defects"] = defects;
    req.mutable_profile()->set_name("sim-test");
    req.mutable_profile()->set_body(p.dump());
    req.set_shard_max_models(shard_max);
    req.set_model_timeout_s(model_timeout_s);
    pb::CreateSweepResponse resp;
    st = Call(&pb::Scheduler::Stub::CreateSweep, req, &resp);
    EXPECT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.models(), up.models_size());
    return resp.sweep_id();
  }

  pb::SweepProgress Progress(int64_t sweep) {
    pb::GetSweepRequest g;
    g.set_sweep_id(sweep);
    pb::SweepProgress p;
    Call(&pb::Scheduler::Stub::GetSweep, g, &p);
    return p;
  }

  // Polls until `done(progress)` or the timeout; returns the last progress.
  pb::SweepProgress WaitFor(int64_t sweep, const std::function<bool(const pb::SweepProgress&)>& done,
                            double timeout_s) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(timeout_s);
    pb::SweepProgress p;
    while (Clock::now() < deadline) {
      p = Progress(sweep);
      if (done(p)) return p;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "timed out; progress " << p.ShortDebugString();
    return p;
  }

  // Every model has exactly one primary row per mode, and one model_runs row.
  void ExpectExactlyOnce(int64_t sweep) {
    pqxx::connection c(db_);
    pqxx::nontransaction n(c);
    auto per_mode = n.exec_params(R"(
      SELECT count(*), count(DISTINCT (model_id, mode)), count(DISTINCT model_id)
      FROM results WHERE sweep_id = $1 AND run = 1)",
                                  sweep);
    EXPECT_EQ(per_mode[0][0].as<int64_t>(), per_mode[0][1].as<int64_t>()) << "duplicate results";
    EXPECT_EQ(per_mode[0][2].as<int64_t>(), static_cast<int64_t>(models_.size()));
    EXPECT_EQ(per_mode[0][0].as<int64_t>(), static_cast<int64_t>(3 * models_.size()));
    auto runs = n.exec_params(
        "SELECT count(*), count(DISTINCT model_id) FROM model_runs WHERE sweep_id = $1 AND run = 1",
        sweep);
    EXPECT_EQ(runs[0][0].as<int64_t>(), static_cast<int64_t>(models_.size()));
    EXPECT_EQ(runs[0][1].as<int64_t>(), static_cast<int64_t>(models_.size()));
    auto p = Progress(sweep);
    EXPECT_EQ(p.state(), "done");
    EXPECT_EQ(p.duplicates(), 0);
    EXPECT_EQ(p.models_recorded(), static_cast<int64_t>(models_.size()));
  }

  // Mode -> status for every model of the sweep, from the database.
  std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> Verdicts(
      int64_t sweep) {
    pqxx::connection c(db_);
    pqxx::nontransaction n(c);
    std::map<std::string, std::map<std::string, std::pair<std::string, std::string>>> out;
    for (const auto& row : n.exec_params(
             "SELECT model_id, mode, status, error FROM results WHERE sweep_id = $1 AND run = 1",
             sweep)) {
      out[row[0].c_str()][row[1].c_str()] = {row[2].c_str(), row[3].c_str()};
    }
    return out;
  }

  static bool Cheap(const json& row) {
    // Decoder and encoder text models: fast enough for several per second on one core.
    static const std::set<std::string> kFamilies = {"llama", "bert", "qwen2", "mistral",
                                                    "distilbert", "gpt2", "roberta"};
    return kFamilies.count(row.value("family", "")) > 0;
  }

  std::string db_;
  fs::path dir_;
  json profile_;
  std::map<std::string, pid_t> procs_;
  std::map<std::string, json> models_;
  int grpc_port_ = 0, http_port_ = 0;
  std::unique_ptr<pb::Scheduler::Stub> stub_;
};

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
  // that splits a shard and records its models `crash` (StoreOptions::max_lost_leases).
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

// Issue 13: two scheduler processes on one PostgreSQL serve one fleet (a worker on each); the
// second is killed with SIGKILL mid-sweep. Its worker's lease expires and the shard goes to
// the worker of the first: every model once, nothing lost.
TEST_F(SweepTest, TwoSchedulersOneDatabaseOneKilledLosesNothing) {
  StartScheduler();
  const int port2 = StartAnotherScheduler("scheduler2");
  ASSERT_GT(port2, 0);
  const int64_t sweep = CreateSweep(32, Cheap, json::array());
  StartWorker("w1");
  StartWorker("w2", port2);
  // Both schedulers hand out leases: each worker has taken a shard.
  pqxx::connection c(db_);
  pqxx::nontransaction n(c);
  const auto deadline = Clock::now() + std::chrono::seconds(120);
  int workers = 0;
  while (workers < 2 && Clock::now() < deadline) {
    workers = n.exec_params("SELECT count(DISTINCT worker_id) FROM shards WHERE sweep_id = $1 "
                            "AND worker_id IS NOT NULL",
                            sweep)[0][0]
                  .as<int>();
    if (workers < 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(workers, 2) << "the two schedulers did not both serve a worker";
  WaitFor(sweep, [](const auto& p) { return p.models_recorded() >= 6; }, 120);
  Kill9("scheduler2");
  auto p = WaitFor(sweep, [](const auto& q) { return q.state() == "done"; }, 300);
  EXPECT_EQ(p.models_expected(), 32);
  EXPECT_EQ(p.models_recorded(), p.models_expected());
  EXPECT_EQ(p.duplicates(), 0);
  ExpectExactlyOnce(sweep);
}

// Issue 13: `touchstone submit` against a running scheduler, as a CI job calls it: --wait prints
// the table and the counts, --gate exits by the gate's verdict, --baseline latest takes the
// newest done sweep of the same profile, and without --wait the sweep id is printed at once.
TEST_F(SweepTest, SubmitToARunningFleetWaitsPrintsTheTableAndExitsByTheGate) {
  StartScheduler();
  StartWorker("w1");
  {
    std::ofstream cat(dir_ / "catalog.jsonl");
    int n = 0;
    for (const auto& row : Catalog()) {
      if (n == 6) break;
      if (!Cheap(row)) continue;
      cat << row.dump() << "\n";
      ++n;
    }
    std::ofstream(dir_ / "profile.json") << profile_.dump();
    std::ofstream(dir_ / "pass.json") << R"({"min": {"eager": 0.0}, "forbid": ["crash"]})";
    std::ofstream(dir_ / "fail.json") << R"({"must_pass": ["org/never-in-this-sweep"]})";
  }
  const std::string sched = "127.0.0.1:" + std::to_string(grpc_port_);
  auto submit = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {kBin + "/touchstone", "submit", "--scheduler", sched,
                                     "--token-file", (dir_ / "token").string(), "--profile",
                                     (dir_ / "profile.json").string(), "--catalog",
                                     (dir_ / "catalog.jsonl").string(), "--sample", "6",
                                     "--modes", "eager", "--no-audit-ops"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::RunProcess(argv, "", 300);
  };
  auto first = submit({"--wait", "--gate", (dir_ / "pass.json").string()});
  ASSERT_EQ(first.exit_code, 0) << testing::Describe(first) << first.out << first.err;
  EXPECT_NE(first.out.find("6/6 models recorded, 0 duplicates"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("text-"), std::string::npos) << "no per-task table:\n" << first.out;
  EXPECT_NE(first.err.find("no done sweep of profile"), std::string::npos) << first.err;
  const size_t at = first.err.find("touchstone submit: sweep ");
  ASSERT_NE(at, std::string::npos) << first.err;
  const int64_t sweep1 = std::stoll(first.err.substr(at + 25));
  ExpectExactlyOnce(sweep1);

  // The next one is compared with the first and fails its gate: exit 1.
  auto second = submit({"--baseline", "latest", "--gate", (dir_ / "fail.json").string()});
  EXPECT_EQ(second.exit_code, 1) << testing::Describe(second) << second.out << second.err;
  EXPECT_NE(second.err.find("baseline " + std::to_string(sweep1)), std::string::npos)
      << second.err;
  EXPECT_NE(second.out.find("new failures vs sweep " + std::to_string(sweep1)),
            std::string::npos)
      << second.out;
  EXPECT_NE(second.out.find("org/never-in-this-sweep"), std::string::npos) << second.out;

  // Without --wait: the sweep id, at once.
  auto quick = submit({});
  ASSERT_EQ(quick.exit_code, 0) << testing::Describe(quick) << quick.err;
  const int64_t sweep3 = std::stoll(quick.out);
  EXPECT_GT(sweep3, sweep1);
  WaitFor(sweep3, [](const auto& q) { return q.state() == "done"; }, 240);

  // Bad input: exit 2, naming the flag.
  auto bad = submit({"--baseline", "yesterday"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--baseline"), std::string::npos) << bad.err;
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
