#include "workers/engine/compare.h"

#include <cmath>

#include <gtest/gtest.h>

namespace ts::engine {
namespace {

struct Fixture {
  at::Tensor golden, ref, declared;
};

Fixture Make(int64_t n = 4096) {
  at::manual_seed(3);
  Fixture f;
  f.golden = at::randn({n}, at::kDouble);
  f.ref = f.golden.to(at::kFloat);
  // Honest bf16-class noise: ~0.3% relative.
  f.declared = (f.golden * (1 + 3e-3 * at::randn({n}, at::kDouble))).to(at::kFloat);
  return f;
}

TEST(CompareTest, ExactMatchPassesViaAllclose) {
  auto f = Make();
  Tolerance tol;
  auto a = CompareOutputs({f.ref}, {f.ref}, {f.golden}, {f.declared}, tol);
  EXPECT_TRUE(a.allclose);
  EXPECT_TRUE(AccuracyPasses(a, tol));
  EXPECT_NEAR(a.cosine, 1.0, 1e-12);
  EXPECT_EQ(a.max_abs_err, 0);
}

TEST(CompareTest, DeviceAtItsDeclaredNumericsPasses) {
  auto f = Make();
  Tolerance tol{1e-4, 3.0};
  // Same rounding as declared, different fp32 accumulation order (~1e-6 relative).
  at::manual_seed(11);
  auto dev = (f.declared.to(at::kDouble) * (1 + 1e-6 * at::randn({4096}, at::kDouble))).to(at::kFloat);
  auto a = CompareOutputs({dev}, {f.ref}, {f.golden}, {f.declared}, tol);
  EXPECT_FALSE(a.allclose);
  EXPECT_TRUE(AccuracyPasses(a, tol)) << DescribeFailure(a, tol);
  EXPECT_LT(a.rmse_ratio, 1.01);
  EXPECT_LT(a.rmse_vs_declared, 0.01 * a.rmse_reference);
}

TEST(CompareTest, DeviceNoisierThanItsDeclaredNumericsFails) {
  auto f = Make();
  Tolerance tol{1e-4, 3.0};
  // Independent noise a little larger: within the dynamo rule, but not the declared numerics.
  at::manual_seed(11);
  auto dev = (f.golden * (1 + 4e-3 * at::randn({4096}, at::kDouble))).to(at::kFloat);
  auto a = CompareOutputs({dev}, {f.ref}, {f.golden}, {f.declared}, tol);
  EXPECT_GT(a.rmse_ratio, 1.0);
  EXPECT_LT(a.rmse_ratio, 3.0);
  EXPECT_FALSE(AccuracyPasses(a, tol));
  EXPECT_NE(DescribeFailure(a, tol).find("declared numerics"), std::string::npos);
}

TEST(CompareTest, OnePercentScaleErrorFails) {
  auto f = Make();
  Tolerance tol{1e-4, 3.0};
  auto dev = f.declared * 1.01;
  auto a = CompareOutputs({dev}, {f.ref}, {f.golden}, {f.declared}, tol);
  EXPECT_FALSE(AccuracyPasses(a, tol));
  EXPECT_GT(a.rmse_ratio, 3.0);
  EXPECT_NE(DescribeFailure(a, tol).find("rmse_ratio"), std::string::npos);
}

TEST(CompareTest, NanFailsEvenIfEverythingElseMatches) {
  auto f = Make();
  Tolerance tol;
  auto dev = f.ref.clone();
  dev[7] = NAN;
  auto a = CompareOutputs({dev}, {f.ref}, {f.golden}, {f.declared}, tol);
  EXPECT_FALSE(a.finite);
  EXPECT_FALSE(AccuracyPasses(a, tol));
  EXPECT_EQ(DescribeFailure(a, tol), "device output has NaN/Inf");
}

TEST(CompareTest, IntegerOutputsAreIgnoredAndShapeMismatchFails) {
  auto f = Make(16);
  Tolerance tol;
  auto ints = at::arange(4);
  auto a = CompareOutputs({f.ref, ints}, {f.ref, ints + 1}, {f.golden, ints}, {f.declared, ints}, tol);
  EXPECT_TRUE(AccuracyPasses(a, tol));
  auto b = CompareOutputs({f.ref.narrow(0, 0, 8)}, {f.ref}, {f.golden}, {f.declared}, tol);
  EXPECT_FALSE(AccuracyPasses(b, tol));
}

TEST(LossCurveTest, CurveWithinReferenceNoisePasses) {
  std::vector<double> ref = {6.2, 6.0, 5.8, 5.6, 5.4};
  std::vector<double> decl = {6.201, 6.002, 5.797, 5.603, 5.398};
  std::vector<double> dev = {6.201001, 6.002001, 5.797001, 5.603001, 5.398001};
  auto v = CompareLossCurves(dev, ref, decl, Tolerance{1e-4, 3.0});
  EXPECT_TRUE(v.pass) << v.error;
  EXPECT_EQ(v.band.size(), 5u);
  EXPECT_LE(v.max_gap_ratio, 1.0);
}

TEST(LossCurveTest, OffsetCurveFailsAndNamesTheStep) {
  std::vector<double> ref = {6.2, 6.0, 5.8, 5.6, 5.4};
  std::vector<double> decl = {6.201, 6.002, 5.797, 5.603, 5.398};
  std::vector<double> dev = {6.201, 6.002, 5.9, 5.8, 5.7};
  auto v = CompareLossCurves(dev, ref, decl, Tolerance{1e-4, 3.0});
  EXPECT_FALSE(v.pass);
  EXPECT_NE(v.error.find("step 2"), std::string::npos) << v.error;
  EXPECT_GT(v.max_gap_ratio, 1.0);
}

TEST(LossCurveTest, NanAndDivergenceFail) {
  std::vector<double> ref = {6.2, 6.0, 5.8};
  auto nan = CompareLossCurves({6.2, NAN, 5.8}, ref, ref, Tolerance{});
  EXPECT_FALSE(nan.pass);
  EXPECT_NE(nan.error.find("NaN at step 1"), std::string::npos);
  auto div = CompareLossCurves({6.2, 7.0, 9.0}, ref, ref, Tolerance{});
  EXPECT_FALSE(div.pass);
  EXPECT_NE(div.error.find("diverging"), std::string::npos) << div.error;
}

}  // namespace
}  // namespace ts::engine

namespace ts::engine {
namespace {

TEST(CompareTest, DeviceMoreAccurateThanDeclaredPasses) {
  auto f = Make();
  Tolerance tol{1e-4, 3.0};
  // e.g. an op that falls back to exact CPU fp32 while the declared numerics round it.
  auto dev = (f.golden * (1 + 1e-3 * at::randn({4096}, at::kDouble))).to(at::kFloat);
  auto a = CompareOutputs({dev}, {f.ref}, {f.golden}, {f.declared}, tol);
  EXPECT_LT(a.rmse_ratio, 1.0);
  EXPECT_TRUE(AccuracyPasses(a, tol)) << DescribeFailure(a, tol);
}

}  // namespace
}  // namespace ts::engine
