#include "services/worker/result_convert.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ts::worker {
namespace {

TEST(ResultConvertTest, EngineJsonBecomesTypedModesAndOps) {
  auto r = nlohmann::json::parse(R"({
    "model": {"arch": "LlamaForCausalLM", "task": "text-generation", "family": "llama"},
    "modes": {
      "eager": {"status": "pass", "error": null, "ms": 12.5, "rmse_ratio": 1.01, "cosine": null},
      "compile": {"status": "compile_fail", "error": "aten::nonzero", "ms": 3,
                  "graph_breaks": 2, "break_reasons": ["data-dependent op aten::nonzero"]},
      "train": {"status": "pass", "loss_reference": [2.5, null], "loss_device": [2.5, 2.4]}
    },
    "op_coverage": {"distinct_ops": 10, "native_ops": 9, "ratio": 0.9},
    "native_ops": {"aten::mm": {"calls": 4, "ms": 1.5}},
    "fallback_ops": {"aten::cumsum": {"calls": 1, "ms": null}},
    "timings_ms": {"total": 40.5},
    "tiny_config": {"hidden_size": 64}
  })");
  touchstone::v1::Job job;
  job.set_job_id(7);
  job.set_model_id("org/m");
  job.set_run(2);
  auto m = ToModelResult(job, {"eager", "compile", "train"}, r);
  EXPECT_EQ(m.job_id(), 7);
  EXPECT_EQ(m.run(), 2);
  ASSERT_EQ(m.modes_size(), 3);
  EXPECT_EQ(m.modes(0).mode(), "compile");  // std::set order
  EXPECT_EQ(m.modes(0).status(), "compile_fail");
  EXPECT_EQ(m.modes(0).graph_breaks(), 2);
  EXPECT_EQ(m.modes(0).break_reasons(0), "data-dependent op aten::nonzero");
  EXPECT_EQ(m.modes(1).mode(), "eager");
  EXPECT_DOUBLE_EQ(m.modes(1).rmse_ratio(), 1.01);
  EXPECT_TRUE(std::isnan(m.modes(1).cosine()));
  EXPECT_TRUE(m.modes(1).error().empty());
  ASSERT_EQ(m.modes(2).loss_reference_size(), 2);
  EXPECT_TRUE(std::isnan(m.modes(2).loss_reference(1)));
  EXPECT_DOUBLE_EQ(m.opcov_ratio(), 0.9);
  ASSERT_EQ(m.ops_size(), 2);
  EXPECT_EQ(m.ops(0).op(), "aten::mm");
  EXPECT_TRUE(m.ops(0).native());
  EXPECT_FALSE(m.ops(1).native());
  EXPECT_DOUBLE_EQ(m.total_ms(), 40.5);
  EXPECT_EQ(m.family(), "llama");
  EXPECT_EQ(m.tiny_config_json(), "{\"hidden_size\":64}");
}

TEST(ResultConvertTest, OnlyTheSweepsModesAndMissingOnesAreSkipped) {
  auto r = nlohmann::json::parse(R"({"modes": {"eager": {"status": "pass"}}})");
  touchstone::v1::Job job;
  auto m = ToModelResult(job, {"eager", "train"}, r);
  ASSERT_EQ(m.modes_size(), 2);
  EXPECT_EQ(m.modes(1).mode(), "train");
  EXPECT_EQ(m.modes(1).status(), "skipped");
  EXPECT_DOUBLE_EQ(m.opcov_ratio(), 0);
}

}  // namespace
}  // namespace ts::worker
