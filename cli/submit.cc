// `touchstone submit` (commands.h): a sweep on a running fleet (issue 13), what a CI job calls.
// Creates the sweep on a running scheduler (admin token), optionally follows it with the
// progress line, prints the per-task table and, with --gate, exits by the gate's verdict.
#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/gate_rules.h"
#include "cli/profile_file.h"
#include "cli/sweep_catalog.h"
#include "cli/usage.h"
#include "services/cluster/sweep_driver.h"
#include "services/common/grpc_status.h"
#include "services/query/text_tables.h"
#include "touchstone/v1/query.grpc.pb.h"

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;

struct SubmitFlags {
  ClientFlags client;
  std::string profile;
  int64_t sample = 1000;  // 0: all
  std::string baseline;   // "", "latest" or an id
  std::string name;
  bool wait = false;
  std::string gate;
  std::string catalog;
  uint64_t seed = 0;
  std::vector<std::string> modes;
  int64_t priority = 0;
  bool audit_ops = true;
  int64_t shard_models = 0;  // 0: the scheduler's default (32)
};

// The newest done sweep of the profile name; NOT_FOUND when there is none.
absl::StatusOr<int64_t> LatestDone(const Connection& conn, const std::string& profile) {
  auto stub = pb::Query::NewStub(conn.channel);
  pb::ListSweepsRequest req;
  req.set_profile(profile);
  req.set_state("done");
  req.set_page_size(1);
  pb::ListSweepsResponse resp;
  grpc::Status st = stub->ListSweeps(conn.Context().get(), req, &resp);
  if (!st.ok()) return common::FromGrpcStatus(st);
  if (resp.sweeps().empty()) {
    return absl::NotFoundError("--baseline latest: no done sweep of profile '" + profile + "'");
  }
  return resp.sweeps(0).sweep_id();
}

// Follows the sweep, prints its table, and runs the gate. Returns the exit code.
int WaitAndReport(const SubmitFlags& o, const Connection& conn, cluster::SweepDriver* driver,
                  int64_t sweep_id, int64_t baseline) {
  auto followed = driver->Follow(sweep_id, {});
  if (!followed.ok()) return RpcFailed("GetSweep", followed.status());
  const pb::SweepProgress& p = followed->progress;
  if (p.state() != "done") {
    std::fprintf(stderr, "touchstone submit: sweep %lld ended %s\n",
                 static_cast<long long>(sweep_id), p.state().c_str());
    return 1;
  }
  auto table = driver->Table(sweep_id);
  if (!table.ok()) return RpcFailed("GetSummary", table.status());
  std::printf("%s", query::FormatSummary(*table).c_str());
  std::printf("sweep %lld: %lld/%lld models recorded, %lld duplicates, %.1f s\n",
              static_cast<long long>(sweep_id), static_cast<long long>(p.models_recorded()),
              static_cast<long long>(p.models_expected()), static_cast<long long>(p.duplicates()),
              followed->sweep_s);
  if (baseline > 0) {
    std::printf("new failures vs sweep %lld: %lld deterministic, %lld flaky\n",
                static_cast<long long>(baseline),
                static_cast<long long>(p.confirmed_deterministic()),
                static_cast<long long>(p.confirmed_flaky()));
  }
  std::fflush(stdout);
  if (o.gate.empty()) return 0;
  std::ifstream in(o.gate);
  std::stringstream ss;
  ss << in.rdbuf();
  auto rules = ParseGateRules(ss.str());
  if (!rules.ok()) return Usage("--gate " + o.gate + ": " + std::string(rules.status().message()));
  pb::GateRequest req;
  req.set_sweep_id(sweep_id);
  *req.mutable_rules() = *rules;
  pb::GateResponse resp;
  grpc::Status st = pb::Query::NewStub(conn.channel)->Gate(conn.Context().get(), req, &resp);
  if (!st.ok()) return RpcFailed("Gate", st);
  std::printf("%s", query::FormatGate(resp).c_str());
  return resp.pass() ? 0 : 1;
}

int Submit(const SubmitFlags& o) {
  ClientFlags client = o.client;
  client.admin = true;
  pb::CreateSweepRequest create;
  ProfileFile profile;
  if (int rc = ReadProfileFile(o.profile, &profile); rc != 0) return rc;
  create.mutable_profile()->set_name(profile.info.name);
  create.mutable_profile()->set_body(profile.text);
  if (!o.gate.empty()) {
    // The rules are checked before anything is created.
    std::ifstream in(o.gate);
    if (!in) return Usage("--gate: cannot read " + o.gate);
    std::stringstream ss;
    ss << in.rdbuf();
    if (auto r = ParseGateRules(ss.str()); !r.ok()) {
      return Usage("--gate " + o.gate + ": " + std::string(r.status().message()));
    }
  }
  auto conn = Connect(client);
  if (!conn.ok()) return Usage(std::string(conn.status().message()));
  auto driver = cluster::SweepDriver::Connect({client.scheduler, conn->token, client.tls_ca});
  if (!driver.ok()) return Usage(std::string(driver.status().message()));

  int64_t baseline = 0;
  if (o.baseline == "latest") {
    auto b = LatestDone(*conn, create.profile().name());
    if (b.status().code() == absl::StatusCode::kNotFound) {
      // The first sweep of a profile (a new nightly series) has nothing to compare with.
      std::fprintf(stderr, "touchstone submit: %s; no baseline\n",
                   std::string(b.status().message()).c_str());
    } else if (!b.ok()) {
      return RpcFailed("ListSweeps", b.status());
    } else {
      baseline = *b;
    }
  } else if (!o.baseline.empty()) {
    ParseNonNegative(o.baseline, &baseline);
  }
  if (!o.catalog.empty()) {
    auto path = SweepCatalogPath(o.catalog, "", DefaultDataDir());
    if (!path.ok()) return Fail(std::string(path.status().message()));
    auto sample = SampleCatalog(*path, o.sample, o.seed);
    if (!sample.ok()) return Usage("--catalog: " + std::string(sample.status().message()));
    if (absl::Status st = UploadRows(*path, sample->lines, driver->get(), &create); !st.ok()) {
      return RpcFailed("UpsertModels", st);
    }
  } else {
    create.set_sample(o.sample);
  }
  create.set_name(!o.name.empty() ? o.name
                                  : (o.sample > 0 ? "sample-" + std::to_string(o.sample) : "full"));
  create.set_seed(o.seed);
  for (const auto& m : o.modes) create.add_modes(m);
  create.set_priority(static_cast<int32_t>(o.priority));
  create.set_baseline_sweep_id(baseline);
  create.set_audit_ops(o.audit_ops);
  create.set_shard_max_models(static_cast<int32_t>(o.shard_models));
  auto created = (*driver)->CreateSweep(create);
  if (!created.ok()) return RpcFailed("CreateSweep", created.status());
  std::fprintf(stderr, "touchstone submit: sweep %lld: %lld models in %lld shards, profile %s%s\n",
               static_cast<long long>(created->sweep_id()),
               static_cast<long long>(created->models()), static_cast<long long>(created->shards()),
               create.profile().name().c_str(),
               baseline > 0 ? (", baseline " + std::to_string(baseline)).c_str() : "");
  if (!o.wait && o.gate.empty()) {  // --gate implies --wait
    std::printf("%lld\n", static_cast<long long>(created->sweep_id()));
    return 0;
  }
  return WaitAndReport(o, *conn, driver->get(), created->sweep_id(), baseline);
}

}  // namespace

void AddSubmitCommand(flags::Command& root) {
  auto f = std::make_shared<SubmitFlags>();
  flags::Command& c =
      root.Add("submit", "a sweep on a running fleet (admin token): what a CI job calls",
               [f] { return Submit(*f); });
  c.Option("--profile", &f->profile, "FILE", "the device profile").Required().File();
  c.Option("--sample", &f->sample, "N|all", "models, stratified (all: the whole catalog)")
      .Check(CountOrAll);
  c.Option("--baseline", &f->baseline, "latest|ID",
           "compare with this sweep; latest: the newest done sweep of the same profile name")
      .Check([](std::string& v) -> std::string {
        int64_t id = 0;
        if (v == "latest" || (ParseNonNegative(v, &id) && id > 0)) return "";
        return "expected 'latest' or a sweep id, got '" + v + "'";
      });
  c.Option("--name", &f->name, "NAME", "the sweep's name (default: sample-N or full)");
  c.Flag("--wait", &f->wait, "follow it: the progress line, then the per-task table");
  c.Option("--gate", &f->gate, "RULES", "then the release gate's report (implies --wait)").File();
  c.Option("--catalog", &f->catalog, "FILE",
           "load the file's sampled rows first (default: the scheduler samples its stored "
           "catalog)")
      .File();
  c.Option("--seed", &f->seed, "N", "the sample's and the models' seed");
  c.Option("--modes", &f->modes, "MODES", "eager,compile,train (default: every mode)")
      .Split(',')
      .Choices(ModeNames());
  c.Option("--priority", &f->priority, "N", "higher is leased first").Range(0, 1000000);
  c.Flag("--no-audit-ops", &f->audit_ops, "no op-by-op replay of passing modes", false);
  c.Option("--shard-models", &f->shard_models, "N", "models per shard (default: the scheduler's)")
      .Range(1, 10000)
      .Default("");
  AddClientFlags(c, &f->client, /*format=*/false);
  c.Notes(
      "Without --wait prints the sweep id.\n"
      "exit: 0 done (gate: pass), 1 gate failed or the sweep ended other than done, 2 usage or\n"
      "refused, 3 no answer");
}

}  // namespace ts::cli
