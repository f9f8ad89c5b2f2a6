// Numeric drift (issue 11): has a passing model's metric (its rmse ratio, its compile time)
// stepped up in its recent sweeps against its own history? A change-point test on one model's
// series, with a magnitude floor, so that a model whose error doubled is a warning before it
// fails, and a model whose numbers wobble is not.
//
// The test, on a series x_1..x_n (oldest first, tonight last, n >= min_points): for each split
// that leaves k = 1..max_recent recent points (tonight among them) and at least min_history
// before them, the before segment's median m and robust spread s = max(1.4826 MAD, noise x m,
// min_delta / min_z) are taken; the split fires when every recent point is
//   >= min_factor x m          (the magnitude floor, relative: "doubled"),
//   >= m + min_delta           (the magnitude floor, absolute: 0 -> 0.01 is not news),
//   >= m + min_z x s           (a CUSUM-style standardized step: outside the history's spread),
//   >  every before point      (a step, not a return to a level seen before).
// The verdict is the split with the largest standardized step. A single spike in the middle of
// the history never fires (tonight is not above it); a slow slide fires once the recent points
// clear the floors against the older median.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <vector>

namespace ts::query {

struct DriftRule {
  size_t min_history = 3;   // before points needed (the median of fewer is no history)
  size_t max_recent = 3;    // the step lies in the last 1..3 sweeps
  double min_factor = 2.0;  // recent >= 2 x the history's median
  double min_delta = 0;     // and >= median + min_delta (the metric's units)
  double noise = 0.10;      // spread floor, relative to the median
  double min_z = 4.0;       // recent >= median + 4 x spread
};

// The rmse ratio's rule: the ratio is the device error over the declared numerics' error, so a
// rise of half the reference noise is the floor (a ratio over 3 fails the model).
DriftRule RmseDriftRule();
// The compile time's rule (ms, each sweep's values scaled to the window's machine speed first):
// doubled, and at least 100 ms more.
DriftRule CompileMsDriftRule();

struct DriftVerdict {
  bool fired = false;
  double before = 0;  // the history's median
  double after = 0;   // the recent points' median
  size_t recent = 0;  // how many recent points (the step began `recent` sweeps ago)
  double z = 0;       // (min recent - before) / spread
};

// `series`: oldest first, tonight last.
DriftVerdict CheckDrift(const std::vector<double>& series, const DriftRule& rule);

}  // namespace ts::query
