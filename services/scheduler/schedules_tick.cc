// The ticker's schedule step: due schedules are started on the database pool, one task at a
// time per scheduler. Several schedulers on one database each run it; the store's row locks
// make each due time start once (services/store/schedules.cc).
#include <cstdio>

#include "services/scheduler/scheduler_impl.h"

namespace ts::scheduler {

void Scheduler::Impl::TickSchedules() {
  if (scheduling.exchange(true)) return;
  const auto now = WallNow();
  const bool queued = pool->Submit([this, now](store::Store* s) {
    if (s) {
      auto t = s->StartDueSchedules(now);
      if (t.ok()) {
        if (t->started > 0) QueueMayHaveWork();
        metrics.schedule_runs.Add({{"outcome", "started"}}).Increment(t->started);
        metrics.schedule_runs.Add({{"outcome", "skipped"}}).Increment(t->skipped);
        metrics.schedule_runs.Add({{"outcome", "failed"}}).Increment(t->failed);
        if (t->started + t->skipped + t->failed > 0) {
          std::fprintf(stderr,
                       "touchstone-scheduler: schedules: %d started, %d skipped, %d failed\n",
                       t->started, t->skipped, t->failed);
        }
      }
    }
    scheduling = false;
  });
  if (!queued) scheduling = false;
}

}  // namespace ts::scheduler
