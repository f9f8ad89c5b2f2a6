// What the process-level sweep tests share (sweep_test.cc, fleet_test.cc): a throwaway
// database per test, scheduler and worker processes from TS_BIN_DIR, a catalog generated once
// per binary, and the checks that every model was recorded exactly once.
#pragma once

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
#include "services/common/tls.h"
#include "tests/fixtures/postgres_fixture.h"
#include "tests/fixtures/subprocess.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

inline const std::string kBin = TS_BIN_DIR;
inline const std::string kToken = "sweep-test-token";

using ::ts::testing::ReadText;

// One catalog for the whole binary (3,000 generated rows), read without torch.
inline const std::vector<json>& Catalog() {
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

  // The schedulers' --lease-ttl: short, so that a lost lease comes back within a test.
  std::string lease_ttl_ = "2";
  // More flags for StartScheduler and StartWorker (a later flag overrides an earlier one), and
  // the CA the fixture's stub trusts ("" plaintext): the TLS test sets them.
  std::vector<std::string> scheduler_args_, worker_args_;
  std::string tls_ca_;

  void StartScheduler(int port = 0) {
    fs::remove(dir_ / "ports");
    std::vector<std::string> argv = {
        kBin + "/touchstone-scheduler", "--db", db_, "--listen",
        "127.0.0.1:" + std::to_string(port), "--http-port", "0", "--token-file",
        (dir_ / "token").string(), "--port-file", (dir_ / "ports").string(), "--lease-ttl",
        lease_ttl_};
    argv.insert(argv.end(), scheduler_args_.begin(), scheduler_args_.end());
    auto pid = common::Spawn(argv, Log("scheduler.log"));
    ASSERT_TRUE(pid.ok()) << pid.status();
    procs_["scheduler"] = *pid;
    for (int i = 0; i < 600 && !fs::exists(dir_ / "ports"); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ASSERT_TRUE(fs::exists(dir_ / "ports")) << ReadText(dir_ / "scheduler.log");
    json ports = json::parse(ReadText(dir_ / "ports"));
    grpc_port_ = ports["grpc_port"];
    http_port_ = ports["http_port"];
    auto channel = common::MakeChannel("127.0.0.1:" + std::to_string(grpc_port_), tls_ca_);
    ASSERT_TRUE(channel.ok()) << channel.status();
    stub_ = pb::Scheduler::NewStub(*channel);
  }

  // A second scheduler process on the same database (issue 13); returns its gRPC port. The
  // fixture's stub stays on the first.
  int StartAnotherScheduler(const std::string& name) {
    const fs::path ports = dir_ / (name + ".ports");
    auto pid = common::Spawn(
        {kBin + "/touchstone-scheduler", "--db", db_, "--listen", "127.0.0.1:0", "--http-port",
         "0", "--token-file", (dir_ / "token").string(), "--port-file", ports.string(),
         "--lease-ttl", lease_ttl_},
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
    std::vector<std::string> argv = {
        kBin + "/touchstone-worker", "--scheduler",
        "127.0.0.1:" + std::to_string(port ? port : grpc_port_),
        "--token-file", (dir_ / "token").string(), "--name", name, "--state-dir",
        (dir_ / name).string(), "--http-port", "-1", "--report-batch", "2"};
    argv.insert(argv.end(), worker_args_.begin(), worker_args_.end());
    auto pid = common::Spawn(argv, Log(name + ".log"));
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

  // Every model has exactly one primary row per mode (`modes` of them), and one model_runs row.
  void ExpectExactlyOnce(int64_t sweep, int modes = 3) {
    pqxx::connection c(db_);
    pqxx::nontransaction n(c);
    auto per_mode = n.exec_params(R"(
      SELECT count(*), count(DISTINCT (model_id, mode)), count(DISTINCT model_id)
      FROM results WHERE sweep_id = $1 AND run = 1)",
                                  sweep);
    EXPECT_EQ(per_mode[0][0].as<int64_t>(), per_mode[0][1].as<int64_t>()) << "duplicate results";
    EXPECT_EQ(per_mode[0][2].as<int64_t>(), static_cast<int64_t>(models_.size()));
    EXPECT_EQ(per_mode[0][0].as<int64_t>(), static_cast<int64_t>(modes * models_.size()));
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

}  // namespace ts
