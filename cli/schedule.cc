// `touchstone schedule add|list|rm|enable|disable` (cli/submit.h).
#include <google/protobuf/util/json_util.h>
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/client.h"
#include "cli/submit.h"
#include "cli/usage.h"
#include "touchstone/v1/scheduler.grpc.pb.h"
#include "workers/simdevice/profile.h"

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;

constexpr CommandText kSchedule = {
    "touchstone", "touchstone schedule",
    "usage: touchstone schedule add NAME --cron 'MIN HOUR DOM MON DOW' --profile FILE\n"
    "                               [--sample N|all] [--baseline previous|none] [--seed N]\n"
    "                               [--priority N] [--modes eager,compile,train]\n"
    "                               [--task T]... [--family F]... [--arch A]... [--disabled]\n"
    "                               [--no-audit-ops]\n"
    "       touchstone schedule list\n"
    "       touchstone schedule rm|enable|disable NAME\n"
    "  every one takes: [--scheduler HOST:PORT] [--token-file FILE] [--tls-ca FILE]\n"
    "                   [--format json|text]   (admin token; cron specs are UTC)\n"};

int Rpc(const char* what, const grpc::Status& st) {
  std::fprintf(stderr, "touchstone: %s: %s: %s\n", what,
               absl::StatusCodeToString(static_cast<absl::StatusCode>(st.error_code())).c_str(),
               st.error_message().c_str());
  switch (st.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::ALREADY_EXISTS:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::PERMISSION_DENIED:
    case grpc::StatusCode::UNAUTHENTICATED:
      return 2;
    default:
      return 3;
  }
}

void Print(const pb::ListSchedulesResponse& list, bool json) {
  if (json) {
    google::protobuf::util::JsonPrintOptions o;
    o.add_whitespace = true;
    o.always_print_primitive_fields = true;
    std::string out;
    (void)google::protobuf::util::MessageToJsonString(list, &out, o);
    std::printf("%s\n", out.c_str());
    return;
  }
  std::printf("%-20s %-16s %-8s %-14s %-7s %-9s %-21s %s\n", "name", "cron", "enabled", "profile",
              "sample", "baseline", "next due (UTC)", "last run");
  for (const auto& s : list.schedules()) {
    std::string last = "-";
    if (!s.runs().empty()) {
      const auto& r = s.runs(0);
      last = r.due_at() + " " + r.outcome();
      if (r.sweep_id()) last += " sweep " + std::to_string(r.sweep_id());
      if (r.outcome() == "failed") last += ": " + r.detail();
    }
    std::printf("%-20s %-16s %-8s %-14s %-7s %-9s %-21s %s\n", s.name().c_str(), s.cron().c_str(),
                s.enabled() ? "yes" : "no", s.profile_name().c_str(),
                s.sample() ? std::to_string(s.sample()).c_str() : "all", s.baseline().c_str(),
                s.next_due().empty() ? "never" : s.next_due().c_str(), last.c_str());
  }
}

// `add NAME ...` into the request. Returns 0 or the exit code (printed).
int ParseAdd(const std::vector<std::string>& a, pb::AddScheduleRequest* r) {
  if (a.size() < 2 || a[1].rfind("--", 0) == 0) return Usage(kSchedule, "schedule add: NAME first");
  r->set_name(a[1]);
  pb::CreateSweepRequest* sw = r->mutable_sweep();
  sw->set_sample(1000);
  sw->set_audit_ops(true);
  std::string profile;
  for (size_t i = 2; i < a.size(); ++i) {
    const std::string& f = a[i];
    const bool has = i + 1 < a.size();
    int64_t v = 0;
    if (f == "--cron" && has) {
      r->set_cron(a[++i]);
    } else if (f == "--profile" && has) {
      profile = a[++i];
    } else if (f == "--sample" && has) {
      const std::string s = a[++i];
      if (s == "all") {
        sw->set_sample(0);
      } else if (!ParseNonNegative(s, &v) || v == 0) {
        return Usage(kSchedule, "--sample: a positive number or 'all'");
      } else {
        sw->set_sample(v);
      }
    } else if (f == "--baseline" && has) {
      r->set_baseline(a[++i]);
    } else if (f == "--seed" && has) {
      if (!ParseNonNegative(a[++i], &v)) return Usage(kSchedule, "--seed: not a number");
      sw->set_seed(static_cast<uint64_t>(v));
    } else if (f == "--priority" && has) {
      if (!ParseNonNegative(a[++i], &v) || v > 1000000) {
        return Usage(kSchedule, "--priority: 0..1000000");
      }
      sw->set_priority(static_cast<int32_t>(v));
    } else if (f == "--modes" && has) {
      std::stringstream ss(a[++i]);
      for (std::string m; std::getline(ss, m, ',');) sw->add_modes(m);
    } else if (f == "--task" && has) {
      sw->mutable_filter()->add_tasks(a[++i]);
    } else if (f == "--family" && has) {
      sw->mutable_filter()->add_families(a[++i]);
    } else if (f == "--arch" && has) {
      sw->mutable_filter()->add_archs(a[++i]);
    } else if (f == "--disabled") {
      r->set_disabled(true);
    } else if (f == "--no-audit-ops") {
      sw->set_audit_ops(false);
    } else {
      return Usage(kSchedule, "schedule add: unknown argument '" + f + "'");
    }
  }
  if (r->cron().empty()) return Usage(kSchedule, "schedule add: --cron SPEC is required");
  if (profile.empty()) return Usage(kSchedule, "schedule add: --profile FILE is required");
  std::ifstream in(profile);
  if (!in) return Usage(kSchedule, "--profile: cannot read " + profile);
  std::stringstream ss;
  ss << in.rdbuf();
  auto p = simdevice::ParseProfile(ss.str());
  if (!p.ok()) {
    std::fprintf(stderr, "touchstone: profile %s: %s\n", profile.c_str(),
                 std::string(p.status().message()).c_str());
    return 2;
  }
  sw->mutable_profile()->set_name(p->name);
  sw->mutable_profile()->set_body(ss.str());
  return 0;
}

}  // namespace

int ScheduleCommand(const std::vector<std::string>& args) {
  std::vector<std::string> a = args;
  auto flags = TakeClientFlags(&a);
  if (!flags.ok()) return Usage(kSchedule, std::string(flags.status().message()));
  flags->admin = true;
  if (a.empty()) return Usage(kSchedule, "schedule: expected add, list, rm, enable or disable");
  const std::string verb = a[0];
  pb::AddScheduleRequest add;
  if (verb == "add") {
    if (int rc = ParseAdd(a, &add); rc != 0) return rc;
  } else if (verb == "list") {
    if (a.size() != 1) return Usage(kSchedule, "schedule list: takes no argument");
  } else if (verb == "rm" || verb == "enable" || verb == "disable") {
    if (a.size() != 2) return Usage(kSchedule, "schedule " + verb + ": expected one NAME");
  } else {
    return Usage(kSchedule, "schedule: unknown verb '" + verb + "'");
  }
  auto conn = Connect(*flags);
  if (!conn.ok()) return Usage(kSchedule, std::string(conn.status().message()));
  auto stub = pb::Scheduler::NewStub(conn->channel);
  pb::ListSchedulesResponse shown;
  grpc::Status st;
  if (verb == "add") {
    st = stub->AddSchedule(conn->Context(300).get(), add, shown.add_schedules());
    if (!st.ok()) return Rpc("AddSchedule", st);
  } else if (verb == "list") {
    st = stub->ListSchedules(conn->Context().get(), pb::ListSchedulesRequest(), &shown);
    if (!st.ok()) return Rpc("ListSchedules", st);
  } else if (verb == "rm") {
    pb::RemoveScheduleRequest req;
    req.set_name(a[1]);
    pb::RemoveScheduleResponse resp;
    st = stub->RemoveSchedule(conn->Context().get(), req, &resp);
    if (!st.ok()) return Rpc("RemoveSchedule", st);
    std::printf("removed schedule %s\n", a[1].c_str());
    return 0;
  } else {
    pb::SetScheduleEnabledRequest req;
    req.set_name(a[1]);
    req.set_enabled(verb == "enable");
    st = stub->SetScheduleEnabled(conn->Context().get(), req, shown.add_schedules());
    if (!st.ok()) return Rpc("SetScheduleEnabled", st);
  }
  Print(shown, flags->json);
  return 0;
}

}  // namespace ts::cli
