#include "workers/runner/record.h"

#include <cmath>
#include <set>

#include <gtest/gtest.h>

#include "proto/names.h"
#include "workers/engine/engine.h"
#include "workers/runner/record_json.h"

namespace ts::runner {
namespace {

namespace pb = ::touchstone::v1;

TEST(RecordTest, EngineVerdictsAndModesAreTheProtoEnumsByName) {
  // Every proto verdict but `lost`, which only the store records (a worker lost too often).
  ASSERT_EQ(engine::AllVerdicts().size() + 1, proto::AllVerdicts().size());
  for (engine::Verdict v : engine::AllVerdicts()) {
    EXPECT_NE(ToProto(v), pb::VERDICT_LOST);
    EXPECT_EQ(proto::VerdictName(ToProto(v)), engine::VerdictName(v));
  }
  std::set<std::string> proto_modes;
  for (pb::Mode m : proto::AllModes()) proto_modes.insert(proto::ModeName(m));
  EXPECT_EQ(proto_modes, engine::KnownModes());
}

engine::ModelResult Sample() {
  engine::ModelResult r;
  r.arch = "GPT2LMHeadModel";
  r.task = "text-generation";
  r.family = "gpt2";
  r.config_hash = "0123456789abcdef";
  for (const auto& m : engine::KnownModes()) r.modes[m] = engine::ModeResult();
  auto& eager = r.modes["eager"];
  eager.status = engine::Verdict::kFailAccuracy;
  eager.error = "rmse ratio 9.1 over 3";
  eager.ms = 12.25;
  eager.accuracy = engine::Accuracy{1e-3, 1e-4, 10.0, 2e-3, 0.5, 0.25, 0.99, false, true};
  auto& compile = r.modes["compile"];
  compile.status = engine::Verdict::kPass;
  compile.graph_breaks = 2;
  compile.break_reasons = {"unsupported op aten::cumsum", "data-dependent op aten::nonzero"};
  compile.device_segments = 3;
  compile.graph_nodes = 41;
  compile.compile_ms = 7.5;
  compile.first_run_ms = std::nan("");
  compile.accuracy = engine::Accuracy{};
  compile.accuracy->rmse_ratio = std::numeric_limits<double>::infinity();
  engine::ModePerf perf;
  perf.device_us = 120.5;
  perf.flops = 3e6;
  perf.bytes = 4e5;
  perf.mfu = 2.5e-5;
  perf.launches = 3;
  perf.fallback_us = 20;
  perf.transfer_bytes = 64;
  perf.peak_device_bytes = 2048;
  perf.top_ops = {{"aten::mm", 60.25, 0.5}, {"[segment]", 15, 0.125}};
  perf.speedup = 4.5;
  perf.compression = std::nan("");
  compile.perf = perf;
  auto& train = r.modes["train"];
  train.status = engine::Verdict::kCrash;
  train.loss_reference = {2.5, 2.25};
  train.loss_device = {2.5, std::nan("")};
  train.loss_band = {0.01, 0.02};
  train.max_loss_gap_ratio = 0.5;
  r.op_coverage = {10, 9, 0.9, 0.95};
  r.native_ops["aten::mm"] = {4, 1.5};
  r.fallback_ops["aten::cumsum"] = {1, 0.25};
  r.timings_ms = {{"build", 1}, {"total", 40.5}};
  r.peak_device_bytes = 4096;
  r.tiny_config = {{"hidden_size", 64}, {"rope_theta", 10000.5}};
  r.references = {"computed", std::string(64, 'a'), std::string(64, 'b'),
                  "stored reference bundle refused (damaged); recomputed"};
  return r;
}

TEST(RecordTest, TheRecordsJsonViewIsTheEnginesJson) {
  const engine::ModelResult r = Sample();
  EXPECT_EQ(RecordToJson(ToRecord(r)).dump(1), engine::ToJson(r).dump(1));
}

TEST(RecordTest, StoredFieldsFollowTheConversionRules) {
  const pb::ModelResult rec = ToRecord(Sample());
  ASSERT_EQ(rec.modes_size(), 3);
  EXPECT_EQ(rec.modes(0).mode(), pb::MODE_EAGER);
  EXPECT_EQ(rec.modes(0).status(), pb::VERDICT_FAIL_ACCURACY);
  EXPECT_DOUBLE_EQ(rec.modes(0).rmse_ratio(), 10.0);
  EXPECT_TRUE(std::isnan(rec.modes(0).compile_ms()));  // not a compile mode
  EXPECT_TRUE(std::isnan(rec.modes(1).rmse_ratio()));   // infinite -> NaN
  EXPECT_EQ(rec.modes(1).break_reasons_size(), 2);
  EXPECT_TRUE(std::isnan(rec.modes(2).rmse_ratio()));   // train measures no output accuracy
  EXPECT_EQ(rec.modes(2).status(), pb::VERDICT_CRASH);
  ASSERT_EQ(rec.ops_size(), 2);
  EXPECT_TRUE(rec.ops(0).native());  // native first
  EXPECT_EQ(rec.ops(1).op(), "aten::cumsum");
  EXPECT_DOUBLE_EQ(rec.total_ms(), 40.5);
  EXPECT_DOUBLE_EQ(rec.opcov_ratio(), 0.9);
  // perf only where the engine measured it; speedup kept, a NaN compression stays NaN.
  EXPECT_FALSE(rec.modes(0).has_perf());
  ASSERT_TRUE(rec.modes(1).has_perf());
  EXPECT_DOUBLE_EQ(rec.modes(1).perf().device_us(), 120.5);
  EXPECT_DOUBLE_EQ(rec.modes(1).perf().speedup(), 4.5);
  EXPECT_TRUE(std::isnan(rec.modes(1).perf().compression()));
  ASSERT_EQ(rec.modes(1).perf().top_ops_size(), 2);
  EXPECT_EQ(rec.modes(1).perf().top_ops(1).op(), "[segment]");
  EXPECT_FALSE(rec.modes(2).has_perf());
}

}  // namespace
}  // namespace ts::runner
