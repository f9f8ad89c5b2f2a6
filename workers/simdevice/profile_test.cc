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

// The performance section (README.md, "Cost model"): the shipped profiles carry one, 2.1 moves
// some kernels, and every field is validated with its path.
TEST(ProfileTest, PerformanceSectionParsesAndDefaults) {
  auto a = ParseProfileFile(std::string(TS_SIMDEVICE_PROFILE_DIR) + "/sim-2.0.json");
  auto b = ParseProfileFile(std::string(TS_SIMDEVICE_PROFILE_DIR) + "/sim-2.1.json");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->performance.matrix_tflops.at("bfloat16"), 667);
  EXPECT_EQ(a->performance.hbm_gbps, 2900);
  EXPECT_FALSE(a->performance.source.empty());
  EXPECT_FALSE(b->performance.kernels.empty()) << "2.1 changes some kernels' efficiency";
  bool faster = false, slower = false;
  for (const auto& [op, k] : b->performance.kernels) {
    const double launch = k.launch_us >= 0 ? k.launch_us : b->performance.launch_us;
    faster = faster || launch < a->performance.launch_us;
    slower = slower || launch > a->performance.launch_us;
  }
  EXPECT_TRUE(faster && slower) << "2.1 makes some kernels faster and some slower";
  nlohmann::json j = Baseline();
  j.erase("performance");
  auto d = ParseProfile(j.dump());
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->performance.launch_us, PerformanceSpec().launch_us);
}

TEST(ProfileTest, PerformanceErrorsNameTheField) {
  struct Case {
    std::string json_pointer;
    nlohmann::json value;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {"/performance/efficiency", 1.5, "performance.efficiency: must be in (0, 1]"},
      {"/performance/hbm/gbps", 0, "performance.hbm.gbps: must be > 0"},
      {"/performance/hbm/tbps", 3, "performance.hbm.tbps: unknown field"},
      {"/performance/matrix_engine/tflops/float128", 1,
       "performance.matrix_engine.tflops."
       "float128: unknown dtype 'float128'"},
      {"/performance/vector_engine/tflops/float32", -1,
       "performance.vector_engine.tflops.float32: must be > 0"},
      {"/performance/host_link/latency_us", "slow",
       "performance.host_link.latency_us: expected number, got string"},
      {"/performance/launch_us", -1, "performance.launch_us: must be >= 0"},
      {"/performance/host/gflops", 1e9, "performance.host.gflops: must not exceed"},
      {"/performance/kernels/mm", nlohmann::json{{"launch_us", 1}},
       "performance.kernels.mm: 'mm' is not an operator name"},
      {"/performance/kernels/aten::mm", nlohmann::json{{"speed", 1}},
       "performance.kernels.aten::mm.speed: unknown field"},
      {"/performance/kernels/aten::mm", nlohmann::json{{"efficiency", 0}},
       "performance.kernels.aten::mm.efficiency: must be in (0, 1]"},
      {"/performance/turbo", true, "performance.turbo: unknown field"},
      {"/defects/0/effect", nlohmann::json{{"kind", "slow"}, {"value", 0}},
       "defects[0].effect.value: slow needs a positive factor"},
      {"/defects/0/effect", nlohmann::json{{"kind", "slow"}}, "defects[0].effect.value: missing"},
  };
  for (const auto& c : cases) {
    nlohmann::json j = Baseline();
    j[nlohmann::json::json_pointer(c.json_pointer)] = c.value;
    EXPECT_NE(ErrorOf(j).find(c.expect), std::string::npos)
        << c.json_pointer << " -> " << ErrorOf(j);
  }
  nlohmann::json j = Baseline();
  j["defects"][0]["effect"] = {{"kind", "vector_engine"}};
  EXPECT_TRUE(ParseProfile(j.dump()).ok()) << "vector_engine takes no value";
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
