// The operational side with real processes (issue 13): `touchstone submit` against a running
// scheduler, and two schedulers on one database serving one fleet with one killed mid-sweep.
#include "tests/sweep_fixture.h"

namespace ts {
namespace {

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
    workers = n.exec_params(
                   "SELECT count(DISTINCT worker_id) FROM shards WHERE sweep_id = $1 "
                   "AND worker_id IS NOT NULL",
                   sweep)[0][0]
                  .as<int>();
    if (workers < 2) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(workers, 2) << "the two schedulers did not both serve a worker";
  WaitFor(
      sweep, [](const auto& p) { return p.models_recorded() >= 6; }, 120);
  Kill9("scheduler2");
  auto p = WaitFor(
      sweep, [](const auto& q) { return q.state() == "done"; }, 300);
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
      models_[row["id"]] = row;  // what ExpectExactlyOnce counts
      ++n;
    }
    std::ofstream(dir_ / "profile.json") << profile_.dump();
    std::ofstream(dir_ / "pass.json") << R"({"min": {"eager": 0.0}, "forbid": ["crash"]})";
    std::ofstream(dir_ / "fail.json") << R"({"must_pass": ["org/never-in-this-sweep"]})";
  }
  const std::string sched = "127.0.0.1:" + std::to_string(grpc_port_);
  auto submit = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = {kBin + "/touchstone",
                                     "submit",
                                     "--scheduler",
                                     sched,
                                     "--token-file",
                                     (dir_ / "token").string(),
                                     "--profile",
                                     (dir_ / "profile.json").string(),
                                     "--catalog",
                                     (dir_ / "catalog.jsonl").string(),
                                     "--sample",
                                     "6",
                                     "--modes",
                                     "eager",
                                     "--no-audit-ops"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::RunProcess(argv, "", 300);
  };
  // The first of its profile: --baseline latest finds none, says so and runs without one.
  auto first = submit({"--baseline", "latest", "--wait", "--gate", (dir_ / "pass.json").string()});
  ASSERT_EQ(first.exit_code, 0) << testing::Describe(first) << first.out << first.err;
  EXPECT_NE(first.out.find("6/6 models recorded, 0 duplicates"), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("text-"), std::string::npos) << "no per-task table:\n" << first.out;
  EXPECT_NE(first.err.find("no done sweep of profile"), std::string::npos) << first.err;
  const size_t at = first.err.find("touchstone submit: sweep ");
  ASSERT_NE(at, std::string::npos) << first.err;
  const int64_t sweep1 = std::stoll(first.err.substr(at + 25));
  ExpectExactlyOnce(sweep1, 1);  // --modes eager

  // The next one is compared with the first and fails its gate: exit 1.
  auto second = submit({"--baseline", "latest", "--gate", (dir_ / "fail.json").string()});
  EXPECT_EQ(second.exit_code, 1) << testing::Describe(second) << second.out << second.err;
  EXPECT_NE(second.err.find("baseline " + std::to_string(sweep1)), std::string::npos) << second.err;
  EXPECT_NE(second.out.find("new failures vs sweep " + std::to_string(sweep1)), std::string::npos)
      << second.out;
  EXPECT_NE(second.out.find("org/never-in-this-sweep"), std::string::npos) << second.out;

  // Without --wait: the sweep id, at once.
  auto quick = submit({});
  ASSERT_EQ(quick.exit_code, 0) << testing::Describe(quick) << quick.err;
  const int64_t sweep3 = std::stoll(quick.out);
  EXPECT_GT(sweep3, sweep1);
  WaitFor(
      sweep3, [](const auto& q) { return q.state() == "done"; }, 240);

  // Bad input: exit 2, naming the flag.
  auto bad = submit({"--baseline", "yesterday"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--baseline"), std::string::npos) << bad.err;
}

}  // namespace
}  // namespace ts
