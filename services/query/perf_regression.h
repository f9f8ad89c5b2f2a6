// Performance regressions (issue 30), the pure part: which model's device time grew, the op that
// grew most, and the speedup line rule. Used by the store's detection (services/store/
// perf_detection.cc) and the release gate (max_perf_regressions).
//
// The device's figures are deterministic (the simulated clock: workers/simdevice/README.md,
// "Cost model"), so one run against its baseline run of the same config is enough: no noise
// model, no reruns.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "touchstone/v1/result.pb.h"

namespace ts::query {

namespace pb = ::touchstone::v1;

// A device time that grew by more than this fraction over its baseline is a regression.
inline constexpr double kDefaultPerfThreshold = 0.02;

// The op whose time grew most from `base` to `head` (each a top_ops list, largest first), and by
// how much. An op in head's list but not in base's had at most the smallest time base lists
// (the list holds the largest), so its growth is measured from that bound; from 0 when base
// lists nothing. Ties by name. Empty op when head lists nothing.
struct OpGrowth {
  std::string op;
  double growth_us = 0;
};
OpGrowth OpGrownMost(const google::protobuf::RepeatedPtrField<pb::OpTime>& base,
                     const google::protobuf::RepeatedPtrField<pb::OpTime>& head);

// Whether `head` (a mode's perf) regressed against `base`: head device_us > base device_us x
// (1 + threshold), both positive and finite. The op that grew most when it did.
std::optional<OpGrowth> PerfRegressed(const pb::Perf& base, const pb::Perf& head, double threshold);

// The speedup line rule (PyTorch's compiler dashboard alerts the same way): a class's or task's
// geomean speedup, by sweep of the line, oldest first, tonight last (NaN: not measured that
// sweep). It fired when tonight and the sweep before are each under `ratio` x the best of the
// `window` sweeps before it (NaN ones skipped; a sweep with no measured one before it cannot
// fire).
inline constexpr double kSpeedupLineRatio = 0.95;
inline constexpr int kSpeedupLineWindow = 6;
inline constexpr int kSpeedupLineSweeps = 2;
struct SpeedupLineVerdict {
  bool fired = false;
  double best = 0;           // tonight's reference: the best of the window before it
  double previous_best = 0;  // the sweep before's
};
SpeedupLineVerdict CheckSpeedupLine(const std::vector<double>& geomeans,
                                    double ratio = kSpeedupLineRatio,
                                    int window = kSpeedupLineWindow);

}  // namespace ts::query
