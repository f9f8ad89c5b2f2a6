// Helpers shared by the device tests: the baseline profile without its defects, profiles with
// one test defect, moving tensors to and from the device, and a fixture. Test-only.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "workers/simdevice/runtime.h"

namespace ts::simdevice {

// sim-2.0.json with its seeded defects removed.
inline nlohmann::json BaselineNoDefects() {
  std::ifstream in(std::string(TS_SIMDEVICE_PROFILE_DIR) + "/sim-2.0.json");
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str());
  j.erase("defects");
  return j;
}

inline void ActivateJson(const nlohmann::json& j, uint64_t seed = 0) {
  auto r = Activate(j.dump(), seed);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

// The baseline with `defect` (given an id) as its only defect.
inline nlohmann::json WithDefect(nlohmann::json defect) {
  auto j = BaselineNoDefects();
  defect["id"] = "T1";
  j["defects"] = nlohmann::json::array({defect});
  return j;
}

inline at::Tensor Dev(const at::Tensor& t) { return t.to(SimDevice()); }
inline at::Tensor Cpu(const at::Tensor& t) { return t.to(at::kCPU); }

// What the device's declared bf16 numerics do to a float tensor: fp32 -> bf16 (RNE) -> fp32.
inline at::Tensor RoundBf16(const at::Tensor& t) { return t.to(at::kBFloat16).to(at::kFloat); }

// Fixture: the baseline profile without defects, counters reset, a fixed torch seed.
class BaselineProfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ActivateJson(BaselineNoDefects());
    ResetCounters();
    at::manual_seed(7);
  }
};

}  // namespace ts::simdevice
