#include "workers/runner/protocol.h"

#include <signal.h>

#include <cmath>

#include <gtest/gtest.h>

#include "workers/runner/record_json.h"

namespace ts::runner {
namespace {

pb::ModelResult Finished(std::initializer_list<pb::Mode> modes) {
  pb::ModelResult r;
  r.set_arch("LlamaForCausalLM");
  for (pb::Mode m : modes) {
    auto* v = r.add_modes();
    v->set_mode(m);
    v->set_status(pb::VERDICT_PASS);
    v->set_ms(5);
  }
  return r;
}

TEST(ProtocolReaderTest, MessagesSurviveAnySplitOfTheBytes) {
  pb::ModelResult rec = Finished({pb::MODE_EAGER, pb::MODE_TRAIN});
  rec.mutable_modes(0)->set_error("line one\nline two");  // a newline inside the frame
  const std::string wire = ReadyLine() + StageLine("build") +
                           ModelLine({{"arch", "A"}, {"family", "llama"}}) + ResultFrame(rec) +
                           ErrorLine("bad\njob");
  ProtocolReader reader;
  std::vector<Message> got;
  for (char c : wire) {  // one byte at a time
    reader.Feed(&c, 1);
    while (auto m = reader.Next()) got.push_back(std::move(*m));
  }
  ASSERT_EQ(got.size(), 5u);
  EXPECT_EQ(got[0].kind, Message::Kind::kReady);
  EXPECT_EQ(got[1].kind, Message::Kind::kStage);
  EXPECT_EQ(got[1].text, "build");
  EXPECT_EQ(got[2].kind, Message::Kind::kModel);
  EXPECT_EQ(got[2].model["family"], "llama");
  ASSERT_EQ(got[3].kind, Message::Kind::kResult);
  EXPECT_EQ(got[3].result.SerializeAsString(), rec.SerializeAsString());
  EXPECT_EQ(got[4].kind, Message::Kind::kError);
  EXPECT_EQ(got[4].text, "bad job");
}

TEST(ProtocolReaderTest, CorruptFramesAreErrorsNotResults) {
  ProtocolReader reader;
  const std::string bad_len = "result 12x\n";
  reader.Feed(bad_len.data(), bad_len.size());
  auto m = reader.Next();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, Message::Kind::kError);
  EXPECT_NE(m->text.find("bad frame length"), std::string::npos);
  const std::string garbage = "result 3\n\xff\xff\xff";
  reader.Feed(garbage.data(), garbage.size());
  m = reader.Next();
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, Message::Kind::kError);
  EXPECT_EQ(m->text, "result: unreadable record");
  const std::string partial = "result 100\nabc";
  reader.Feed(partial.data(), partial.size());
  EXPECT_FALSE(reader.Next());  // waits for the rest of the frame
}

const ModelIdentity kFallback{"GivenArch", "", "", ""};
const std::set<pb::Mode> kAll = {pb::MODE_EAGER, pb::MODE_COMPILE, pb::MODE_TRAIN};

const pb::ModeVerdict& ModeOf(const pb::ModelResult& r, pb::Mode m) {
  for (const auto& v : r.modes()) {
    if (v.mode() == m) return v;
  }
  ADD_FAILURE() << "mode " << m << " missing";
  static pb::ModeVerdict none;
  return none;
}

TEST(RunAcrossCrashesTest, ACrashInAModeCostsThatModeAndTheRestRunAgain) {
  std::vector<std::set<pb::Mode>> asked;
  auto r = RunAcrossCrashes(kAll, 60, kFallback, [&](const std::set<pb::Mode>& modes) {
    asked.push_back(modes);
    ChildOutcome c;
    if (asked.size() == 1) {
      c.last_stage = "compile";
      c.signal = SIGSEGV;
      return c;
    }
    c.finished = true;
    c.result = Finished({pb::MODE_EAGER, pb::MODE_COMPILE, pb::MODE_TRAIN});
    c.result.mutable_modes(1)->set_status(pb::VERDICT_SKIPPED);  // not asked of this child
    return c;
  });
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(asked.size(), 2u);
  EXPECT_EQ(asked[1], (std::set<pb::Mode>{pb::MODE_EAGER, pb::MODE_TRAIN}));
  ASSERT_EQ(r->modes_size(), 3);
  EXPECT_EQ(r->modes(0).mode(), pb::MODE_EAGER);  // Mode order
  EXPECT_EQ(ModeOf(*r, pb::MODE_COMPILE).status(), pb::VERDICT_CRASH);
  EXPECT_EQ(ModeOf(*r, pb::MODE_COMPILE).error(), "runner died with SIGSEGV in stage compile");
  EXPECT_EQ(ModeOf(*r, pb::MODE_EAGER).status(), pb::VERDICT_PASS);
  EXPECT_EQ(ModeOf(*r, pb::MODE_TRAIN).status(), pb::VERDICT_PASS);
}

TEST(RunAcrossCrashesTest, ADeathBeforeTheModesCostsEveryModeAndKeepsTheBuiltIdentity) {
  int children = 0;
  auto r = RunAcrossCrashes({pb::MODE_EAGER, pb::MODE_TRAIN}, 2.5, kFallback,
                            [&](const std::set<pb::Mode>&) {
                              ++children;
                              ChildOutcome c;
                              c.last_stage = "reference";
                              c.model = {{"arch", "BertModel"}, {"task", "feature-extraction"},
                                         {"family", "bert"}, {"config_hash", "abc"}};
                              c.timed_out = true;
                              return c;
                            });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(children, 1);
  EXPECT_EQ(r->arch(), "BertModel");
  EXPECT_EQ(r->family(), "bert");
  ASSERT_EQ(r->modes_size(), 2);  // exactly the modes asked for
  for (const auto& v : r->modes()) {
    EXPECT_EQ(v.status(), pb::VERDICT_TIMEOUT);
    EXPECT_EQ(v.error(), "no result after 2.5 s (in stage reference); runner killed");
    EXPECT_TRUE(std::isnan(v.rmse_ratio()));  // nothing measured
    EXPECT_TRUE(std::isnan(v.max_loss_gap_ratio()));
    EXPECT_EQ(v.ms(), 0);
  }
  EXPECT_EQ(r->opcov_ratio(), 0);
}

TEST(RunAcrossCrashesTest, AChildErrorIsLoadFailAndAStartFailureIsUnavailable) {
  auto r = RunAcrossCrashes(kAll, 60, kFallback, [](const std::set<pb::Mode>&) {
    ChildOutcome c;
    c.error = "profile x: bad";
    return c;
  });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->arch(), "GivenArch");
  for (const auto& v : r->modes()) {
    EXPECT_EQ(v.status(), pb::VERDICT_LOAD_FAIL);
    EXPECT_EQ(v.error(), "runner: profile x: bad");
  }
  auto u = RunAcrossCrashes(kAll, 60, kFallback, [](const std::set<pb::Mode>&) {
    ChildOutcome c;
    c.start_error = "fork: no memory";
    return c;
  });
  ASSERT_FALSE(u.ok());
  EXPECT_EQ(u.status().code(), StatusCode::kUnavailable);
}

TEST(RunAcrossCrashesTest, EachDeathCostsAtLeastOneMode) {
  int children = 0;
  auto r = RunAcrossCrashes(kAll, 60, kFallback, [&](const std::set<pb::Mode>& modes) {
    ++children;
    ChildOutcome c;
    c.last_stage = *modes.begin() == pb::MODE_EAGER ? "eager" : "compile";
    c.exit_code = 9;
    return c;
  });
  ASSERT_TRUE(r.ok());
  // eager, then compile, then train, whose child died in a stage (compile) it no longer had
  EXPECT_EQ(children, 3);
  EXPECT_EQ(ModeOf(*r, pb::MODE_EAGER).error(), "runner died with exit code 9 in stage eager");
  EXPECT_EQ(ModeOf(*r, pb::MODE_COMPILE).error(), "runner died with exit code 9 in stage compile");
  EXPECT_EQ(ModeOf(*r, pb::MODE_TRAIN).status(), pb::VERDICT_CRASH);
  EXPECT_EQ(ModeOf(*r, pb::MODE_TRAIN).error(), "runner died with exit code 9 in stage compile");
}

TEST(RecordJsonTest, TheViewNamesModesAndStatusesAndNullsWhatWasNotMeasured) {
  pb::ModelResult r = Finished({pb::MODE_COMPILE});
  r.mutable_modes(0)->set_graph_breaks(2);
  r.mutable_modes(0)->set_rmse_ratio(std::nan(""));
  auto* op = r.add_ops();
  op->set_op("aten::cumsum");
  op->set_calls(3);
  AddSkippedModes(&r);
  const nlohmann::json j = RecordToJson(r);
  EXPECT_EQ(j["modes"]["compile"]["status"], "pass");
  EXPECT_EQ(j["modes"]["compile"]["graph_breaks"], 2);
  EXPECT_TRUE(j["modes"]["compile"]["rmse_ratio"].is_null());
  EXPECT_EQ(j["modes"]["train"]["status"], "skipped");
  EXPECT_FALSE(j["modes"]["train"].contains("rmse_ratio"));
  EXPECT_FALSE(j["modes"]["eager"].contains("graph_breaks"));
  EXPECT_EQ(j["fallback_ops"]["aten::cumsum"]["calls"], 3);
  EXPECT_TRUE(j["native_ops"].empty());
  EXPECT_EQ(j["modes"]["compile"]["audited"], false);
  EXPECT_EQ(j["modes"]["compile"]["suspects"], nlohmann::json::array());
  EXPECT_EQ(j["modes"]["compile"]["unchecked"], nlohmann::json::array());
  EXPECT_FALSE(j["modes"]["compile"].contains("grad_rmse_ratio"));
}

TEST(RecordJsonTest, TheViewShowsGradientsAuditAndSuspects) {
  pb::ModelResult r = Finished({pb::MODE_EAGER, pb::MODE_TRAIN});
  AddSkippedModes(&r);
  pb::ModeVerdict& eager = *r.mutable_modes(0);
  eager.set_audited(true);
  auto* s = eager.add_suspects();
  s->set_op("aten::gelu");
  s->set_shapes("[2,8,64]");
  s->set_dtype("float32");
  s->set_ratio(1e300);
  s->set_calls(3);
  s->set_total_calls(12);
  auto* u = eager.add_unchecked();
  u->set_op("aten::mm");
  u->set_calls(2);
  u->set_error("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  pb::ModeVerdict& train = *r.mutable_modes(2);
  ASSERT_EQ(train.mode(), pb::MODE_TRAIN);
  train.set_grad_rmse_ratio(4.1);
  train.set_grad_worst_param("model.layers.0.self_attn.q_proj.weight");
  nlohmann::json j = RecordToJson(r);
  EXPECT_EQ(j["modes"]["eager"]["audited"], true);
  EXPECT_EQ(j["modes"]["eager"]["suspects"],
            nlohmann::json::parse(R"([{"op": "aten::gelu", "shapes": "[2,8,64]",
                                       "dtype": "float32", "ratio": 1e300, "calls": 3,
                                       "total_calls": 12}])"));
  EXPECT_EQ(j["modes"]["eager"]["unchecked"],
            nlohmann::json::parse(R"x([{"op": "aten::mm", "calls": 2, "error":
                "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"}])x"));
  EXPECT_FALSE(j["modes"]["eager"].contains("grad_rmse_ratio"));
  EXPECT_EQ(j["modes"]["train"]["grad_rmse_ratio"], 4.1);
  EXPECT_EQ(j["modes"]["train"]["grad_worst_param"], "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(j["modes"]["train"]["audited"], false);
  train.set_grad_rmse_ratio(std::nan(""));
  train.clear_grad_worst_param();
  j = RecordToJson(r);
  EXPECT_TRUE(j["modes"]["train"]["grad_rmse_ratio"].is_null());
  EXPECT_TRUE(j["modes"]["train"]["grad_worst_param"].is_null());
}

}  // namespace
}  // namespace ts::runner
