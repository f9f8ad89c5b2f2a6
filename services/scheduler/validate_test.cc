#include "services/scheduler/validate.h"

#include <cmath>
#include <functional>

#include <gtest/gtest.h>

namespace ts::scheduler {
namespace {

pb::ReportResultsRequest GoodReport() {
  pb::ReportResultsRequest r;
  r.set_worker_id(1);
  r.set_shard_id(2);
  r.set_lease_token("t");
  auto* m = r.add_results();
  m->set_job_id(3);
  m->set_model_id("org/m");
  auto* v = m->add_modes();
  v->set_mode(touchstone::v1::MODE_EAGER);
  v->set_status(touchstone::v1::VERDICT_PASS);
  // An op audit's warning; 1e300 stands for a non-finite mismatch.
  v->set_audited(true);
  auto* s = v->add_suspects();
  s->set_op("aten::gelu");
  s->set_ratio(1e300);
  s->set_calls(2);
  s->set_total_calls(4);
  return r;
}

// The first suspect of the first result's first mode.
touchstone::v1::Suspect& FirstSuspect(pb::ReportResultsRequest& r) {
  return *r.mutable_results(0)->mutable_modes(0)->mutable_suspects(0);
}

pb::CreateSweepRequest GoodSweep() {
  pb::CreateSweepRequest r;
  r.mutable_profile()->set_name("sim-2.0");
  r.mutable_profile()->set_body("{}");
  return r;
}

TEST(ValidateTest, GoodRequestsPass) {
  EXPECT_TRUE(Validate(GoodReport()).ok());
  EXPECT_TRUE(Validate(GoodSweep()).ok());
}

TEST(ValidateTest, ReportErrorsNameTheField) {
  const std::pair<std::function<void(pb::ReportResultsRequest&)>, std::string> cases[] = {
      {[](auto& r) { r.set_worker_id(0); }, "worker_id:"},
      {[](auto& r) { r.set_shard_id(-4); }, "shard_id:"},
      {[](auto& r) { r.clear_lease_token(); }, "lease_token:"},
      {[](auto& r) { r.clear_results(); }, "results:"},
      {[](auto& r) { r.mutable_results(0)->set_job_id(0); }, "results[0].job_id:"},
      {[](auto& r) { r.mutable_results(0)->clear_model_id(); }, "results[0].model_id:"},
      {[](auto& r) { r.mutable_results(0)->clear_modes(); }, "results[0].modes:"},
      {[](auto& r) {
         r.mutable_results(0)->mutable_modes(0)->set_mode(static_cast<touchstone::v1::Mode>(7));
       },
       "results[0].modes[0].mode: unknown mode 7"},
      {[](auto& r) {
         r.mutable_results(0)->mutable_modes(0)->set_status(touchstone::v1::VERDICT_UNSPECIFIED);
       },
       "results[0].modes[0].status: unknown status 0"},
      {[](auto& r) {
         r.mutable_results(0)->mutable_modes(0)->set_status(touchstone::v1::VERDICT_LOST);
       },
       "results[0].modes[0].status: lost is the scheduler's"},
      {[](auto& r) { r.mutable_results(0)->set_opcov_ratio(1.5); }, "results[0].opcov_ratio:"},
      {[](auto& r) { r.mutable_results(0)->add_ops()->set_calls(1); }, "results[0].ops[0].op:"},
      {[](auto& r) { r.mutable_results(0)->set_tiny_config_json("[1"); },
       "results[0].tiny_config_json: not valid JSON"},
      {[](auto& r) { FirstSuspect(r).clear_op(); }, "results[0].modes[0].suspects[0].op: empty"},
      {[](auto& r) { FirstSuspect(r).set_calls(-1); },
       "results[0].modes[0].suspects[0].calls: must be >= 0"},
      {[](auto& r) { FirstSuspect(r).set_total_calls(-3); },
       "results[0].modes[0].suspects[0].total_calls: must be >= 0"},
      {[](auto& r) { FirstSuspect(r).set_ratio(std::nan("")); },
       "results[0].modes[0].suspects[0].ratio: must be finite"},
      {[](auto& r) { FirstSuspect(r).set_ratio(HUGE_VAL); },
       "results[0].modes[0].suspects[0].ratio: must be finite"},
      {[](auto& r) {
         *r.mutable_results(0)->mutable_modes(0)->add_suspects() = FirstSuspect(r);
         r.mutable_results(0)->mutable_modes(0)->mutable_suspects(1)->clear_op();
       },
       "results[0].modes[0].suspects[1].op: empty"},
      {[](auto& r) { r.mutable_results(0)->mutable_modes(0)->set_audited(false); },
       "results[0].modes[0].suspects: present, but the mode was not audited"},
  };
  for (const auto& [mutate, prefix] : cases) {
    auto r = GoodReport();
    mutate(r);
    absl::Status st = Validate(r);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << prefix;
    EXPECT_EQ(st.message().substr(0, prefix.size()), prefix) << st;
  }
}

// A passing mode's perf, valid: what the runner records (speedup NaN outside compile).
touchstone::v1::Perf& SetPerf(pb::ReportResultsRequest& r) {
  auto* p = r.mutable_results(0)->mutable_modes(0)->mutable_perf();
  p->set_device_us(120);
  p->set_flops(1e6);
  p->set_mfu(0.25);
  p->set_speedup(std::nan(""));
  p->set_compression(std::nan(""));
  auto* t = p->add_top_ops();
  t->set_op("aten::mm");
  t->set_us(60);
  return *p;
}

TEST(ValidateTest, PerfErrorsNameTheField) {
  auto good = GoodReport();
  SetPerf(good);
  EXPECT_TRUE(Validate(good).ok()) << Validate(good);
  const std::string at = "results[0].modes[0].perf";
  const std::pair<std::function<void(pb::ReportResultsRequest&)>, std::string> cases[] = {
      {[](auto& r) { SetPerf(r).set_device_us(0); }, at + ".device_us: must be finite and > 0"},
      {[](auto& r) { SetPerf(r).set_device_us(NAN); }, at + ".device_us: must be finite"},
      {[](auto& r) { SetPerf(r).set_mfu(1.5); }, at + ".mfu: must be in [0, 1]"},
      {[](auto& r) { SetPerf(r).set_bytes(-1); }, at + ".bytes: must be finite and >= 0"},
      {[](auto& r) { SetPerf(r).set_launches(-1); }, at + ".launches: must be >= 0"},
      {[](auto& r) { SetPerf(r).mutable_top_ops(0)->clear_op(); }, at + ".top_ops[0].op: empty"},
      {[](auto& r) { SetPerf(r).set_speedup(2); }, at + ".speedup: only compile has one"},
      {[](auto& r) {
         SetPerf(r);
         r.mutable_results(0)->mutable_modes(0)->set_status(touchstone::v1::VERDICT_OOM);
       },
       at + ": present, but the mode did not pass"},
      {[](auto& r) {
         SetPerf(r).set_speedup(-2);
         r.mutable_results(0)->mutable_modes(0)->set_mode(touchstone::v1::MODE_COMPILE);
       },
       at + ".speedup: must be finite and > 0"},
  };
  for (const auto& [mutate, prefix] : cases) {
    auto r = GoodReport();
    mutate(r);
    absl::Status st = Validate(r);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << prefix;
    EXPECT_EQ(st.message().substr(0, prefix.size()), prefix) << st;
  }
}

TEST(ValidateTest, SweepErrorsNameTheField) {
  const std::pair<std::function<void(pb::CreateSweepRequest&)>, std::string> cases[] = {
      {[](auto& r) { r.mutable_profile()->clear_name(); }, "profile.name:"},
      {[](auto& r) { r.mutable_profile()->set_body("[]"); }, "profile.body: must be a JSON object"},
      {[](auto& r) { r.mutable_profile()->set_body("{"); }, "profile.body: not valid JSON"},
      {[](auto& r) { r.add_modes("eager"); r.add_modes("eager"); }, "modes[1]: repeated"},
      {[](auto& r) { r.add_modes("fast"); }, "modes[0]: unknown mode 'fast'"},
      {[](auto& r) { r.set_sample(-1); }, "sample:"},
      {[](auto& r) { r.set_shard_max_models(20000); }, "shard_max_models:"},
      {[](auto& r) { r.set_model_timeout_s(-3); }, "model_timeout_s:"},
      {[](auto& r) { r.mutable_filter()->add_tasks(""); }, "filter.tasks[0]: empty"},
      {[](auto& r) { r.mutable_filter()->add_model_ids("a"); r.mutable_filter()->add_model_ids(""); },
       "filter.model_ids[1]: empty"},
  };
  for (const auto& [mutate, prefix] : cases) {
    auto r = GoodSweep();
    mutate(r);
    absl::Status st = Validate(r);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << prefix;
    EXPECT_EQ(st.message().substr(0, prefix.size()), prefix) << st;
  }
}

TEST(ValidateTest, OtherRequests) {
  pb::UpsertModelsRequest up;
  EXPECT_EQ(Validate(up).message(), "models: empty");
  auto* m = up.add_models();
  m->set_id("a");
  m->set_task("t");
  m->set_arch("A");
  m->set_config_json("{\"x\": 1}");
  EXPECT_TRUE(Validate(up).ok());
  m->set_config_json("nope");
  EXPECT_EQ(Validate(up).message().substr(0, 23), "models[0].config_json: ");
  pb::RegisterWorkerRequest reg;
  EXPECT_EQ(Validate(reg).message(), "name: required");
  pb::ListResultsRequest list;
  list.set_sweep_id(1);
  list.set_page_size(-1);
  EXPECT_EQ(Validate(list).message().substr(0, 10), "page_size:");
  pb::GetSweepRequest get;
  EXPECT_EQ(Validate(get).message().substr(0, 9), "sweep_id:");
}

}  // namespace
}  // namespace ts::scheduler
