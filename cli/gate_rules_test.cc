#include "cli/gate_rules.h"

#include <gtest/gtest.h>

namespace ts::cli {
namespace {

TEST(GateRulesTest, EveryKeyParses) {
  auto r = ParseGateRules(R"({"baseline": 12, "min": {"eager": 99.0, "compile": 0, "train": 5},
      "min_by_task": {"text-generation": {"eager": 90.5}},
      "min_by_class": {"LlamaForCausalLM": {"opcov": 80}},
      "max_new_failures": 0, "forbid": ["crash", "timeout"], "must_pass": ["gpt2"]})");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->baseline_sweep_id(), 12);
  EXPECT_DOUBLE_EQ(r->min().eager(), 99.0);
  EXPECT_TRUE(r->min().has_compile());
  EXPECT_DOUBLE_EQ(r->min().compile(), 0.0);
  EXPECT_FALSE(r->min().has_opcov());
  EXPECT_DOUBLE_EQ(r->min_by_task().at("text-generation").eager(), 90.5);
  EXPECT_FALSE(r->min_by_task().at("text-generation").has_train());
  EXPECT_DOUBLE_EQ(r->min_by_class().at("LlamaForCausalLM").opcov(), 80);
  ASSERT_TRUE(r->has_max_new_failures());
  EXPECT_EQ(r->max_new_failures(), 0);
  ASSERT_EQ(r->forbid_size(), 2);
  EXPECT_EQ(r->forbid(1), "timeout");
  ASSERT_EQ(r->must_pass_size(), 1);
}

TEST(GateRulesTest, EmptyObjectIsNoRules) {
  auto r = ParseGateRules("{}");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->has_min());
  EXPECT_FALSE(r->has_max_new_failures());
}

void ExpectError(const std::string& text, const std::string& starts) {
  auto r = ParseGateRules(text);
  ASSERT_FALSE(r.ok()) << text;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(std::string(r.status().message()).rfind(starts, 0), 0u)
      << "got: " << r.status().message() << "\nwanted it to start with: " << starts;
}

TEST(GateRulesTest, ErrorsNameTheKey) {
  ExpectError(R"({"minimum": {}})", "minimum: unknown key");
  ExpectError(R"({"min": {"eagr": 1}})", "min.eagr: unknown key");
  ExpectError(R"({"min": {"eager": 101}})", "min.eager: must be in [0, 100]");
  ExpectError(R"({"min": {"eager": "99"}})", "min.eager: must be a number");
  ExpectError(R"({"min_by_task": {"fill-mask": {"train": -1}}})",
              "min_by_task[\"fill-mask\"].train: must be in [0, 100]");
  ExpectError(R"({"min_by_class": []})", "min_by_class: must be an object");
  ExpectError(R"({"max_new_failures": -2})", "max_new_failures: must be a non-negative integer");
  ExpectError(R"({"max_new_failures": 1.5})", "max_new_failures: must be a non-negative integer");
  ExpectError(R"({"forbid": ["crash", 3]})", "forbid[1]: must be a non-empty string");
  ExpectError(R"({"must_pass": "gpt2"})", "must_pass: must be an array");
  ExpectError(R"({"baseline": 0})", "baseline: must be a sweep id");
  ExpectError("[1]", "rules: must be a JSON object");
  ExpectError("{\"min\": ", "rules: not JSON");
}

}  // namespace
}  // namespace ts::cli
