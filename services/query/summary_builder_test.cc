// The table arithmetic against numbers computed by hand (not by the code under test).
#include "services/query/summary_builder.h"

#include <gtest/gtest.h>

#include <cmath>

#include "services/query/text_tables.h"

namespace ts::query {
namespace {

// Sums of per-model figures are taken on the grid of OnSumGrid (2^-30): an opcov percentage is
// then within 2^-31 x 100 of the hand-computed one, a geomean within 2^-31 of it relatively.
constexpr double kGridPct = 100.0 / (2 * kSumGridUnits);
constexpr double kGridRel = 2.0 / kSumGridUnits;

pb::ResultRow Model(const std::string& id, const std::string& task, const std::string& arch,
                    const std::string& eager, const std::string& compile, double opcov) {
  pb::ResultRow r;
  r.set_model_id(id);
  r.set_task(task);
  r.set_arch(arch);
  r.set_family(arch.substr(0, 4));
  (*r.mutable_status())["eager"] = eager;
  (*r.mutable_status())["compile"] = compile;
  r.set_opcov_ratio(opcov);
  return r;
}

// Six models over two tasks and three classes; the sweep ran eager and compile.
std::vector<pb::ResultRow> Handful() {
  return {Model("m1", "text-generation", "LlamaForCausalLM", "pass", "pass", 1.0),
          Model("m2", "text-generation", "LlamaForCausalLM", "pass", "compile_fail", 0.8),
          Model("m3", "text-generation", "LlamaForCausalLM", "crash", "skipped", 0.5),
          Model("m4", "text-generation", "GPT2LMHeadModel", "pass", "pass", 0.9),
          Model("m5", "fill-mask", "BertForMaskedLM", "pass", "compile_fail", 0.6),
          Model("m6", "fill-mask", "BertForMaskedLM", "fail_accuracy", "fail_accuracy", 0.4)};
}

void ExpectRow(const pb::SummaryRow& r, const std::string& group, int64_t models, double eager,
               double opcov, double compile) {
  EXPECT_EQ(r.group(), group);
  EXPECT_EQ(r.models(), models) << group;
  EXPECT_NEAR(r.eager_pct(), eager, 1e-9) << group;
  EXPECT_NEAR(r.opcov_pct(), opcov, kGridPct) << group;
  EXPECT_NEAR(r.compile_pct(), compile, 1e-9) << group;
  EXPECT_EQ(r.train_pct(), 0) << group;
}

// Expected values, by hand:
//   text-generation: 4 models, eager pass m1 m2 m4 = 3/4, opcov (1.0+0.8+0.5+0.9)/4 = 0.8,
//                    compile pass m1 m4 = 2/4
//   fill-mask:       2 models, eager 1/2, opcov (0.6+0.4)/2 = 0.5, compile 0/2
//   Total:           6 models, eager 4/6, opcov 4.2/6 = 0.7, compile 2/6
//   classes:         Llama eager 2/3 opcov 2.3/3 compile 1/3; GPT2 1, 0.9, 1; Bert 1/2, 0.5, 0
//   Class-weighted:  eager (2/3+1+1/2)/3 = 13/18, opcov (23/30+27/30+15/30)/3 = 65/90,
//                    compile (1/3+1+0)/3 = 4/9
void ExpectHandTable(const pb::Summary& s) {
  ASSERT_EQ(s.rows_size(), 2);
  ExpectRow(s.rows(0), "fill-mask", 2, 50.0, 50.0, 0.0);
  ExpectRow(s.rows(1), "text-generation", 4, 75.0, 80.0, 50.0);
  ExpectRow(s.total(), "Total", 6, 400.0 / 6, 70.0, 200.0 / 6);
  ExpectRow(s.class_weighted(), "Class-weighted", 6, 1300.0 / 18, 6500.0 / 90, 400.0 / 9);
  EXPECT_EQ(s.classes(), 3);
  // Status counts per requested mode, in Verdict order, skipped left out.
  ASSERT_EQ(s.total().modes_size(), 2);
  const auto& eager = s.total().modes(0);
  EXPECT_EQ(eager.mode(), pb::MODE_EAGER);
  ASSERT_EQ(eager.statuses_size(), 3);
  EXPECT_EQ(eager.statuses(0).status(), "crash");
  EXPECT_EQ(eager.statuses(0).models(), 1);
  EXPECT_EQ(eager.statuses(1).status(), "fail_accuracy");
  EXPECT_EQ(eager.statuses(2).status(), "pass");
  EXPECT_EQ(eager.statuses(2).models(), 4);
  const auto& compile = s.total().modes(1);
  ASSERT_EQ(compile.statuses_size(), 3);
  EXPECT_EQ(compile.statuses(0).status(), "compile_fail");
  EXPECT_EQ(compile.statuses(0).models(), 2);
  EXPECT_EQ(compile.statuses(1).status(), "fail_accuracy");
  EXPECT_EQ(compile.statuses(2).models(), 2);
  EXPECT_EQ(s.class_weighted().modes_size(), 0);
}

TEST(SummaryBuilderTest, HandComputedTableFromRecords) {
  SummaryBuilder b(pb::GROUP_BY_TASK, {"eager", "compile"});
  for (const auto& r : Handful()) b.Add(r);
  ExpectHandTable(b.Build());
}

// Compile perf on the hand table's models whose compile passed (m1, m4), and one whose compile
// failed but that carries an eager perf (m2: no speedup, so it counts in no perf figure).
pb::ResultRow WithPerf(pb::ResultRow r, double speedup, double mfu, double compression) {
  pb::Perf p;
  p.set_device_us(100);
  p.set_mfu(mfu);
  p.set_speedup(speedup);
  p.set_compression(compression);
  (*r.mutable_perf())["compile"] = p;
  return r;
}

// By hand: text-generation has m1 (speedup 2, MFU 0.1, compression 1.5) and m4 (8, 0.3, 2.5):
// geomean sqrt(16) = 4, median (0.1 + 0.3) / 2 = 0.2, mean compression 2; m9 adds a third Llama
// (speedup 4, MFU 0.2, no compression): geomean cbrt(64) = 4, median 0.2, mean 2. Classes:
// Llama (2, 4): geomean sqrt(8), median MFU 0.15, compression 1.5; GPT2: 8, 0.3, 2.5.
// Class-weighted: geomean sqrt(sqrt(8) * 8) = 2^(9/4), median of (0.15, 0.3) = 0.225,
// compression (1.5 + 2.5) / 2 = 2. fill-mask has none: NaN.
TEST(SummaryBuilderTest, PerfIsGeomeanSpeedupMedianMfuAndMeanCompression) {
  SummaryBuilder b(pb::GROUP_BY_TASK, {"eager", "compile"});
  for (auto r : Handful()) {
    if (r.model_id() == "m1") r = WithPerf(r, 2, 0.1, 1.5);
    if (r.model_id() == "m4") r = WithPerf(r, 8, 0.3, 2.5);
    if (r.model_id() == "m2") {
      pb::Perf eager;
      eager.set_device_us(50);
      eager.set_mfu(0.9);
      eager.set_speedup(std::nan(""));
      (*r.mutable_perf())["eager"] = eager;
    }
    b.Add(r);
  }
  auto m9 = WithPerf(Model("m9", "text-generation", "LlamaForCausalLM", "pass", "pass", 1.0), 4,
                     0.2, std::nan(""));
  b.Add(m9);
  pb::Summary s = b.Build();
  ASSERT_EQ(s.rows_size(), 2);
  EXPECT_EQ(s.rows(0).perf_models(), 0);
  EXPECT_FALSE(s.rows(0).has_geomean_speedup()) << "none: absent, never 0";
  EXPECT_FALSE(s.rows(0).has_median_mfu());
  EXPECT_FALSE(s.rows(0).has_mean_compression());
  EXPECT_EQ(s.rows(1).perf_models(), 3);
  EXPECT_NEAR(s.rows(1).geomean_speedup(), 4.0, kGridRel * (4.0));
  EXPECT_NEAR(s.rows(1).median_mfu(), 0.2, 1e-12);
  EXPECT_NEAR(s.rows(1).mean_compression(), 2.0, kGridRel * (2.0));
  EXPECT_NEAR(s.total().geomean_speedup(), 4.0, kGridRel * (4.0));
  EXPECT_NEAR(s.class_weighted().geomean_speedup(), std::pow(2.0, 9.0 / 4),
              kGridRel * std::pow(2.0, 9.0 / 4));
  EXPECT_NEAR(s.class_weighted().median_mfu(), 0.225, 1e-12);
  EXPECT_NEAR(s.class_weighted().mean_compression(), 2.0, kGridRel * (2.0));
  EXPECT_EQ(s.class_weighted().perf_models(), 3);
  // Taking m9 out again gives the table without it; the same from a pre-aggregated group.
  b.Remove(m9);
  s = b.Build();
  EXPECT_NEAR(s.rows(1).geomean_speedup(), 4.0, kGridRel * (4.0));
  EXPECT_NEAR(s.rows(1).median_mfu(), 0.2, 1e-12);
  EXPECT_EQ(s.rows(1).perf_models(), 2);
  SummaryBuilder g(pb::GROUP_BY_TASK, {"eager", "compile"});
  GroupTally tally{"text-generation", "Llam", "LlamaForCausalLM", 1, 1.0, {}, {}};
  tally.perf = {2, std::log(2.0) + std::log(8.0), 2, 4.0, {0.1, 0.3}};
  g.AddTally(tally);
  EXPECT_NEAR(g.Build().rows(0).geomean_speedup(), 4.0, kGridRel * (4.0));
  EXPECT_NEAR(g.Build().rows(0).median_mfu(), 0.2, 1e-12);
}

TEST(SummaryBuilderTest, PerfTableShowsSpeedupMfuAndDashesWhereNone) {
  SummaryBuilder b(pb::GROUP_BY_TASK, {"eager", "compile"});
  for (auto r : Handful()) {
    if (r.model_id() == "m1") r = WithPerf(r, 2, 0.1, 1.5);
    if (r.model_id() == "m4") r = WithPerf(r, 8, 0.3, 2.5);
    b.Add(r);
  }
  const std::string text = FormatPerfSummary(b.Build());
  EXPECT_NE(text.find("Speedup"), std::string::npos) << text;
  EXPECT_NE(text.find("text-generation                        4         2     4.00x        0.2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("fill-mask                              2         0         -          -"),
            std::string::npos)
      << text;
}

TEST(SummaryBuilderTest, PreAggregatedGroupsGiveTheSameTable) {
  SummaryBuilder b(pb::GROUP_BY_UNSPECIFIED, {"eager", "compile"});
  // The same six models as (task, family, arch) groups.
  const GroupKey llama{"text-generation", "Llam", "LlamaForCausalLM"};
  const GroupKey gpt2{"text-generation", "GPT2", "GPT2LMHeadModel"};
  const GroupKey bert{"fill-mask", "Bert", "BertForMaskedLM"};
  b.AddGroup(llama, 3, 2.3);
  b.AddStatus(llama, "eager", "pass", 2);
  b.AddStatus(llama, "eager", "crash", 1);
  b.AddStatus(llama, "compile", "pass", 1);
  b.AddStatus(llama, "compile", "compile_fail", 1);
  b.AddStatus(llama, "compile", "skipped", 1);
  b.AddGroup(gpt2, 1, 0.9);
  b.AddStatus(gpt2, "eager", "pass", 1);
  b.AddStatus(gpt2, "compile", "pass", 1);
  b.AddGroup(bert, 2, 1.0);
  b.AddStatus(bert, "eager", "pass", 1);
  b.AddStatus(bert, "eager", "fail_accuracy", 1);
  b.AddStatus(bert, "compile", "compile_fail", 1);
  b.AddStatus(bert, "compile", "fail_accuracy", 1);
  ExpectHandTable(b.Build());
}

// Models the infrastructure lost (`lost`: the worker running them was lost too often) count in
// the row's models and status counts, and in no rate: the hand table's percentages stand, and a
// class with only lost models does not weigh in the class-weighted row.
TEST(SummaryBuilderTest, LostModelsCountInNoRate) {
  SummaryBuilder b(pb::GROUP_BY_TASK, {"eager", "compile"});
  for (const auto& r : Handful()) b.Add(r);
  b.Add(Model("m7", "text-generation", "LlamaForCausalLM", "lost", "lost", 0.0));
  b.Add(Model("m8", "text-generation", "OPTForCausalLM", "lost", "lost", 0.0));
  const pb::Summary s = b.Build();
  ASSERT_EQ(s.rows_size(), 2);
  ExpectRow(s.rows(0), "fill-mask", 2, 50.0, 50.0, 0.0);
  ExpectRow(s.rows(1), "text-generation", 6, 75.0, 80.0, 50.0);
  ExpectRow(s.total(), "Total", 8, 400.0 / 6, 70.0, 200.0 / 6);
  ExpectRow(s.class_weighted(), "Class-weighted", 8, 1300.0 / 18, 6500.0 / 90, 400.0 / 9);
  EXPECT_EQ(s.classes(), 4);
  const auto& eager = s.total().modes(0);
  ASSERT_EQ(eager.statuses_size(), 4);
  EXPECT_EQ(eager.statuses(2).status(), "pass");
  EXPECT_EQ(eager.statuses(3).status(), "lost");
  EXPECT_EQ(eager.statuses(3).models(), 2);
  // A crash is the model's own verdict: it counts. m3 (crash) lost instead lifts Llama's rate.
  SummaryBuilder c(pb::GROUP_BY_ARCH, {"eager"});
  for (auto r : Handful()) {
    if (r.model_id() == "m3") {  // as the store records it: no verdict, no op coverage
      (*r.mutable_status())["eager"] = "lost";
      r.set_opcov_ratio(0);
    }
    c.Add(r);
  }
  const pb::Summary t = c.Build();
  ASSERT_EQ(t.rows_size(), 3);
  EXPECT_EQ(t.rows(2).group(), "LlamaForCausalLM");
  EXPECT_NEAR(t.rows(2).eager_pct(), 100.0, 1e-9);  // 2 of the 2 measured
  EXPECT_NEAR(t.rows(2).opcov_pct(), 90.0, kGridPct);   // (1.0 + 0.8) / 2 over the measured two
}

TEST(SummaryBuilderTest, GroupByClassAndFilter) {
  pb::ResultFilter f;
  f.add_tasks("text-generation");
  SummaryBuilder b(pb::GROUP_BY_ARCH, {"eager", "compile"}, f);
  for (const auto& r : Handful()) b.Add(r);
  const pb::Summary s = b.Build();
  ASSERT_EQ(s.rows_size(), 2);
  // Llama: eager 2/3, opcov 2.3/3, compile 1/3; GPT2: 1, 0.9, 1.
  ExpectRow(s.rows(0), "GPT2LMHeadModel", 1, 100.0, 90.0, 100.0);
  ExpectRow(s.rows(1), "LlamaForCausalLM", 3, 200.0 / 3, 230.0 / 3, 100.0 / 3);
  ExpectRow(s.total(), "Total", 4, 75.0, 80.0, 50.0);
  // (2/3 + 1) / 2 = 5/6; (23/30 + 27/30) / 2 = 50/60; (1/3 + 1) / 2 = 2/3
  ExpectRow(s.class_weighted(), "Class-weighted", 4, 500.0 / 6, 5000.0 / 60, 200.0 / 3);
  EXPECT_EQ(s.classes(), 2);
  EXPECT_TRUE(b.CheckFilterMatched(7).ok());
  // A class row names its models' tasks and families (the dashboard filters on them).
  ASSERT_EQ(s.rows(1).tasks_size(), 1);
  EXPECT_EQ(s.rows(1).tasks(0), "text-generation");
  EXPECT_EQ(s.rows(1).families_size(), 1);
  EXPECT_EQ(s.total().tasks_size(), 0);
}

TEST(SummaryBuilderTest, FilterValueNoModelHasIsNamed) {
  pb::ResultFilter f;
  f.add_tasks("text-generation");
  f.add_archs("BertForMaskedLM");
  f.add_archs("BertForMaskedLMM");
  SummaryBuilder b(pb::GROUP_BY_TASK, {"eager"}, f);
  for (const auto& r : Handful()) b.Add(r);
  const absl::Status st = b.CheckFilterMatched(7);
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(), "filter.archs[1]: no model of sweep 7 has arch 'BertForMaskedLMM'");
}

TEST(SummaryBuilderTest, ModeNotRequestedCountsAsNotPassing) {
  SummaryBuilder b(pb::GROUP_BY_TASK, {"eager"});
  for (const auto& r : Handful()) b.Add(r);
  const pb::Summary s = b.Build();
  EXPECT_EQ(s.total().compile_pct(), 0);
  EXPECT_NEAR(s.total().eager_pct(), 400.0 / 6, 1e-9);
  ASSERT_EQ(s.total().modes_size(), 1);
}

TEST(SummaryBuilderTest, TextTableHasTheSweepColumnsAndFits100Columns) {
  SummaryBuilder b(pb::GROUP_BY_TASK, {"eager", "compile"});
  for (const auto& r : Handful()) b.Add(r);
  const std::string text = FormatSummary(b.Build());
  EXPECT_EQ(text,
            "Task                              Models  Eager % Mean OpCov %  Compile %  Train %\n"
            "fill-mask                              2     50.0         50.0        0.0      0.0\n"
            "text-generation                        4     75.0         80.0       50.0      0.0\n"
            "Total                                  6     66.7         70.0       33.3      0.0\n"
            "Class-weighted (3 classes)             6     72.2         72.2       44.4      0.0\n"
            "statuses: compile_fail=2 crash=1 fail_accuracy=2 pass=6\n");
}

TEST(SummaryBuilderTest, SuspectOpsTableNamesTheModeAndNonFiniteRatios) {
  pb::SuspectOpsResponse r;
  r.set_sweep_id(7);
  r.set_models_failed(5);
  r.set_models_attributed(4);
  r.set_models_audited(9);
  auto* o = r.add_ops();
  o->set_op("aten::gelu");
  o->set_models_failed(2);
  o->set_models_named(4);
  o->set_models_warned(1);
  o->set_max_ratio(1e300);
  o->add_example_models("org/a");
  o->add_example_models("org/b");
  o = r.add_ops();
  o->set_op("aten::native_layer_norm_backward_with_a_very_long_overload_name");
  o->set_models_named(1);
  o->set_max_ratio(2.04);
  EXPECT_EQ(FormatSuspectOps(r),
            "sweep 7, every mode: 5 models fail accuracy, 4 with a suspect; 9 audited\n"
            "Op                                Failed  Named  Warned  Max ratio  Examples\n"
            "aten::gelu                             2      4       1 non-finite  org/a, org/b\n"
            "aten::native_layer_norm_backwar~       0      1       0       2.04  \n");
  r.set_mode(pb::MODE_TRAIN);
  EXPECT_EQ(FormatSuspectOps(r).substr(0, 14), "sweep 7, train");
}

TEST(SummaryBuilderTest, DeltasPairGroupsAndTotals) {
  SummaryBuilder base(pb::GROUP_BY_TASK, {"eager"}), head(pb::GROUP_BY_TASK, {"eager"});
  auto rows = Handful();
  for (const auto& r : rows) base.Add(r);
  (*rows[4].mutable_status())["eager"] = "crash";  // m5 (fill-mask) regresses
  for (const auto& r : rows) head.Add(r);
  const auto d = Deltas(base.Build(), head.Build());
  ASSERT_EQ(d.size(), 4u);
  EXPECT_EQ(d[0].group(), "fill-mask");
  EXPECT_NEAR(d[0].eager_delta(), -50.0, 1e-9);
  EXPECT_NEAR(d[1].eager_delta(), 0.0, 1e-9);
  EXPECT_EQ(d[2].group(), "Total");
  EXPECT_NEAR(d[2].eager_delta(), -100.0 / 6, 1e-9);
  EXPECT_EQ(d[3].group(), "Class-weighted");
  EXPECT_NEAR(d[3].eager_delta(), -50.0 / 3, 1e-9);  // Bert 1/2 -> 0 over 3 classes
}

}  // namespace
}  // namespace ts::query
