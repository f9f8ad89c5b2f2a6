// What the vision formula tests share beyond formula_test_util.h (Lin, Ln): a class built from
// its example config and run once in double (on its pixels, or on its whole batch), and eval
// BatchNorm.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include "workers/zoo/family_test_util.h"
#include "workers/zoo/formula_test_util.h"
#include "workers/zoo/model.h"

namespace ts::zoo::testing {

// nn.BatchNorm2d / BatchNorm1d at `p` in eval mode (eps 1e-5).
inline at::Tensor RefBn(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return at::batch_norm(x, w.at(p + "weight"), w.at(p + "bias"), w.at(p + "running_mean"),
                        w.at(p + "running_var"), false, 0.1, 1e-5, false);
}

struct Ran {
  std::unique_ptr<Model> m;
  WeightMap w;
  at::Tensor pixels;
  std::vector<at::Tensor> out;
};

// `arch` (from `cfg`, or its example config when null) with seed-9 weights in double, run on
// its seed-4 batch of 2: a build error fails the calling test and leaves `m` null.
inline Ran RunClass(const std::string& arch, const nlohmann::json& cfg = nullptr) {
  Ran r;
  r.m = Build(arch, cfg);
  if (!r.m) return r;
  r.w = r.m->InitWeights(9, at::kDouble);
  r.pixels = r.m->MakeBatch(4, 2).inputs.at("pixel_values").to(at::kDouble);
  r.out = r.m->Forward(r.w, {{"pixel_values", r.pixels}});
  return r;
}

struct RanBatch {
  std::unique_ptr<Model> m;
  WeightMap w;
  Batch batch;
  std::vector<at::Tensor> out;
};

// `arch` (from `cfg`, or its example config when null) with seed-9 weights in double, run on its
// seed-4 batch of 2 with every floating input and label in double (the tasks that take masks and
// labels): a build error fails the calling test and leaves `m` null.
inline RanBatch RunClassBatch(const std::string& arch, const nlohmann::json& cfg = nullptr) {
  RanBatch r;
  r.m = Build(arch, cfg);
  if (!r.m) return r;
  r.w = r.m->InitWeights(9, at::kDouble);
  r.batch = r.m->MakeBatch(4, 2);
  for (auto* map : {&r.batch.inputs, &r.batch.labels}) {
    for (auto& [k, v] : *map)
      if (at::isFloatingType(v.scalar_type())) v = v.to(at::kDouble);
  }
  r.out = r.m->Forward(r.w, r.batch.inputs);
  return r;
}

}  // namespace ts::zoo::testing
