// The scheduler's ticker: lease expiry, sweep summaries and detection, alert delivery, gauges.
#include <algorithm>

#include "services/scheduler/scheduler_impl.h"

namespace ts::scheduler {

void Scheduler::Impl::Tick(store::Store* s) {
  if (!s) {
    db_ok = false;
    leases_graced = false;
    metrics.db_up.Set(0);
    return;
  }
  const absl::StatusOr<store::ExpiryStats> e = TickLeases(s);
  TickOffTicker();
  TickSchedules();
  // Stored answers of idempotent calls: a retry comes within seconds; kept a day.
  if (last_forget == Clock::time_point() || Clock::now() - last_forget > std::chrono::minutes(10)) {
    if (s->ForgetOldRequests().ok()) last_forget = Clock::now();
  }
  TickQueue(s, e.ok());
  TickWorkers();
}

absl::StatusOr<store::ExpiryStats> Scheduler::Impl::TickLeases(store::Store* s) {
  // Start-up grace, also after the database was out: workers that kept running while nobody
  // answered get to heartbeat and report on their current token before any lease expires.
  if (!leases_graced) {
    auto g = s->ExtendLeases(GraceSeconds());
    if (g.ok()) {
      leases_graced = true;
      metrics.graced.Increment(static_cast<double>(*g));
    }
  }
  if (!leases_graced) return absl::UnavailableError("leases not yet graced");
  auto e = s->ExpireLeases();
  if (e.ok()) {
    if (e->expired + e->split > 0) QueueMayHaveWork();
    metrics.expired.Increment(e->expired);
    metrics.split.Increment(e->split);
    metrics.lost.Increment(e->lost);
    metrics.quarantined_workers.Increment(e->quarantined);
  }
  return e;
}

void Scheduler::Impl::TickOffTicker() {
  // A done sweep's kept answers take seconds on a large sweep: off the ticker (lease expiry
  // must not wait), one at a time, on the query pool.
  if (!summarizing.exchange(true) &&
      !query_pool->Submit([this](store::Store* q) {
        // A failure shows in db_ok. Detection after the summary: a sweep that just ended is
        // summarized by one tick and detected by the same one (or, if the summary failed,
        // detection keeps the answers itself).
        if (q) {
          (void)q->SummarizeDoneSweeps();
          (void)q->DetectDoneSweeps();
          SetRegressionGauges(*q);
          auto open = q->ListAlerts("open", 0, 100000);
          if (open.ok()) metrics.alerts_open.Set(static_cast<double>(open->size()));
        }
        summarizing = false;
      })) {
    summarizing = false;
  }
  // Alertmanager delivery: off the ticker too (a post may wait for its timeout).
  if (delivery && !delivering.exchange(true) &&
      !query_pool->Submit([this](store::Store* q) {
        if (q) (void)delivery->Round(*q, Clock::now());  // failures back off and are logged
        delivering = false;
      })) {
    delivering = false;
  }
}

void Scheduler::Impl::TickQueue(store::Store* s, bool leases_ok) {
  const uint64_t epoch = QueueEpoch();
  auto q = s->Queue();
  if (q.ok() && q->shards_queued == 0) QueueSeenEmpty(epoch);
  if (q.ok() && q->shards_queued > 0) WakeParked();  // queued here or by another scheduler
  db_ok = leases_ok && q.ok();
  if (!db_ok) leases_graced = false;
  metrics.db_up.Set(db_ok ? 1 : 0);
  server->GetHealthCheckService()->SetServingStatus(db_ok);
  if (!q.ok()) return;
  metrics.shards_queued.Set(static_cast<double>(q->shards_queued));
  metrics.shards_leased.Set(static_cast<double>(q->shards_leased));
  metrics.jobs_pending.Set(static_cast<double>(q->jobs_pending));
  metrics.sweeps_running.Set(static_cast<double>(q->sweeps_running));
  metrics.workers_quarantined.Set(static_cast<double>(q->workers_quarantined));
}

void Scheduler::Impl::TickWorkers() {
  std::lock_guard<std::mutex> l(mu);
  const auto horizon = std::chrono::duration<double>(3 * opts.lease_ttl_s);
  int alive = 0;
  for (auto it = workers_seen.begin(); it != workers_seen.end();) {
    if (Clock::now() - it->second > horizon) {
      idle_workers.erase(it->first);
      it = workers_seen.erase(it);
    } else {
      ++alive;
      ++it;
    }
  }
  metrics.workers_alive.Set(alive);
}

void Scheduler::Impl::SetRegressionGauges(store::Store& q) {
  auto open = q.OpenRegressionsByTask();
  if (!open.ok()) return;  // kept as they were; db_up says why
  std::set<std::pair<std::string, std::string>> now;
  for (const auto& o : *open) {
    now.insert({o.task, o.severity});
    metrics.open_regressions.Add({{"task", o.task}, {"severity", o.severity}})
        .Set(static_cast<double>(o.alerts));
  }
  for (const auto& [task, severity] : regression_labels) {
    if (!now.count({task, severity})) {
      metrics.open_regressions.Add({{"task", task}, {"severity", severity}}).Set(0);
    }
  }
  regression_labels.insert(now.begin(), now.end());
  auto quarantined = q.ListQuarantine();
  if (quarantined.ok()) metrics.quarantined.Set(static_cast<double>(quarantined->size()));
}

void Scheduler::Impl::TickLoop() {
  const double tick = TickSeconds();
  std::unique_ptr<store::Store> s;
  std::unique_lock<std::mutex> l(tick_mu);
  while (!stopping) {
    l.unlock();
    if (!s) {
      auto c = store::Store::Connect(store_opts);
      if (c.ok()) s = std::move(*c);
    }
    Tick(s.get());
    EndParked(/*closing=*/false);  // also while the database is out
    l.lock();
    tick_cv.wait_for(l, std::chrono::duration<double>(tick), [&] { return stopping; });
  }
}

}  // namespace ts::scheduler
