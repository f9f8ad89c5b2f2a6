#include "services/scheduler/alert_delivery.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "proto/names.h"
#include "services/common/http_server.h"

namespace ts::scheduler {

namespace {

namespace pb = ::touchstone::v1;
using google::protobuf::util::TimeUtil;

constexpr int kMaxModelsListed = 20;

template <typename List, typename Fn>
std::string Join(const List& list, Fn item, int max) {
  std::string out;
  int n = 0;
  for (const auto& x : list) {
    if (n++ == max) {
      out += ", ...";
      break;
    }
    out += (out.empty() ? "" : ", ") + item(x);
  }
  return out;
}

}  // namespace

std::string AlertmanagerJson(const std::vector<pb::Alert>& alerts,
                             const std::string& dashboard_url) {
  nlohmann::json out = nlohmann::json::array();
  for (const pb::Alert& a : alerts) {
    const auto same = [](const std::string& s) { return s; };
    const std::string modes = Join(
        a.modes(), [](int m) { return proto::ModeName(static_cast<pb::Mode>(m)); }, 3);
    nlohmann::json labels = {{"alertname", "TouchstoneRegression"},
                             {"alert_id", std::to_string(a.alert_id())},
                             {"severity", a.severity()},
                             {"line", a.line()},
                             {"cause_kind", a.cause_kind()},
                             {"signature", a.cause()},
                             {"task", Join(a.tasks(), same, 1000)},
                             {"arch", Join(a.archs(), same, 1000)},
                             {"kind", a.kind().empty() ? std::string("accuracy") : a.kind()}};
    if (!a.op().empty()) labels["op"] = a.op();
    // A label names the alert in Alertmanager, so it never changes over the alert's life: the
    // mode of a per-mode alert is one; an alert across modes (a suspect op) has none, and the
    // modes it broke, which may grow, are an annotation.
    if (a.mode() != pb::MODE_UNSPECIFIED) labels["mode"] = proto::ModeName(a.mode());
    const std::string summary = std::to_string(a.models_size()) + " model(s) regressed in " +
                                modes + " on " + a.line() + " since sweep " +
                                std::to_string(a.first_sweep_id()) + ": " + a.cause_kind() + " " +
                                a.cause_text();
    nlohmann::json annotations = {
        {"summary", summary},
        {"modes", modes},
        {"models",
         Join(
             a.models(), [](const pb::AlertModel& m) { return m.model_id(); }, kMaxModelsListed)}};
    nlohmann::json alert = {{"labels", labels},
                            {"annotations", annotations},
                            {"startsAt", TimeUtil::ToString(a.created_at())}};
    if (!dashboard_url.empty() && a.models_size() > 0) {
      const std::string link = dashboard_url + "/model/" + a.models(0).model_id();
      alert["annotations"]["link"] = link;
      alert["generatorURL"] = link;
    }
    if (a.state() == "resolved") alert["endsAt"] = TimeUtil::ToString(a.updated_at());
    out.push_back(std::move(alert));
  }
  return out.dump();
}

absl::StatusOr<std::unique_ptr<AlertDelivery>> AlertDelivery::Create(
    const AlertmanagerOptions& opts) {
  const std::string scheme = "http://";
  if (opts.url.rfind(scheme, 0) != 0) {
    return absl::InvalidArgumentError("alertmanager: '" + opts.url +
                                      "' is not http://host:port[/prefix]");
  }
  std::unique_ptr<AlertDelivery> d(new AlertDelivery(opts));
  std::string rest = opts.url.substr(scheme.size());
  const size_t slash = rest.find('/');
  std::string prefix = slash == std::string::npos ? "" : rest.substr(slash);
  if (slash != std::string::npos) rest = rest.substr(0, slash);
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  const size_t colon = rest.rfind(':');
  d->host_ = rest.substr(0, colon);
  if (colon != std::string::npos) {
    const std::string port = rest.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(port) < 1 || std::stoi(port) > 65535) {
      return absl::InvalidArgumentError("alertmanager: bad port in '" + opts.url + "'");
    }
    d->port_ = std::stoi(port);
  }
  if (d->host_.empty()) return absl::InvalidArgumentError("alertmanager: no host in " + opts.url);
  d->path_ = prefix + "/api/v2/alerts";
  return d;
}

absl::Status AlertDelivery::Round(store::Store& s, Clock::time_point now) {
  if (now < next_attempt_) return absl::OkStatus();
  auto batch = s.AlertsToDeliver();
  if (!batch.ok()) return batch.status();
  if (batch->alerts.empty() || (batch->changed == 0 && now < next_resend_)) {
    return absl::OkStatus();
  }
  common::HttpRequestSpec spec;
  spec.host = host_;
  spec.port = port_;
  spec.method = "POST";
  spec.path = path_;
  spec.body = AlertmanagerJson(batch->alerts, opts_.dashboard_url);
  spec.timeout_s = opts_.timeout_s;
  auto res = common::HttpRequest(spec);
  absl::Status st = res.ok() ? absl::OkStatus() : res.status();
  if (res.ok() && (res->status < 200 || res->status > 299)) {
    st = absl::UnavailableError("alertmanager: POST " + path_ + " answered " +
                                std::to_string(res->status) + ": " + res->body.substr(0, 200));
  }
  if (!st.ok()) {
    backoff_s_ = std::clamp(backoff_s_ * 2, opts_.retry_min_s, opts_.retry_max_s);
    next_attempt_ = now + std::chrono::duration_cast<Clock::duration>(
                              std::chrono::duration<double>(backoff_s_));
    std::fprintf(stderr, "touchstone-scheduler: alert delivery failed (retry in %.1f s): %s\n",
                 backoff_s_, std::string(st.message()).c_str());
    return st;
  }
  backoff_s_ = 0;
  next_resend_ = now + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(opts_.resend_s));
  ++delivered_;
  return s.MarkAlertsDelivered(batch->alerts);
}

}  // namespace ts::scheduler
