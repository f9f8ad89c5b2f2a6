// `touchstone schedule add | list | rm | enable | disable` (commands.h): the schedulers' cron
// schedules through the Scheduler's schedule RPCs (admin token).
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/profile_file.h"
#include "cli/query_text.h"
#include "cli/usage.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;

void Print(const pb::ListSchedulesResponse& list, bool json) {
  if (json) {
    std::printf("%s\n", MessageJson(list).c_str());
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

// Connects with the admin token and runs `call` on the Scheduler stub; prints what it filled.
int WithScheduler(ClientFlags client,
                  const std::function<grpc::Status(pb::Scheduler::Stub&, const Connection&,
                                                   pb::ListSchedulesResponse*)>& call,
                  const char* method) {
  client.admin = true;
  auto conn = Connect(client);
  if (!conn.ok()) return Usage(std::string(conn.status().message()));
  auto stub = pb::Scheduler::NewStub(conn->channel);
  pb::ListSchedulesResponse shown;
  grpc::Status st = call(*stub, *conn, &shown);
  if (!st.ok()) return RpcFailed(method, st);
  Print(shown, client.json());
  return 0;
}

struct AddFlags {
  ClientFlags client;
  pb::AddScheduleRequest req;
  std::string profile;
  int64_t sample = 1000;  // 0: all
  uint64_t seed = 0;
  int64_t priority = 0;
  std::vector<std::string> modes, tasks, families, archs;
  bool audit_ops = true;
  bool disabled = false;
};

int Add(const AddFlags& f) {
  pb::AddScheduleRequest req = f.req;
  pb::CreateSweepRequest* sw = req.mutable_sweep();
  sw->set_sample(f.sample);
  sw->set_seed(f.seed);
  sw->set_priority(static_cast<int32_t>(f.priority));
  sw->set_audit_ops(f.audit_ops);
  req.set_disabled(f.disabled);
  for (const auto& m : f.modes) sw->add_modes(m);
  for (const auto& t : f.tasks) sw->mutable_filter()->add_tasks(t);
  for (const auto& x : f.families) sw->mutable_filter()->add_families(x);
  for (const auto& x : f.archs) sw->mutable_filter()->add_archs(x);
  ProfileFile profile;
  if (int rc = ReadProfileFile(f.profile, &profile); rc != 0) return rc;
  sw->mutable_profile()->set_name(profile.info.name);
  sw->mutable_profile()->set_body(profile.text);
  return WithScheduler(
      f.client,
      [&req](pb::Scheduler::Stub& stub, const Connection& conn, pb::ListSchedulesResponse* shown) {
        return stub.AddSchedule(conn.Context(300).get(), req, shown->add_schedules());
      },
      "AddSchedule");
}

struct NameFlags {
  ClientFlags client;
  std::string name;
};

int Remove(const NameFlags& f) {
  ClientFlags client = f.client;
  client.admin = true;
  auto conn = Connect(client);
  if (!conn.ok()) return Usage(std::string(conn.status().message()));
  pb::RemoveScheduleRequest req;
  req.set_name(f.name);
  pb::RemoveScheduleResponse resp;
  grpc::Status st =
      pb::Scheduler::NewStub(conn->channel)->RemoveSchedule(conn->Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("RemoveSchedule", st);
  std::printf("removed schedule %s\n", f.name.c_str());
  return 0;
}

int SetEnabled(const NameFlags& f, bool enabled) {
  pb::SetScheduleEnabledRequest req;
  req.set_name(f.name);
  req.set_enabled(enabled);
  return WithScheduler(
      f.client,
      [&req](pb::Scheduler::Stub& stub, const Connection& conn, pb::ListSchedulesResponse* shown) {
        return stub.SetScheduleEnabled(conn.Context().get(), req, shown->add_schedules());
      },
      "SetScheduleEnabled");
}

void AddAddCommand(flags::Command& schedule) {
  auto f = std::make_shared<AddFlags>();
  flags::Command& c = schedule.Add(
      "add",
      "a schedule: each due time starts one sweep of the stored catalog (or records a skip "
      "while its previous sweep runs)",
      [f] { return Add(*f); });
  c.Positional("NAME", f->req.mutable_name(), "unique: [A-Za-z0-9._-]{1,64}").Required();
  c.Option("--cron", f->req.mutable_cron(), "'M H DOM MON DOW'", "when, in UTC ('0 2 * * *')")
      .Required();
  c.Option("--profile", &f->profile, "FILE", "the device profile").Required().File();
  c.Option("--sample", &f->sample, "N|all", "models, stratified (all: the whole catalog)")
      .Check(CountOrAll);
  c.Option("--baseline", f->req.mutable_baseline(), "previous|none",
           "previous: the newest done sweep of this schedule")
      .Choices({"previous", "none"})
      .Default("previous");
  c.Option("--seed", &f->seed, "N", "the sample's and the models' seed");
  c.Option("--priority", &f->priority, "N", "higher is leased first").Range(0, 1000000);
  c.Option("--modes", &f->modes, "MODES", "eager,compile,train (default: every mode)")
      .Split(',')
      .Choices(ModeNames());
  c.Option("--task", &f->tasks, "T", "only this task");
  c.Option("--family", &f->families, "F", "only this family");
  c.Option("--arch", &f->archs, "A", "only this class");
  c.Flag("--disabled", &f->disabled, "add it disabled");
  c.Flag("--no-audit-ops", &f->audit_ops, "no op-by-op replay of passing modes", false);
  AddClientFlags(c, &f->client);
}

}  // namespace

void AddScheduleCommands(flags::Command& root) {
  flags::Command& schedule =
      root.Group("schedule", "the schedulers' cron schedules (UTC): nightly sweeps (admin token)");
  schedule.Notes("exit: 0 done, 2 usage or refused (the message names the field), 3 no answer");
  AddAddCommand(schedule);

  auto list = std::make_shared<ClientFlags>();
  flags::Command& l =
      schedule.Add("list", "the schedules, their next due time and last run", [list] {
        return WithScheduler(
            *list,
            [](pb::Scheduler::Stub& stub, const Connection& conn,
               pb::ListSchedulesResponse* shown) {
              return stub.ListSchedules(conn.Context().get(), pb::ListSchedulesRequest(), shown);
            },
            "ListSchedules");
      });
  AddClientFlags(l, list.get());

  auto rm = std::make_shared<NameFlags>();
  flags::Command& r = schedule.Add("rm", "remove a schedule", [rm] { return Remove(*rm); });
  r.Positional("NAME", &rm->name, "the schedule").Required();
  AddClientFlags(r, &rm->client);

  for (const bool enabled : {true, false}) {
    auto f = std::make_shared<NameFlags>();
    flags::Command& c = schedule.Add(
        enabled ? "enable" : "disable",
        enabled ? "start a schedule's sweeps again" : "stop a schedule's sweeps (kept)",
        [f, enabled] { return SetEnabled(*f, enabled); });
    c.Positional("NAME", &f->name, "the schedule").Required();
    AddClientFlags(c, &f->client);
  }
}

}  // namespace ts::cli
