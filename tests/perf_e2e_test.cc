// Performance regressions end to end (issue 30): real sweeps on one embedded database, then
// detection and `touchstone alerts` against `touchstone serve`. A defect-free device against
// itself opens no alert; the same device with one slow kernel (a `slow` defect on layer norm,
// written here; only the simulated device reads it) opens performance alerts naming that op and
// covering exactly the models that run it, which the test derives from ListResults' top_ops
// alone, and no accuracy alert.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "services/common/auth.h"
#include "services/common/process.h"
#include "tests/fixtures/subprocess.h"
#include "tests/result_recount.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using json = nlohmann::json;
using ::ts::testing::ReadText;

const std::string kBin = TS_BIN_DIR;
constexpr int kSample = 30;
const std::string kOp = "aten::native_layer_norm";

testing::ProcessResult RunTs(std::vector<std::string> argv, double timeout_s = 900) {
  argv.insert(argv.begin(), kBin + "/touchstone");
  return testing::RunProcess(argv, "", timeout_s);
}

// The modes of each model that list `op` among the ops taking its time.
std::map<std::string, std::set<std::string>> ModesRunning(
    const std::map<std::string, pb::ResultRow>& rows, const std::string& op) {
  std::map<std::string, std::set<std::string>> out;
  for (const auto& [id, row] : rows) {
    for (const auto& [mode, perf] : row.perf()) {
      for (const auto& t : perf.top_ops()) {
        if (t.op() == op) out[id].insert(mode);
      }
    }
  }
  return out;
}

TEST(PerfE2eTest, SlowKernelOpensPerformanceAlertsOnExactlyTheModelsThatRunIt) {
  char tmpl[] = "/tmp/ts-perf-e2e-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  json clean = json::parse(ReadText(fs::path(TS_PROFILES_DIR) / "sim-2.0.json"));
  clean["defects"] = json::array();
  clean["name"] = "prf-1.0";
  std::ofstream(dir / "clean.json") << clean.dump();
  // Layer norm 20x slower: every model that runs it natively grows well beyond 2%.
  json slow = clean;
  slow["name"] = "prf-1.1";
  slow["defects"] =
      json::array({json{{"id", "S1"}, {"op", kOp}, {"effect", {{"kind", "slow"}, {"value", 20}}}}});
  std::ofstream(dir / "slow.json") << slow.dump();

  std::vector<int64_t> sweeps;
  for (const char* profile : {"clean.json", "clean.json", "slow.json"}) {
    std::vector<std::string> argv = {"sweep",
                                     "--sample",
                                     std::to_string(kSample),
                                     "--workers",
                                     "2",
                                     "--modes",
                                     "eager,compile,train",
                                     "--no-audit-ops",
                                     "--profile",
                                     (dir / profile).string(),
                                     "--state-dir",
                                     (dir / "state").string(),
                                     "--json",
                                     (dir / "sweep.json").string()};
    if (!sweeps.empty()) {
      argv.push_back("--baseline");
      argv.push_back(std::to_string(sweeps.front()));
    }
    auto r = RunTs(argv);
    ASSERT_EQ(r.exit_code, 0) << testing::Describe(r) << r.err;
    sweeps.push_back(json::parse(ReadText(dir / "sweep.json"))["sweep_id"].get<int64_t>());
  }

  common::SpawnOptions so;
  so.log_path = (dir / "serve.log").string();
  so.new_process_group = true;
  auto pid =
      common::Spawn({kBin + "/touchstone", "serve", "--state-dir", (dir / "state").string()}, so);
  ASSERT_TRUE(pid.ok()) << pid.status();
  auto serving = testing::WaitForServing((dir / "serve.log").string());
  ASSERT_TRUE(serving.has_value()) << ReadText(dir / "serve.log");
  const auto cli = [&](std::vector<std::string> args) {
    for (const std::string& f :
         {std::string("--scheduler"), serving->grpc, std::string("--token-file"), serving->tokens,
          std::string("--format"), std::string("json")}) {
      args.push_back(f);
    }
    return RunTs(args, 300);
  };
  auto token = common::ReadClientToken(serving->tokens, {common::Role::kReader});
  ASSERT_TRUE(token.ok()) << token.status();
  std::vector<std::map<std::string, pb::ResultRow>> listed;
  for (int64_t id : sweeps) {
    std::map<std::string, pb::ResultRow> rows;
    for (auto& row : testing::ListAllResults(
             grpc::CreateChannel(serving->grpc, grpc::InsecureChannelCredentials()), *token, id)) {
      rows[row.model_id()] = std::move(row);
    }
    ASSERT_EQ(rows.size(), static_cast<size_t>(kSample)) << "sweep " << id;
    listed.push_back(std::move(rows));
  }

  // The clean device against itself: identical figures, no alert of any kind. (Every model of
  // the defect-free profile passes, so every mode of every row has perf to compare.)
  for (const auto& [id, row] : listed[1]) {
    EXPECT_EQ(row.perf().size(), 3u) << id;
    for (const auto& [mode, perf] : row.perf()) {
      ASSERT_TRUE(listed[0].at(id).perf().count(mode)) << id << " " << mode;
      EXPECT_EQ(perf.device_us(), listed[0].at(id).perf().at(mode).device_us()) << id << mode;
    }
  }
  auto d = cli({"detect", std::to_string(sweeps[1])});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  EXPECT_TRUE(json::parse(d.out).value("opened", json::array()).empty()) << d.out;
  EXPECT_TRUE(json::parse(d.out).value("perfRegressions", json::array()).empty()) << d.out;
  // The alerts so far are the slow sweep's (it ran with the same baseline, before this check):
  // none was first seen on the clean pair.
  auto none = cli({"alerts"});
  ASSERT_EQ(none.exit_code, 0) << none.err;
  for (const json& a : json::parse(none.out).value("alerts", json::array())) {
    EXPECT_EQ(a.value("firstSweepId", ""), std::to_string(sweeps[2])) << a.dump();
  }

  // The slow kernel: the models and modes expected to regress are those whose figures list
  // layer norm among their top ops in the slow sweep, each grown beyond 2% over the baseline.
  const auto running = ModesRunning(listed[2], kOp);
  std::map<std::string, std::set<std::string>> expect;  // mode -> models
  for (const auto& [id, modes] : running) {
    for (const std::string& mode : modes) {
      const auto& base = listed[0].at(id).perf();
      ASSERT_TRUE(base.count(mode)) << id << " " << mode;
      const double grew = listed[2].at(id).perf().at(mode).device_us() / base.at(mode).device_us();
      if (grew > 1.02) expect[mode].insert(id);
    }
  }
  ASSERT_FALSE(expect["eager"].empty()) << "no model of the sample runs " << kOp;
  ASSERT_LT(expect["eager"].size(), listed[2].size()) << "every model runs " << kOp;
  d = cli({"detect", std::to_string(sweeps[2])});
  ASSERT_EQ(d.exit_code, 0) << d.out << d.err;
  auto alerts = cli({"alerts"});
  ASSERT_EQ(alerts.exit_code, 0) << alerts.err;
  std::map<std::string, std::set<std::string>> got;  // mode -> models
  for (const json& a : json::parse(alerts.out).value("alerts", json::array())) {
    EXPECT_EQ(a.value("kind", ""), "performance") << "no accuracy alert: " << a.dump();
    EXPECT_EQ(a.value("causeKind", ""), "perf_op") << a.dump();
    EXPECT_EQ(a.value("op", ""), kOp) << a.dump();
    const std::string mode = a.value("mode", "");
    for (const json& m : a.value("models", json::array())) {
      got[mode == "MODE_EAGER"     ? "eager"
          : mode == "MODE_COMPILE" ? "compile"
                                   : "train"]
          .insert(m.value("modelId", ""));
    }
  }
  for (const auto& [mode, models] : expect) {
    EXPECT_EQ(got[mode], models) << mode;
  }
  for (const auto& [mode, models] : got) EXPECT_TRUE(expect.count(mode)) << mode;

  // `touchstone summary SWEEP --perf` on the clean sweep: its Total line against a recount from
  // ListResults (the models whose compile passed with a speedup, and their geometric mean).
  int with_speedup = 0;
  double logs = 0;
  for (const auto& [id, row] : listed[0]) {
    auto it = row.perf().find("compile");
    if (it == row.perf().end() || !std::isfinite(it->second.speedup())) continue;
    ++with_speedup;
    logs += std::log(it->second.speedup());
  }
  ASSERT_GT(with_speedup, 0);
  auto text = RunTs({"summary", std::to_string(sweeps[0]), "--perf", "--scheduler", serving->grpc,
                     "--token-file", serving->tokens},
                    300);
  ASSERT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("Speedup"), std::string::npos) << text.out;
  char total[160];
  std::snprintf(total, sizeof total, "%-32s %7zu %9d %8.2fx", "Total", listed[0].size(),
                with_speedup, std::exp(logs / with_speedup));
  EXPECT_NE(text.out.find(total), std::string::npos) << "want '" << total << "' in\n" << text.out;

  ::kill(*pid, SIGTERM);
  auto end = common::WaitFor(*pid, 60);
  EXPECT_TRUE(end.exited && end.code == 0);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace ts
