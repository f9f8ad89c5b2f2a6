// TLS end to end (issue 34): a touchstone-scheduler serving TLS (--tls-cert/--tls-key, a
// throwaway CA made by the openssl CLI, tests/fixtures/test_pki.h) and every client's --tls-ca
// path against it. A touchstone-worker trusting the CA runs the sweep's models (one trusting
// another CA never registers); `touchstone submit --tls-ca` creates the sweep and waits for it,
// `touchstone sweeps --tls-ca` lists it; the Python client (ca_file) reads its summary. Without
// the CA, or trusting another one, the CLI and the Python client are refused.
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "tests/fixtures/test_pki.h"
#include "tests/sweep_fixture.h"

namespace ts {
namespace {

constexpr int kModels = 4;

TEST_F(SweepTest, TlsEndToEndForTheWorkerTheCliAndThePythonClient) {
  auto pki = testing::MakePki(dir_.string());
  ASSERT_TRUE(pki.ok()) << pki.status();
  scheduler_args_ = {"--tls-cert", pki->cert, "--tls-key", pki->key};
  tls_ca_ = pki->ca;
  StartScheduler();
  const std::string target = "127.0.0.1:" + std::to_string(grpc_port_);
  worker_args_ = {"--tls-ca", pki->other_ca};
  StartWorker("wrong-ca");
  worker_args_ = {"--tls-ca", pki->ca};
  StartWorker("w1");

  // A few cheap models as a catalog file, and the defect-free profile.
  {
    std::ofstream catalog(dir_ / "catalog.jsonl");
    int n = 0;
    for (const auto& row : Catalog()) {
      if (!Cheap(row) || n == kModels) continue;
      catalog << row.dump() << "\n";
      ++n;
    }
    std::ofstream(dir_ / "profile.json") << profile_.dump();
  }
  const std::string token = (dir_ / "token").string();
  const auto cli = [&](std::vector<std::string> args, double timeout_s = 120) {
    args.insert(args.begin(), kBin + "/touchstone");
    args.insert(args.end(), {"--scheduler", target, "--token-file", token});
    return testing::RunProcess(args, "", timeout_s);
  };
  auto submit = cli({"submit", "--profile", (dir_ / "profile.json").string(), "--catalog",
                     (dir_ / "catalog.jsonl").string(), "--sample", std::to_string(kModels),
                     "--modes", "eager", "--no-audit-ops", "--name", "tls", "--wait", "--tls-ca",
                     pki->ca},
                    600);
  ASSERT_EQ(submit.exit_code, 0) << testing::Describe(submit) << submit.out << submit.err;
  const std::string summary = std::to_string(kModels) + "/" + std::to_string(kModels) +
                              " models recorded, 0 duplicates";
  EXPECT_NE(submit.out.find(summary), std::string::npos) << submit.out;

  // The models were run by the worker that trusts the CA; the other never got in.
  {
    pqxx::connection c(db_);
    pqxx::nontransaction n(c);
    std::set<std::string> workers, ran;
    for (const auto& r : n.exec("SELECT name FROM workers")) workers.insert(r[0].c_str());
    for (const auto& r : n.exec("SELECT DISTINCT w.name FROM results JOIN workers w USING (worker_id)")) {
      ran.insert(r[0].c_str());
    }
    EXPECT_EQ(workers, std::set<std::string>{"w1"});
    EXPECT_EQ(ran, std::set<std::string>{"w1"});
  }

  // The CLI's read path: with the CA it lists the sweep; plaintext or another CA is refused.
  auto sweeps = cli({"sweeps", "--format", "json", "--tls-ca", pki->ca});
  ASSERT_EQ(sweeps.exit_code, 0) << testing::Describe(sweeps) << sweeps.err;
  const json listed = json::parse(sweeps.out);
  ASSERT_EQ(listed["sweeps"].size(), 1u) << sweeps.out;
  const std::string sweep_id = listed["sweeps"][0]["sweepId"].get<std::string>();
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{}, std::vector<std::string>{"--tls-ca", pki->other_ca}}) {
    std::vector<std::string> args = {"sweeps"};
    args.insert(args.end(), bad.begin(), bad.end());
    auto r = cli(args, 60);
    EXPECT_NE(r.exit_code, 0) << (bad.empty() ? "plaintext" : "another CA") << ": " << r.out;
    EXPECT_NE(r.err.find("UNAVAILABLE"), std::string::npos) << r.err;
  }

  // The Python client: ca_file reads the sweep; none, or another CA, is refused.
  auto py = testing::RunProcess(
      {"/usr/bin/env", "PYTHONPATH=" + std::string(TS_PYTHON_CLIENT_DIR), TS_PYTHON3,
       std::string(TS_SOURCE_DIR) + "/tests/python_client_tls.py", "--scheduler", target,
       "--token-file", token, "--ca", pki->ca, "--other-ca", pki->other_ca, "--sweep", sweep_id,
       "--models", std::to_string(kModels)},
      "", 120);
  EXPECT_EQ(py.exit_code, 0) << testing::Describe(py) << py.out << py.err;
}

}  // namespace
}  // namespace ts
