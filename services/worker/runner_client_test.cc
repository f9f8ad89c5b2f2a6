// RunnerClient against real child processes: small shell scripts that speak the runner
// protocol's control lines and then die, hang or refuse, as a broken model's runner would.
#include "services/worker/runner_client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

namespace ts::worker {
namespace {

namespace pb = ::touchstone::v1;

class RunnerClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ts_runner_client_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A fake touchstone-runner: says ready, then runs `per_job` (sh) for each job line.
  std::string Script(const std::string& per_job) {
    const std::string path = dir_ + "/runner.sh";
    std::ofstream(path) << "#!/bin/sh\necho ready\nwhile read -r line; do\n" << per_job
                        << "\ndone\n";
    ::chmod(path.c_str(), 0755);
    return path;
  }

  absl::StatusOr<pb::ModelResult> Run(const std::string& runner, double timeout_s = 30,
                                      bool audit_ops = false) {
    RunnerClient client({runner, dir_ + "/runner.log"});
    JobSpec job;
    job.job_id = 1;
    job.model_id = "org/llama-ft";
    job.arch = "LlamaForCausalLM";
    job.modes = {"eager", "compile", "train"};
    job.timeout_s = timeout_s;
    job.audit_ops = audit_ops;
    auto r = client.RunJob(dir_ + "/profile.json", job);
    restarts_ = client.restarts();
    return r;
  }

  std::string dir_;
  int restarts_ = 0;
};

TEST_F(RunnerClientTest, ADeathInAModeCostsThatModeThenEveryModeLeftDiesInReference) {
  // Each child announces build and reference; a job that includes eager dies there with
  // SIGSEGV, the next (without eager) dies in reference with SIGABRT.
  const std::string runner = Script(
      "echo 'stage build'; echo 'model {\"arch\":\"LlamaForCausalLM\",\"family\":\"llama\"}'\n"
      "case \"$line\" in *eager*) echo 'stage eager'; kill -SEGV $$;; esac\n"
      "echo 'stage reference'; kill -ABRT $$");
  auto r = Run(runner);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(restarts_, 2);
  EXPECT_EQ(r->family(), "llama");
  ASSERT_EQ(r->modes_size(), 3);
  EXPECT_EQ(r->modes(0).mode(), pb::MODE_EAGER);
  EXPECT_EQ(r->modes(0).status(), pb::VERDICT_CRASH);
  EXPECT_EQ(r->modes(0).error(), "runner died with SIGSEGV in stage eager");
  for (int i : {1, 2}) {
    EXPECT_EQ(r->modes(i).status(), pb::VERDICT_CRASH);
    EXPECT_EQ(r->modes(i).error(), "runner died with SIGABRT in stage reference");
    EXPECT_TRUE(std::isnan(r->modes(i).rmse_ratio()));
  }
}

TEST_F(RunnerClientTest, AHungChildIsKilledAtItsDeadline) {
  const std::string runner = Script("echo 'stage build'; echo 'stage compile'; exec sleep 60");
  auto r = Run(runner, /*timeout_s=*/0.5);
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& v : r->modes()) {
    EXPECT_EQ(v.status(), pb::VERDICT_TIMEOUT);
    EXPECT_NE(v.error().find("no result after 0.5 s (in stage compile)"), std::string::npos);
  }
}

TEST_F(RunnerClientTest, AChildErrorIsLoadFailAndABadRunnerIsUnavailable) {
  auto r = Run(Script("echo 'error job line is not a JSON object with a config'"));
  ASSERT_TRUE(r.ok()) << r.status();
  for (const auto& v : r->modes()) {
    EXPECT_EQ(v.status(), pb::VERDICT_LOAD_FAIL);
    EXPECT_EQ(v.error(), "runner: job line is not a JSON object with a config");
  }
  auto missing = Run(dir_ + "/no-such-runner");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(RunnerClientTest, TheJobLineCarriesTheModelIdAndTheSweepsAuditOps) {
  // The child keeps each job line it reads, then refuses the job.
  const std::string lines = dir_ + "/lines.jsonl";
  const std::string runner =
      Script("printf '%s\\n' \"$line\" >> " + lines + "; echo 'error kept the line'");
  for (bool audit : {true, false}) {
    auto r = Run(runner, 30, audit);
    ASSERT_TRUE(r.ok()) << r.status();
  }
  std::ifstream in(lines);
  std::vector<nlohmann::json> got;
  for (std::string line; std::getline(in, line);) {
    got.push_back(nlohmann::json::parse(line, nullptr, false));
  }
  ASSERT_EQ(got.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    ASSERT_TRUE(got[i].is_object()) << i;
    EXPECT_EQ(got[i].value("job_id", 0), 1);
    EXPECT_EQ(got[i].value("model_id", ""), "org/llama-ft") << "it seeds the model's weights";
    ASSERT_TRUE(got[i].contains("audit_ops"));
    ASSERT_TRUE(got[i]["audit_ops"].is_boolean());
    EXPECT_EQ(got[i]["audit_ops"].get<bool>(), i == 0);
  }
}

}  // namespace
}  // namespace ts::worker
