// Checks every zoo family test applies to a built model (forward shapes, determinism, fp64 vs
// fp32 agreement, finite loss and backward, a run under bf16 emulation).
#pragma once

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "workers/zoo/model.h"
#include "workers/zoo/nn.h"

namespace ts::zoo::testing {

// Builds `arch` from `cfg`, or from the class's example config when cfg is null; a build error
// fails the calling test and returns nullptr.
inline std::unique_ptr<Model> Build(const std::string& arch, nlohmann::json cfg = nullptr) {
  if (cfg.is_null()) cfg = *ExampleConfig(arch);
  BuildOptions o;
  o.arch = arch;
  auto m = BuildModel(cfg, o);
  EXPECT_TRUE(m.ok()) << arch << ": " << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

// Builds the config's architecture at the config's own sizes (no tiny scaling): the formula tests'
// one-layer models. A build error fails the calling test and returns nullptr.
inline std::unique_ptr<Model> BuildFull(const nlohmann::json& cfg) {
  BuildOptions o;
  o.tiny = false;
  auto m = BuildModel(cfg, o);
  EXPECT_TRUE(m.ok()) << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

// max |a - b|.
inline double MaxAbs(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

inline bool HasWeight(const Model& m, const std::string& name) {
  for (const auto& [n, s] : m.WeightShapes()) {
    if (n == name) return true;
  }
  return false;
}

// ||a - b|| / ||b||.
inline double RelDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).norm().item<double>() / std::max(b.norm().item<double>(), 1e-12);
}

// Building `arch` from its example config with `field` set to `value` (erased when null) fails
// with INVALID_ARGUMENT naming the problem (`needle`).
inline void ExpectConfigError(const std::string& arch, const std::string& field,
                              const nlohmann::json& value, const std::string& needle) {
  auto cfg = *ExampleConfig(arch);
  if (value.is_null()) {
    cfg.erase(field);
  } else {
    cfg[field] = value;
  }
  BuildOptions o;
  o.arch = arch;
  auto r = BuildModel(cfg, o);
  ASSERT_FALSE(r.ok()) << arch << " " << field;
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().message();
}

// `arch` built at its own size from `m`'s tiny config (or `config`, when given): a sibling class
// (the base model of a head, a head of a base) over the same sizes; nullptr (and a failure)
// when it does not build.
inline std::unique_ptr<Model> BuildSibling(const Model& m, const std::string& arch,
                                           const nlohmann::json& config = nullptr) {
  BuildOptions o;
  o.tiny = false;
  o.arch = arch;
  auto r = BuildModel(config.is_null() ? m.spec().tiny_config : config, o);
  EXPECT_TRUE(r.ok()) << arch << ": " << r.status().ToString();
  return r.ok() ? std::move(*r) : nullptr;
}

// The weights under `prefix`, with the prefix taken off (a head's base model's weights), added
// to `into` (which may hold defaults for weights the head does not have).
inline WeightMap Unprefixed(const WeightMap& w, const std::string& prefix, WeightMap into = {}) {
  for (const auto& [n, t] : w)
    if (n.rfind(prefix, 0) == 0) into[n.substr(prefix.size())] = t;
  return into;
}

// Shape of weight `name`; empty when absent.
inline std::vector<int64_t> WeightShape(const Model& m, const std::string& name) {
  for (const auto& [n, s] : m.WeightShapes()) {
    if (n == name) return s;
  }
  return {};
}

inline void CheckFamilyBasics(const std::unique_ptr<Model>& m, std::vector<int64_t> out_shape) {
  ASSERT_TRUE(m);
  auto w = m->InitWeights(3);
  auto batch = m->MakeBatch(3, 2);
  auto out = m->Forward(w, batch.inputs);
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out[0].sizes().vec(), out_shape);
  EXPECT_TRUE(at::isfinite(out[0]).all().item<bool>());
  EXPECT_TRUE(at::equal(out[0], m->Forward(w, batch.inputs)[0]));
  WeightMap w64;
  for (const auto& [k, v] : w) w64[k] = v.to(at::kDouble);
  TensorMap in64;
  for (const auto& [k, v] : batch.inputs) {
    in64[k] = at::isFloatingType(v.scalar_type()) ? v.to(at::kDouble) : v;
  }
  at::Tensor o64 = m->Forward(w64, in64)[0];
  EXPECT_EQ(o64.scalar_type(), at::kDouble);
  const double scale = out[0].abs().max().item<double>() + 1e-6;
  EXPECT_LT((o64.to(at::kFloat) - out[0]).abs().max().item<double>() / scale, 1e-4);
  for (auto& [k, v] : w) v.requires_grad_(true);
  at::Tensor loss = m->Loss(w, batch);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
  loss.backward();
  at::NoGradGuard ng;
  ScopedBf16MatmulEmulation emu;
  EXPECT_TRUE(at::isfinite(m->Forward(w, batch.inputs)[0]).all().item<bool>());
}

// CheckFamilyBasics on `arch` built from its example config, the class named in any failure.
inline void CheckClass(const std::string& arch, std::vector<int64_t> out_shape) {
  SCOPED_TRACE(arch);
  CheckFamilyBasics(Build(arch), std::move(out_shape));
}

}  // namespace ts::zoo::testing
