// Alertmanager delivery (issue 11): the scheduler posts its alerts to Prometheus Alertmanager's
// v2 API (POST /api/v2/alerts, a JSON array of postable alerts) from its ticker, on the query
// pool, so a slow or absent Alertmanager never holds up a report or a lease.
//
// What is sent: every unresolved alert (firing: no endsAt), and each resolved alert whose
// resolution was not delivered yet (endsAt = when it was resolved). Labels: alertname
// (TouchstoneRegression), alert_id, severity, mode (a per-mode alert's; none on an alert across
// modes, a suspect op's), line, cause_kind, signature (the cause: op, error signature or
// status), task and arch (its tasks and classes, comma-separated). Annotations: summary, modes
// (the modes its cause broke, comma-separated), models (up to 20, comma-separated), link (the
// dashboard's model page of its first model). When: at once when an alert changed since its last delivery, and every
// `resend_s` otherwise (Alertmanager resolves a firing alert that is not re-sent within its
// resolve_timeout, 5 minutes by default). A failed post (no connection, a non-2xx answer) is
// retried with exponential backoff from retry_min_s to retry_max_s; what was not delivered
// stays marked so (alerts.delivered_at), so a scheduler restart delivers it too.
//
// Thread-safety: Round is called by one thread at a time (the scheduler's `delivering` flag).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "services/store/store.h"
#include "touchstone/v1/query.pb.h"

namespace ts::scheduler {

struct AlertmanagerOptions {
  std::string url;            // http://host:port (no TLS; a path prefix is kept)
  std::string dashboard_url;  // base of the link annotation; empty: no link
  double resend_s = 60;
  double retry_min_s = 1;
  double retry_max_s = 60;
  double timeout_s = 5;  // per post
};

// The Alertmanager v2 JSON array for `alerts`.
std::string AlertmanagerJson(const std::vector<touchstone::v1::Alert>& alerts,
                             const std::string& dashboard_url);

class AlertDelivery {
 public:
  using Clock = std::chrono::steady_clock;
  // INVALID_ARGUMENT "alertmanager: ..." for a URL that is not http://host:port[/prefix].
  static absl::StatusOr<std::unique_ptr<AlertDelivery>> Create(const AlertmanagerOptions& opts);

  // One delivery round: reads what to send, posts it when due, marks it delivered. OK when
  // nothing was due; UNAVAILABLE (and a backoff) when the post failed.
  absl::Status Round(store::Store& s, Clock::time_point now);

  int64_t delivered() const { return delivered_; }  // successful posts

 private:
  explicit AlertDelivery(const AlertmanagerOptions& opts) : opts_(opts) {}
  AlertmanagerOptions opts_;
  std::string host_, path_;
  int port_ = 80;
  Clock::time_point next_resend_{};   // the next periodic resend
  Clock::time_point next_attempt_{};  // no post before this (backoff)
  double backoff_s_ = 0;
  int64_t delivered_ = 0;
};

}  // namespace ts::scheduler
