#include "workers/simdevice/profile.h"

#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace ts::simdevice {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

nlohmann::json Baseline() {
  return nlohmann::json::parse(ReadFile(std::string(TS_SIMDEVICE_PROFILE_DIR) + "/sim-2.0.json"));
}

std::string ErrorOf(const nlohmann::json& j) {
  auto r = ParseProfile(j.dump());
  EXPECT_FALSE(r.ok()) << j.dump();
  return r.ok() ? "" : r.status().message();
}

TEST(ProfileTest, ShippedProfilesParse) {
  for (const char* name : {"sim-2.0.json", "sim-2.1.json"}) {
    auto p = ParseProfileFile(std::string(TS_SIMDEVICE_PROFILE_DIR) + "/" + name);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->name, "sim");
    EXPECT_GT(p->native_ops.size(), 20u);
    EXPECT_TRUE(p->unsupported_dtypes.count("float64"));
    EXPECT_EQ(p->numerics.matmul, MatmulNumerics::kBf16InFp32Acc);
    EXPECT_GT(p->num_defects, 0);
  }
}

TEST(ProfileTest, Sim21AddsNativeAndCompilerOps) {
  auto a = ParseProfileFile(std::string(TS_SIMDEVICE_PROFILE_DIR) + "/sim-2.0.json");
  auto b = ParseProfileFile(std::string(TS_SIMDEVICE_PROFILE_DIR) + "/sim-2.1.json");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->sdk_version, "2.0.0");
  EXPECT_EQ(b->sdk_version, "2.1.0");
  for (const auto& op : a->native_ops) EXPECT_TRUE(b->native_ops.count(op)) << op;
  EXPECT_GT(b->native_ops.size(), a->native_ops.size());
  EXPECT_GT(b->compiler.supported_ops.size(), a->compiler.supported_ops.size());
}

TEST(ProfileTest, ErrorsNameTheField) {
  struct Case {
    std::string json_pointer;
    nlohmann::json value;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"/memory_bytes", -5, "memory_bytes: must be > 0"},
      {"/memory_bytes", "lots", "memory_bytes: expected integer, got string"},
      {"/numerics/matmul", "int8", "numerics.matmul: unknown value 'int8'"},
      {"/dtypes/unsupported/0", "float128", "dtypes.unsupported[0]: unknown dtype 'float128'"},
      {"/native_ops/2", "mm", "native_ops[2]: 'mm' is not an operator name"},
      {"/compiler/budget_ms", 0, "compiler.budget_ms: must be > 0"},
      {"/compiler/max_nodes", 1.5, "compiler.max_nodes: expected integer, got number"},
      {"/defects/0/effect/kind", "melt", "defects[0].effect.kind: unknown kind 'melt'"},
      {"/defects/1/when/probability", 2.0, "defects[1].when.probability: must be in (0, 1]"},
      {"/defects/1/when/colour", "red", "defects[1].when.colour: unknown condition"},
      {"/defects/2/mode", "sometimes", "defects[2].mode: unknown mode 'sometimes'"},
      {"/defects/1/id", "D1", "defects[1].id: duplicate id 'D1'"},
      {"/bogus", 1, "bogus: unknown field"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = Baseline();
    j[nlohmann::json::json_pointer(c.json_pointer)] = c.value;
    EXPECT_NE(ErrorOf(j).find(c.expect), std::string::npos)
        << c.json_pointer << " -> " << ErrorOf(j);
  }
}

TEST(ProfileTest, MissingRequiredFieldsAreNamed) {
  for (const char* field : {"name", "memory_bytes", "native_ops", "compiler"}) {
    nlohmann::json j = Baseline();
    j.erase(field);
    EXPECT_NE(ErrorOf(j).find(std::string(field) + ": missing"), std::string::npos) << field;
  }
  nlohmann::json j = Baseline();
  j["defects"][0].erase("effect");
  EXPECT_NE(ErrorOf(j).find("defects[0].effect: missing"), std::string::npos);
  j = Baseline();
  j["defects"][0]["effect"] = {{"kind", "scale"}};
  EXPECT_NE(ErrorOf(j).find("defects[0].effect.value: missing"), std::string::npos);
}

TEST(ProfileTest, NotJsonIsRejected) {
  auto r = ParseProfile("{ not json");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(ParseProfileFile("/nonexistent/profile.json").ok());
}

TEST(ProfileTest, OpListMatchesWithAndWithoutOverload) {
  const std::set<std::string> list = {"aten::add", "aten::mul.Tensor"};
  EXPECT_TRUE(OpListMatches(list, "aten::add.Tensor"));
  EXPECT_TRUE(OpListMatches(list, "aten::add"));
  EXPECT_TRUE(OpListMatches(list, "aten::mul.Tensor"));
  EXPECT_FALSE(OpListMatches(list, "aten::mul.Scalar"));
  EXPECT_FALSE(OpListMatches(list, "aten::addmm"));
  EXPECT_EQ(StripOverload("aten::add_.Tensor"), "aten::add_");
  EXPECT_EQ(StripOverload("aten::mm"), "aten::mm");
}

}  // namespace
}  // namespace ts::simdevice
