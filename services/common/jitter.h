// Randomised waits, so that processes started together do not stay in step. A fleet of workers
// that came up (or lost the scheduler) at the same moment would otherwise poll and retry in the
// same millisecond for ever, and every poll would be a burst of simultaneous calls.
//
// Thread-safety: both functions are thread-safe (each thread draws from its own generator).
#pragma once

namespace ts::common {

// A duration drawn uniformly from [seconds * (1 - spread), seconds * (1 + spread)];
// spread is clamped to [0, 1]. Jittered(0.5, 0.5) is 0.25..0.75 s.
double Jittered(double seconds, double spread);

// The wait before retry number `attempt` (0-based) of exponential backoff from `base` capped
// at `cap`, with "equal jitter": half the step fixed, half drawn uniformly, so waits never
// collapse to zero and retries of many callers spread over half the step.
double BackoffWithJitter(int attempt, double base, double cap);

}  // namespace ts::common
