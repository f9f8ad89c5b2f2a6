#include "services/query/gate.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

#include "services/query/compare.h"
#include "services/query/request_checks.h"

namespace ts::query {
namespace {

pb::ResultRow Model(const std::string& id, const std::string& task, const std::string& arch,
                    const std::string& eager) {
  pb::ResultRow r;
  r.set_model_id(id);
  r.set_task(task);
  r.set_arch(arch);
  (*r.mutable_status())["eager"] = eager;
  return r;
}

// What the store reads, computed here from whole records: per-group tallies...
std::vector<GroupTally> TallyRows(const std::vector<pb::ResultRow>& rows) {
  std::map<std::tuple<std::string, std::string, std::string>, GroupTally> by;
  for (const auto& r : rows) {
    GroupTally& g = by[{r.task(), r.family(), r.arch()}];
    g.task = r.task();
    g.family = r.family();
    g.arch = r.arch();
    ++g.models;
    g.opcov_sum += r.opcov_ratio();
    for (const auto& [mode, status] : r.status()) g.statuses.push_back({mode, status, 1});
  }
  std::vector<GroupTally> out;
  for (auto& [k, g] : by) out.push_back(g);
  return out;
}

// ...and every model of either sweep as a pair (pairs that do not differ change nothing).
std::vector<ModelPair> AllPairs(const std::vector<pb::ResultRow>& base,
                                const std::vector<pb::ResultRow>& head) {
  std::map<std::string, ModelPair> by;
  for (const auto& r : base) by[r.model_id()].base = r;
  for (const auto& r : head) by[r.model_id()].head = r;
  std::vector<ModelPair> out;
  for (auto& [id, p] : by) out.push_back(p);
  return out;
}

// Two sweeps of eager-only records, as Compare reads them.
struct EagerPair {
  EagerPair(const std::vector<pb::ResultRow>& base, const std::vector<pb::ResultRow>& head)
      : bg(TallyRows(base)), hg(TallyRows(head)), pairs(AllPairs(base, head)) {}
  CompareInput Input() const {
    CompareInput in;
    in.base_groups = &bg;
    in.head_groups = &hg;
    in.differing = &pairs;
    in.base_modes = in.head_modes = {"eager"};
    return in;
  }
  const std::vector<GroupTally> bg, hg;
  const std::vector<ModelPair> pairs;
};

const pb::GateCheck* Find(const pb::GateResponse& g, const std::string& rule,
                          const std::string& group) {
  for (const auto& c : g.checks()) {
    if (c.rule() == rule && c.group() == group) return &c;
  }
  return nullptr;
}

TEST(GateTest, EveryCheckNamesRuleGroupMeasuredAndLimit) {
  const std::vector<pb::ResultRow> rows = {Model("a", "text-generation", "Llama", "pass"),
                                           Model("b", "text-generation", "Llama", "crash"),
                                           Model("c", "fill-mask", "Bert", "pass"),
                                           Model("d", "fill-mask", "Bert", "pass")};
  pb::GateRules rules;
  rules.mutable_min()->set_eager(70);
  (*rules.mutable_min_by_task())["text-generation"].set_eager(90);
  (*rules.mutable_min_by_task())["fill-mask"].set_eager(90);
  (*rules.mutable_min_by_task())["image-classification"].set_eager(10);
  rules.add_forbid("crash");
  rules.add_forbid("timeout");
  rules.add_must_pass("c");
  rules.add_must_pass("b");
  rules.set_baseline_sweep_id(1);
  rules.set_max_new_failures(0);
  ASSERT_TRUE(CheckGateRules(rules, "rules").ok());
  GateInputs in;
  in.sweep_id = 2;
  in.sweep_state = "done";
  in.modes = {"eager"};
  const std::vector<GroupTally> groups = TallyRows(rows);
  in.groups = &groups;
  in.must_pass = {rows[1], rows[2]};  // b and c, as the store reads them
  in.forbid_examples["crash"] = {"b (eager)"};
  pb::ModelChange flip;
  flip.set_model_id("b");
  flip.set_kind(pb::ModelChange::KIND_REGRESSED);
  flip.set_base_status("pass");
  flip.set_head_status("crash");
  flip.set_confirmation("deterministic");
  in.regressed.push_back(flip);
  flip.set_model_id("x");
  flip.set_confirmation("flaky");
  in.regressed.push_back(flip);
  const pb::GateResponse g = EvaluateGate(rules, in);
  EXPECT_FALSE(g.pass());
  EXPECT_TRUE(Find(g, "sweep.state", "")->ok());
  const auto* min = Find(g, "min.eager", "");
  ASSERT_NE(min, nullptr);
  EXPECT_DOUBLE_EQ(min->measured(), 75.0);
  EXPECT_DOUBLE_EQ(min->limit(), 70.0);
  EXPECT_TRUE(min->ok());
  const auto* tg = Find(g, "min_by_task.eager", "text-generation");
  EXPECT_DOUBLE_EQ(tg->measured(), 50.0);
  EXPECT_FALSE(tg->ok());
  EXPECT_TRUE(Find(g, "min_by_task.eager", "fill-mask")->ok());
  EXPECT_FALSE(Find(g, "min_by_task.eager", "image-classification")->ok());
  const auto* flips = Find(g, "max_new_failures", "");
  EXPECT_DOUBLE_EQ(flips->measured(), 1);
  EXPECT_FALSE(flips->ok());
  ASSERT_EQ(g.flaky_size(), 1);
  EXPECT_EQ(g.flaky(0).model_id(), "x");
  const auto* crash = Find(g, "forbid", "crash");
  EXPECT_DOUBLE_EQ(crash->measured(), 1);
  EXPECT_NE(crash->detail().find("b (eager)"), std::string::npos);
  EXPECT_TRUE(Find(g, "forbid", "timeout")->ok());
  EXPECT_TRUE(Find(g, "must_pass", "c")->ok());
  EXPECT_EQ(Find(g, "must_pass", "b")->detail(), "eager=crash");
  // Failures: text-generation, image-classification, max_new_failures, forbid crash, must_pass b.
  EXPECT_EQ(g.failures_size(), 5);
  EXPECT_EQ(g.checks_size(), 10);
}

TEST(GateTest, SweepNotDoneFailsTheStateCheck) {
  const std::vector<pb::ResultRow> rows = {Model("a", "t", "A", "pass")};
  GateInputs in;
  in.sweep_id = 3;
  in.sweep_state = "running";
  in.modes = {"eager"};
  const std::vector<GroupTally> groups = TallyRows(rows);
  in.groups = &groups;
  const pb::GateResponse g = EvaluateGate(pb::GateRules(), in);
  EXPECT_FALSE(g.pass());
  ASSERT_EQ(g.failures_size(), 1);
  EXPECT_EQ(g.failures(0).rule(), "sweep.state");
  EXPECT_EQ(g.failures(0).detail(), "sweep 3 is running, not done");
}

TEST(GateTest, BadRulesNameTheField) {
  pb::GateRules r;
  (*r.mutable_min_by_task())["text-generation"].set_eager(101);
  EXPECT_EQ(CheckGateRules(r, "rules").message(),
            "rules.min_by_task[\"text-generation\"].eager: must be in [0, 100]");
  r.Clear();
  r.add_forbid("crash");
  r.add_forbid("crashh");
  EXPECT_EQ(CheckGateRules(r, "rules").message(), "rules.forbid[1]: unknown status 'crashh'");
  r.Clear();
  r.set_max_new_failures(-1);
  EXPECT_EQ(CheckGateRules(r, "rules").message(), "rules.max_new_failures: must be >= 0");
  r.set_max_new_failures(0);  // baseline 0: the sweep's own, which the service looks up
  EXPECT_TRUE(CheckGateRules(r, "rules").ok());
  r.Clear();
  r.mutable_min()->set_compile(-1);
  EXPECT_EQ(CheckGateRules(r, "rules").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(CheckGateRules(r, "rules").message(), "rules.min.compile: must be in [0, 100]");
}

// Issue 11: a quarantined model's deterministic flip is listed apart and not counted.
TEST(GateTest, QuarantinedFlipsAreListedNotCounted) {
  const std::vector<pb::ResultRow> rows = {Model("a", "fill-mask", "Bert", "fail_accuracy"),
                                           Model("q", "fill-mask", "Bert", "fail_accuracy")};
  pb::GateRules rules;
  rules.set_baseline_sweep_id(1);
  rules.set_max_new_failures(1);
  GateInputs in;
  in.sweep_id = 2;
  in.sweep_state = "done";
  in.modes = {"eager"};
  const std::vector<GroupTally> groups = TallyRows(rows);
  in.groups = &groups;
  pb::ModelChange flip;
  flip.set_kind(pb::ModelChange::KIND_REGRESSED);
  flip.set_base_status("pass");
  flip.set_head_status("fail_accuracy");
  flip.set_confirmation("deterministic");
  flip.set_model_id("a");
  in.regressed.push_back(flip);
  flip.set_model_id("q");
  flip.set_quarantined(true);
  in.regressed.push_back(flip);
  pb::GateResponse g = EvaluateGate(rules, in);
  EXPECT_TRUE(g.pass());
  EXPECT_DOUBLE_EQ(Find(g, "max_new_failures", "")->measured(), 1);
  ASSERT_EQ(g.quarantined_size(), 1);
  EXPECT_EQ(g.quarantined(0).model_id(), "q");
  // Not quarantined, the same flip counts and the limit of 1 is exceeded.
  in.regressed[1].set_quarantined(false);
  g = EvaluateGate(rules, in);
  EXPECT_FALSE(g.pass());
  EXPECT_DOUBLE_EQ(Find(g, "max_new_failures", "")->measured(), 2);
  EXPECT_EQ(g.quarantined_size(), 0);
}

// `lost` (the infrastructure lost the model's worker) is no verdict: pass -> lost is not a
// regression and lost -> pass not a fix; pass -> crash (the model's process died) is.
TEST(CompareTest, LostIsNeverAFlipButCrashIs) {
  std::vector<pb::ResultRow> base = {Model("a", "t", "A", "pass"), Model("b", "t", "A", "lost"),
                                     Model("c", "t", "A", "pass")};
  std::vector<pb::ResultRow> head = {Model("a", "t", "A", "lost"), Model("b", "t", "A", "pass"),
                                     Model("c", "t", "A", "crash")};
  const EagerPair pair(base, head);
  CompareInput in = pair.Input();
  const pb::CompareSweepsResponse r = Compare(in);
  EXPECT_EQ(r.regressed(), 1);
  EXPECT_EQ(r.fixed(), 0);
  ASSERT_EQ(r.changes_size(), 1);
  EXPECT_EQ(r.changes(0).model_id(), "c");
  EXPECT_EQ(r.changes(0).head_status(), "crash");
  // Rates over the measured models: base 2/2 (b lost), head 1/2 (a lost, c crashed).
  ASSERT_GE(r.groups_size(), 1);
  EXPECT_NEAR(r.groups(0).base().eager_pct(), 100.0, 1e-9);
  EXPECT_NEAR(r.groups(0).head().eager_pct(), 50.0, 1e-9);
}

TEST(CompareTest, FlipsAppearedDisappearedAndConfirmation) {
  std::vector<pb::ResultRow> base = {Model("a", "t", "A", "pass"), Model("b", "t", "A", "crash"),
                                     Model("c", "t", "A", "pass"), Model("gone", "u", "G", "pass")};
  std::vector<pb::ResultRow> head = {Model("new", "v", "N", "crash"), Model("c", "t", "A", "pass"),
                                     Model("b", "t", "A", "pass"), Model("a", "t", "A", "oom")};
  const EagerPair pair(base, head);
  CompareInput in = pair.Input();
  in.confirmations[{"a", "eager"}] = "deterministic";
  const pb::CompareSweepsResponse r = Compare(in);
  EXPECT_EQ(r.common_models(), 3);
  EXPECT_EQ(r.regressed(), 1);
  EXPECT_EQ(r.fixed(), 1);
  EXPECT_EQ(r.appeared(), 1);
  EXPECT_EQ(r.disappeared(), 1);
  ASSERT_EQ(r.changes_size(), 4);
  EXPECT_EQ(r.changes(0).model_id(), "a");
  EXPECT_EQ(r.changes(0).kind(), pb::ModelChange::KIND_REGRESSED);
  EXPECT_EQ(r.changes(0).head_status(), "oom");
  EXPECT_EQ(r.changes(0).confirmation(), "deterministic");
  EXPECT_EQ(r.changes(1).model_id(), "b");
  EXPECT_EQ(r.changes(1).kind(), pb::ModelChange::KIND_FIXED);
  EXPECT_EQ(r.changes(2).model_id(), "gone");
  EXPECT_EQ(r.changes(3).model_id(), "new");
  // Groups over the 3 common models only: t, Total, Class-weighted (the tallies' u and v rows
  // and classes G and N are taken out with "gone" and "new"); eager 2/3 -> 2/3.
  ASSERT_EQ(r.groups_size(), 3);
  EXPECT_EQ(r.groups(0).group(), "t");
  EXPECT_NEAR(r.groups(0).base().eager_pct(), 200.0 / 3, 1e-9);
  EXPECT_NEAR(r.groups(0).eager_delta(), 0.0, 1e-9);
  EXPECT_EQ(r.groups(1).group(), "Total");
  EXPECT_EQ(r.groups(1).base().models(), 3);
  EXPECT_EQ(r.groups(1).head().models(), 3);
  EXPECT_EQ(r.groups(2).group(), "Class-weighted");
  EXPECT_NEAR(r.groups(2).base().eager_pct(), 200.0 / 3, 1e-9);
  EXPECT_NEAR(r.groups(2).head().eager_pct(), 200.0 / 3, 1e-9);
}

TEST(RequestChecksTest, PageTokensRoundTripAndRefuseOthers) {
  const std::string t = EncodePageToken("OpDemand", 150);
  EXPECT_EQ(*DecodePageToken("OpDemand", t), 150);
  EXPECT_EQ(*DecodePageToken("OpDemand", ""), 0);
  EXPECT_EQ(DecodePageToken("GraphBreaks", t).status().message().substr(0, 11), "page_token:");
  EXPECT_EQ(DecodePageToken("OpDemand", "%%%").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodePageToken("OpDemand", "bm9wZQ").status().code(),  // "nope"
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*PageSize(0, 50, 1000), 50);
  EXPECT_EQ(*PageSize(5000, 50, 1000), 1000);
  EXPECT_EQ(PageSize(-1, 50, 1000).status().message(), "page_size: must be >= 0");
}

TEST(RequestChecksTest, AlertRequestsNameTheirFields) {
  const auto msg = [](const absl::Status& st) { return std::string(st.message()); };
  pb::ListAlertsRequest list;
  EXPECT_TRUE(Check(list).ok());
  list.set_state("resolved");
  EXPECT_TRUE(Check(list).ok());
  list.set_state("closed");
  EXPECT_EQ(msg(Check(list)).substr(0, 6), "state:");
  list.set_state("");
  list.set_page_size(-1);
  EXPECT_EQ(msg(Check(list)), "page_size: must be >= 0");
  pb::AckAlertRequest ack;
  ack.set_note("n");
  EXPECT_EQ(msg(Check(ack)), "alert_id: required (an alert id > 0)");
  ack.set_alert_id(3);
  EXPECT_TRUE(Check(ack).ok());
  ack.set_note(std::string(2001, 'x'));
  EXPECT_EQ(msg(Check(ack)), "note: at most 2000 characters");
  ack.clear_note();
  EXPECT_EQ(Check(ack).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(msg(Check(ack)).substr(0, 5), "note:");
  pb::DetectRegressionsRequest det;
  EXPECT_EQ(msg(Check(det)), "sweep_id: required (a sweep id > 0)");
  det.set_sweep_id(4);
  EXPECT_TRUE(Check(det).ok());
  det.set_baseline_sweep_id(-2);
  EXPECT_EQ(msg(Check(det)).substr(0, 18), "baseline_sweep_id:");
}

TEST(RequestChecksTest, RequestsNameTheirFields) {
  pb::GetSummaryRequest s;
  EXPECT_EQ(Check(s).message(), "sweep_id: required (a sweep id > 0)");
  s.set_sweep_id(1);
  s.set_group_by(static_cast<pb::GroupBy>(9));
  EXPECT_EQ(Check(s).message(), "group_by: unknown value 9 (task, family or arch)");
  s.set_group_by(pb::GROUP_BY_ARCH);
  s.mutable_filter()->add_families("");
  EXPECT_EQ(Check(s).message(), "filter.families[0]: empty");
  pb::OpDemandRequest o;
  o.set_sweep_id(1);
  o.set_mode(pb::MODE_TRAIN);
  EXPECT_EQ(Check(o).message().substr(0, 5), "mode:");
  o.set_mode(pb::MODE_COMPILE);
  o.set_page_token("garbage!");
  EXPECT_EQ(Check(o).message().substr(0, 11), "page_token:");
  pb::ListSweepsRequest l;
  l.set_state("finished");
  EXPECT_EQ(Check(l).message().substr(0, 6), "state:");
  pb::WatchSweepRequest w;
  w.set_sweep_id(1);
  w.set_interval_ms(5);
  EXPECT_EQ(Check(w).message().substr(0, 12), "interval_ms:");
  pb::GetModelRequest m;
  EXPECT_EQ(Check(m).message(), "model_id: required");
  pb::SuspectOpsRequest so;
  EXPECT_EQ(Check(so).message(), "sweep_id: required (a sweep id > 0)");
  so.set_sweep_id(1);
  for (pb::Mode mode : {pb::MODE_UNSPECIFIED, pb::MODE_EAGER, pb::MODE_COMPILE, pb::MODE_TRAIN}) {
    so.set_mode(mode);
    EXPECT_TRUE(Check(so).ok()) << mode;
  }
  so.set_mode(static_cast<pb::Mode>(9));
  EXPECT_EQ(Check(so).message(),
            "mode: unknown mode 9 (eager, compile, train, or unset for every mode)");
  so.set_mode(pb::MODE_TRAIN);
  so.set_page_token(EncodePageToken("OpDemand", 50));
  EXPECT_EQ(Check(so).message(), "page_token: not a page token of SuspectOps");
  so.set_page_token(EncodePageToken("SuspectOps", 50));
  EXPECT_TRUE(Check(so).ok());
  so.set_page_size(-2);
  EXPECT_EQ(Check(so).message(), "page_size: must be >= 0");
}

}  // namespace
}  // namespace ts::query
