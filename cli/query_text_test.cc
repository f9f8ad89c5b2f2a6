// The CLI's own text of a model's history: gradients, the op audit and suspects appear where
// the record has them.
#include "cli/query_text.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;

TEST(QueryTextTest, ModelTextShowsGradientsAuditAndSuspects) {
  pb::ModelHistory h;
  h.set_model_id("org/gpt2-tiny");
  pb::ModelResult* r = h.add_sweeps()->mutable_result();
  pb::ModeVerdict* eager = r->add_modes();
  eager->set_mode(pb::MODE_EAGER);
  eager->set_status(pb::VERDICT_FAIL_ACCURACY);
  eager->set_grad_rmse_ratio(std::nan(""));
  eager->set_audited(true);
  pb::Suspect* s = eager->add_suspects();
  s->set_op("aten::gelu");
  s->set_shapes("[2,8,64]");
  s->set_dtype("float32");
  s->set_ratio(1e300);
  s->set_calls(3);
  s->set_total_calls(12);
  pb::ModeVerdict* train = r->add_modes();
  train->set_mode(pb::MODE_TRAIN);
  train->set_status(pb::VERDICT_PASS);
  train->set_grad_rmse_ratio(0.75);
  train->set_grad_worst_param("model.layers.0.self_attn.q_proj.weight");
  const std::string text = ModelText(h);
  EXPECT_NE(text.find("  eager    fail_accuracy          audited (1 suspects)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("           suspect: aten::gelu non-finite, 3/12 calls, [2,8,64] float32\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  train    pass                   grad x0.75\n"), std::string::npos) << text;
  EXPECT_NE(text.find("           worst gradient: model.layers.0.self_attn.q_proj.weight\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("grad x", text.find("eager")), text.find("grad x0.75"));  // NaN: none
}

TEST(QueryTextTest, AlertsTextShowsCauseModelsClassesAndAck) {
  pb::ListAlertsResponse r;
  pb::Alert* a = r.add_alerts();
  a->set_alert_id(12);
  a->set_state("acknowledged");
  a->set_severity("critical");
  a->set_mode(pb::MODE_EAGER);
  a->set_cause_kind("suspect");
  a->set_cause_text("aten::gelu");
  a->set_first_sweep_id(7);
  a->set_last_sweep_id(9);
  for (int i = 0; i < 7; ++i) a->add_models()->set_model_id("org/m" + std::to_string(i));
  a->add_archs("GPT2LMHeadModel");
  a->set_ack_note("fix in 2.2");
  a->set_ack_by("oncall");
  pb::Alert* across = r.add_alerts();  // a suspect op's alert spans the modes it broke
  across->set_alert_id(13);
  across->set_state("open");
  across->set_severity("major");
  across->set_cause_kind("suspect");
  across->set_cause_text("aten::mm");
  across->add_modes(pb::MODE_EAGER);
  across->add_modes(pb::MODE_COMPILE);
  const std::string text = AlertsText(r);
  EXPECT_NE(text.find("12     acknowledged critical eager         suspect aten::gelu"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("13     open         major    eager,compile suspect aten::mm"),
            std::string::npos)
      << text;
  across->add_modes(pb::MODE_TRAIN);
  EXPECT_NE(AlertsText(r).find("13     open         major    all           suspect aten::mm"),
            std::string::npos)
      << AlertsText(r);
  EXPECT_NE(text.find("models: org/m0, org/m1, org/m2, org/m3, org/m4, ... (2 more)\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("classes: GPT2LMHeadModel\n"), std::string::npos) << text;
  EXPECT_NE(text.find("ack by oncall at -: fix in 2.2"), std::string::npos) << text;
}

TEST(QueryTextTest, DetectTextShowsCountsFiredTestsAndAlerts) {
  pb::DetectRegressionsResponse r;
  r.set_sweep_id(5);
  r.set_baseline_sweep_id(4);
  r.set_line("sim");
  r.set_flips(9);
  r.set_deterministic(8);
  r.set_flaky(1);
  r.set_tests(28);
  pb::GroupTest* t = r.add_fired();
  t->set_kind("arch");
  t->set_group("Arch0");
  t->set_mode(pb::MODE_EAGER);
  t->set_flips(100);
  t->set_p(7.9e-31);
  t->set_mcnemar(true);
  t->set_rate(50);
  t->set_median(100);
  r.add_opened(3);
  r.add_opened(4);
  const std::string text = DetectText(r);
  EXPECT_NE(text.find("sweep 5 vs 4 (line sim): 9 flips: 8 deterministic, 1 flaky, 0 pending, "
                      "0 quarantined\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("arch Arch0"), std::string::npos) << text;
  EXPECT_NE(text.find("100 flips, 0 fixes, p 7.9e-31 (McNemar); pass 50.0% vs median 100.0%\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("alerts opened: 3, 4; reopened: -; updated: -; resolved: -\n"),
            std::string::npos)
      << text;
}

TEST(QueryTextTest, DriftQuarantineAndWatchTexts) {
  pb::DetectRegressionsResponse r;
  pb::DriftFinding* d = r.add_drift();
  d->set_model_id("org/m1");
  d->set_mode(pb::MODE_EAGER);
  d->set_metric("rmse_ratio");
  d->set_before(0.62);
  d->set_after(1.41);
  d->set_first_sweep_id(12);
  std::string text = DetectText(r);
  EXPECT_NE(text.find("drift (passing, stepped up; warnings): 1\n"), std::string::npos) << text;
  EXPECT_NE(text.find("rmse_ratio 0.62 -> 1.41 from sweep 12\n"), std::string::npos) << text;

  pb::ListQuarantineResponse q;
  pb::QuarantineEntry* e = q.add_entries();
  e->set_model_id("org/flaky");
  e->set_mode(pb::MODE_COMPILE);
  e->set_arch("BertModel");
  e->set_since_sweep_id(7);
  e->set_clean_passes(1);
  text = QuarantineText(q);
  EXPECT_NE(text.find("org/flaky"), std::string::npos) << text;
  EXPECT_NE(text.find("compile"), std::string::npos) << text;
  EXPECT_NE(text.find("     7    1/3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("1 quarantined"), std::string::npos) << text;

  pb::AlertsUpdate u;
  pb::Alert* a = u.add_alerts();
  a->set_alert_id(9);
  a->set_cause_kind("drift");
  a->set_cause_text("rmse ratio stepped up");
  pb::AlertModel* m = a->add_models();
  m->set_model_id("org/m1");
  m->set_detail("rmse_ratio 0.62 -> 1.41 (x2.3) from sweep 12");
  text = AlertsUpdateText(u);
  EXPECT_EQ(text.rfind("-- changed: 1 alert\n", 0), 0u) << text;
  EXPECT_NE(text.find("org/m1: rmse_ratio 0.62 -> 1.41 (x2.3) from sweep 12\n"),
            std::string::npos)
      << text;
  u.set_snapshot(true);
  EXPECT_EQ(AlertsUpdateText(u).rfind("-- snapshot: 1 alert\n", 0), 0u);
}

}  // namespace
}  // namespace ts::cli
