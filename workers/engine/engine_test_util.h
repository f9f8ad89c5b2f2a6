// Helpers shared by the engine's end-to-end tests: the defect-free baseline profile, profiles
// with defects written by the test (the engine never reads them), real configs from
// ../shared/data, and short accessors. Test-only.
#pragma once

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <utility>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "workers/engine/engine.h"
#include "workers/simdevice/runtime.h"

namespace ts::engine {

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str());
}

inline std::string DataDir() {
  const char* src = std::getenv("TS_SOURCE_DIR");
  return std::string(src ? src : ".") + "/../shared/data";
}

// sim-2.0 without its seeded defects: the baseline must then pass everything.
inline nlohmann::json Baseline() {
  nlohmann::json j = ReadJson(std::string(TS_SIMDEVICE_PROFILE_DIR) + "/sim-2.0.json");
  j.erase("defects");
  return j;
}

inline void Use(const nlohmann::json& profile) {
  auto r = simdevice::Activate(profile.dump(), 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
}

// The baseline with one defect on `op`; `extra` adds fields ("mode", "when").
inline nlohmann::json WithDefect(const std::string& op, nlohmann::json effect,
                                 nlohmann::json extra = nlohmann::json::object()) {
  nlohmann::json j = Baseline();
  nlohmann::json d = {{"id", "T"}, {"op", op}, {"effect", std::move(effect)}};
  for (auto& [k, v] : extra.items()) d[k] = v;
  j["defects"] = nlohmann::json::array({d});
  return j;
}

inline nlohmann::json Config(const std::string& name) {
  return ReadJson(DataDir() + "/hf-configs/" + name);
}

inline const ModeResult& Mode(const ModelResult& r, const std::string& m) {
  return r.modes.at(m);
}

inline std::string Describe(const ModelResult& r) { return ToJson(r).dump(1); }

inline RunOptions Modes(std::set<std::string> modes) {
  RunOptions o;
  o.modes = std::move(modes);
  return o;
}

}  // namespace ts::engine
