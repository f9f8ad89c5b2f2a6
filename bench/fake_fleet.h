// scheduler_bench's fake fleet: worker threads that register, lease and report over their own
// gRPC channels as touchstone-worker does (a long poll or a jittered wait while the queue is
// empty, the first retry backoff after a reconnect), with realistic results (3 modes, ~28 ops, a
// 5-step loss curve), timing each call.
//
// Thread-safety: one FleetRun shared by every FakeWorker thread (its vectors under mu, the rest
// atomic); FakeResult keeps thread-local templates.
#pragma once

#include <atomic>
#include <barrier>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "touchstone/v1/scheduler.pb.h"

namespace ts::bench {

using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d);

// What a real worker sends for `j`: three modes (every 17th job fails accuracy), ~28 ops, a
// 5-step loss curve; built once per thread and stamped with the job's ids.
touchstone::v1::ModelResult FakeResult(const touchstone::v1::Job& j);

struct FleetOptions {
  int long_poll_ms = 0;          // the idle fleet's LeaseShard wait_ms; 0: jittered waits
  bool separate_finish = false;  // FinishShard after the last report, not finish=true
  int hold_first_ms = 0;         // each worker holds its first shard this long before reporting
  bool reconnect = false;        // the first call waits touchstone-worker's first retry backoff
};

// What the fake workers share: the start signal and the latencies they measured.
struct FleetRun {
  std::mutex mu;
  std::vector<double> register_ms, lease_ms, later_lease_ms, report_ms, finish_ms;  // under mu
  std::atomic<int64_t> results{0};
  std::atomic<bool> started{false};      // the sweep's shards can be leased; t0 is set
  std::atomic<Clock::rep> create_at{0};  // when the sweep's creation began (long polls)
  std::atomic<int64_t> idle_calls{0};    // LeaseShard calls made before the sweep
  Clock::time_point t0;
};

// Burst: the clock starts when the last fake worker has registered.
struct StartClock {
  FleetRun* run;
  bool burst;
  void operator()() noexcept {
    if (!burst) return;
    run->t0 = Clock::now();
    run->started = true;
  }
};
using Registered = std::barrier<StartClock>;

// One fake worker on `target`: registers (before the clock starts), waits for the others at
// `registered`, then leases and reports until the sweep's queue runs dry.
void FakeWorker(const FleetOptions& o, const std::string& target, int w, Registered& registered,
                FleetRun& run);

}  // namespace ts::bench
