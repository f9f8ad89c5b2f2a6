// The statistics of regression detection (issue 11): which verdicts count, the one-sided exact
// McNemar test on a fixed cohort's flips, its Bonferroni bound, and the drop rule against a
// group's recent history. Used by the store's detection (services/store/detection.cc).
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ts::query {

// Verdicts that never count as a regression or a fix, on either side of a pair:
//   crash    the runner child died (a signal or an exit: an OOM kill of the runner counts too);
//   lost     the store's: the worker running the model was lost 3 times (preemption, a dead
//            node), so the model has no verdict of its own;
//   timeout  the per-model wall-clock limit, which a loaded host reaches without any device
//            change;
//   skipped  not run: the mode's verdict is the earlier stage's, counted in its own mode.
// Every other status is the device's or the model's own verdict and counts.
bool IsInfrastructureStatus(std::string_view status);
// The same list, for the store's statements: {"crash", "lost", "timeout", "skipped"}.
const std::vector<std::string>& InfrastructureStatuses();

// A model's mode in the cohort of both sweeps: both verdicts count (not infrastructure).
bool CountsInCohort(std::string_view base_status, std::string_view head_status);

// P[X >= b] for X ~ Binomial(b + c, 1/2): the one-sided exact McNemar test of "head passes
// less than base" on the discordant pairs, b = pass -> fail flips, c = fail -> pass fixes.
// 1 when b + c == 0 (no evidence). Exact to double rounding for any size (log-space terms,
// summed from the tail's largest term).
double McNemarOneSidedP(int64_t b, int64_t c);

// The family-wise level of the detection's tests: one detection tests every (mode, class) and
// every (mode, task) with a cohort; each test fires at p < kFamilyAlpha / tests.
inline constexpr double kFamilyAlpha = 0.001;

// Whether p is significant under the Bonferroni bound for `tests` tests (>= 1).
bool BonferroniSignificant(double p, int64_t tests, double alpha = kFamilyAlpha);

// The drop rule: a group's pass rate (percent) tonight against the median of its last `window`
// sweeps of the same profile line (oldest first, tonight excluded). It fires when tonight is at
// least `floor_pts` below the median and the night before was already `confirm_pts` below it.
//
// Why 5 and 2.5 points: a class that slides 2 points a night from a steady rate is 2, 4, 6, 8
// points below the 7-night median on nights 1..4 (the median holds while more than half the
// window is from before the slide): night 3 has 6 >= 5 after 4 >= 2.5, so it is caught on
// night 3, with one night of margin inside the 4. One noisy night, however deep, is alone:
// the night before sat at the median, so it does not fire, and once in the window it cannot
// move the median of 7. A real step is the McNemar test's (it fires the same night); the drop
// rule then also fires on the step's second night. Groups of fewer than `min_models` models
// are left to the per-model and McNemar rules: there one model is over 2.5 points, so two
// nights of a single flaky model would reach the floor.
struct DropRule {
  double floor_pts = 5.0;
  double confirm_pts = 2.5;
  size_t window = 7;
  size_t min_history = 3;  // fewer prior sweeps: no median worth the name, never fires
  int64_t min_models = 40;
};

struct DropVerdict {
  bool fired = false;
  double median = 0;  // of the window (0 when there is no history)
  double drop = 0;    // median - tonight, points (positive: lower tonight)
};

// `history`: the group's pass rates in its prior sweeps, oldest first (only the last `window`
// are used; the last one is the night before). `models`: the group's size tonight.
DropVerdict CheckDrop(const std::vector<double>& history, double tonight, int64_t models,
                      const DropRule& rule = {});

// An alert's severity: "critical" when a class or task test (McNemar or drop) fired on a group
// holding its models, else "major" from 5 models or 2 classes, else "warning".
const char* AlertSeverity(int64_t models, int64_t classes, bool group_test_fired);

// The median of `v` (the mean of the middle two for an even count); 0 for none.
double Median(std::vector<double> v);

}  // namespace ts::query
