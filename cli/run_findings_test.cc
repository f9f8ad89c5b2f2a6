// run-catalog's findings: failures listed with their errors, replays and first suspects counted.
#include "cli/run_findings.h"

#include <gtest/gtest.h>

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;

pb::ModelResult Record(pb::Verdict eager, bool audited, const std::string& first_suspect) {
  pb::ModelResult r;
  r.set_arch("BertModel");
  pb::ModeVerdict* m = r.add_modes();
  m->set_mode(pb::MODE_EAGER);
  m->set_status(eager);
  if (eager != pb::VERDICT_PASS) m->set_error("rmse_ratio 4.1 > 3");
  m->set_audited(audited);
  if (!first_suspect.empty()) m->add_suspects()->set_op(first_suspect);
  pb::ModeVerdict* t = r.add_modes();
  t->set_mode(pb::MODE_TRAIN);
  t->set_status(pb::VERDICT_PASS);
  return r;
}

TEST(RunFindingsTest, CountsReplaysAndFirstSuspectsAndListsFailures) {
  RunFindings f;
  f.Add("org/a", Record(pb::VERDICT_FAIL_ACCURACY, true, "aten::gelu"));
  f.Add("org/b", Record(pb::VERDICT_PASS, true, "aten::gelu"));  // an audit warning
  f.Add("org/c", Record(pb::VERDICT_PASS, true, ""));
  f.Add("org/d", Record(pb::VERDICT_PASS, false, ""));
  const nlohmann::json j = f.Json();
  EXPECT_EQ(j["audited_modes"], 3);
  EXPECT_EQ(j["modes_with_suspects"], 2);
  EXPECT_EQ(j["first_suspects"]["aten::gelu"], 2);
  ASSERT_EQ(j["failures"].size(), 1u);
  EXPECT_EQ(j["failures"][0]["model_id"], "org/a");
  EXPECT_EQ(j["failures"][0]["mode"], "eager");
  EXPECT_EQ(j["failures"][0]["status"], "fail_accuracy");
  EXPECT_EQ(f.Text(),
            "op-by-op replays: 3 modes, 2 with suspects aten::gelux2\n"
            "  org/a eager fail_accuracy: rmse_ratio 4.1 > 3\n");
}

TEST(RunFindingsTest, KeepsTheFirstHundredFailures) {
  RunFindings f;
  for (int i = 0; i < 150; ++i) {
    f.Add("org/m" + std::to_string(i), Record(pb::VERDICT_DEVICE_ERROR, false, ""));
  }
  EXPECT_EQ(f.Json()["failures"].size(), RunFindings::kMaxFailures);
}

}  // namespace
}  // namespace ts::cli
