// Seeded device defects: the simulator's ground truth. PRIVATE to workers/simdevice: no other
// component may include this header or read a profile's `defects` list (DESIGN.md §3).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workers/base/status.h"

namespace ts::simdevice::internal {

enum class DefectMode { kEager, kCompiled, kBoth };
// The first seven change what the device computes (accuracy); kSlow and kVectorEngine change
// only what it costs (performance: the simulated clock, internal/perf_clock.h).
enum class EffectKind {
  kScale,
  kOffset,
  kZeroTail,
  kNan,
  kError,
  kAbort,
  kSleepMs,
  kSlow,          // the op's kernel takes `value` times its modelled time
  kVectorEngine,  // a matrix-engine op runs on the vector engine
};
inline bool IsPerfEffect(EffectKind k) {
  return k == EffectKind::kSlow || k == EffectKind::kVectorEngine;
}

struct DefectWhen {
  std::optional<std::string> dtype;  // "float32"
  std::optional<int64_t> min_numel, max_numel;
  std::optional<int64_t> min_last_dim, max_last_dim;
  std::optional<int64_t> rank;
  double probability = 1.0;  // < 1: flaky, drawn from the seeded device RNG per op call
};

struct Defect {
  std::string id;
  std::string op;  // with or without overload
  DefectMode mode = DefectMode::kBoth;
  DefectWhen when;
  EffectKind kind = EffectKind::kScale;
  double value = 0;  // scale factor, offset, k for zero_tail, ms for sleep_ms, slow's factor
};

// Parses `defects` (a JSON array); errors name the field ("defects[1].effect.kind: ...").
StatusOr<std::vector<Defect>> ParseDefects(const nlohmann::json& defects);

}  // namespace ts::simdevice::internal
