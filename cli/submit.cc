#include "cli/submit.h"

#include <grpcpp/grpcpp.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "cli/client.h"
#include "cli/gate_rules.h"
#include "cli/sweep_catalog.h"
#include "cli/usage.h"
#include "services/cluster/sweep_driver.h"
#include "services/query/text_tables.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "workers/simdevice/profile.h"

namespace ts::cli {
namespace {

namespace pb = ::touchstone::v1;

constexpr CommandText kSubmit = {
    "touchstone", "touchstone submit",
    "usage: touchstone submit --profile FILE [--sample N|all] [--baseline latest|ID]\n"
    "                         [--name NAME] [--wait] [--gate RULES] [--catalog FILE]\n"
    "                         [--seed N] [--modes eager,compile,train] [--priority N]\n"
    "                         [--no-audit-ops] [--shard-models N]\n"
    "                         [--scheduler HOST:PORT] [--token-file FILE] [--tls-ca FILE]\n"
    "  creates a sweep on a running scheduler (admin token). Without --catalog the scheduler\n"
    "  samples its stored catalog; with it, the file's sampled rows are loaded first.\n"
    "  --baseline latest: the newest done sweep of the same profile name. --gate implies --wait.\n"
    "  exit: 0 done (gate: pass), 1 gate failed or sweep not done, 2 usage or refused, 3 no "
    "answer\n"};

struct SubmitFlags {
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

int ParseSubmitFlags(const std::vector<std::string>& args, SubmitFlags* o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has = i + 1 < args.size();
    int64_t v = 0;
    if (a == "--profile" && has) {
      o->profile = args[++i];
    } else if (a == "--sample" && has) {
      const std::string s = args[++i];
      if (s == "all") {
        o->sample = 0;
      } else if (!ParseNonNegative(s, &o->sample) || o->sample == 0) {
        return Usage(kSubmit, "--sample: a positive number or 'all'");
      }
    } else if (a == "--baseline" && has) {
      o->baseline = args[++i];
      if (o->baseline != "latest" && (!ParseNonNegative(o->baseline, &v) || v == 0)) {
        return Usage(kSubmit, "--baseline: 'latest' or a sweep id, got '" + o->baseline + "'");
      }
    } else if (a == "--name" && has) {
      o->name = args[++i];
    } else if (a == "--wait") {
      o->wait = true;
    } else if (a == "--gate" && has) {
      o->gate = args[++i];
      o->wait = true;
    } else if (a == "--catalog" && has) {
      o->catalog = args[++i];
    } else if (a == "--seed" && has) {
      if (!ParseNonNegative(args[++i], &v)) return Usage(kSubmit, "--seed: not a number");
      o->seed = static_cast<uint64_t>(v);
    } else if (a == "--modes" && has) {
      std::stringstream ss(args[++i]);
      for (std::string m; std::getline(ss, m, ',');) o->modes.push_back(m);
    } else if (a == "--priority" && has) {
      if (!ParseNonNegative(args[++i], &o->priority) || o->priority > 1000000) {
        return Usage(kSubmit, "--priority: 0..1000000");
      }
    } else if (a == "--no-audit-ops") {
      o->audit_ops = false;
    } else if (a == "--shard-models" && has) {
      if (!ParseNonNegative(args[++i], &o->shard_models) || o->shard_models < 1 ||
          o->shard_models > 10000) {
        return Usage(kSubmit, "--shard-models: 1..10000");
      }
    } else {
      return Usage(kSubmit, "submit: unknown argument '" + a + "'");
    }
  }
  if (o->profile.empty()) return Usage(kSubmit, "submit: --profile FILE is required");
  return 0;
}

// The profile file, checked field by field: its name and text. Returns 0 or the exit code.
int ReadProfile(const CommandText& cmd, const std::string& path, pb::Profile* out) {
  std::ifstream in(path);
  if (!in) return Usage(cmd, "--profile: cannot read " + path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto p = simdevice::ParseProfile(ss.str());
  if (!p.ok()) {
    std::fprintf(stderr, "touchstone: profile %s: %s\n", path.c_str(),
                 std::string(p.status().message()).c_str());
    return 2;
  }
  out->set_name(p->name);
  out->set_body(ss.str());
  return 0;
}

// Exit code for a failed call, after printing it: refused (2) or no answer (3).
int Refused(const char* what, const absl::Status& st) {
  std::fprintf(stderr, "touchstone: %s: %s: %s\n", what,
               absl::StatusCodeToString(st.code()).c_str(), std::string(st.message()).c_str());
  switch (st.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kPermissionDenied:
    case absl::StatusCode::kUnauthenticated:
      return 2;
    default:
      return 3;
  }
}

absl::Status FromGrpc(const grpc::Status& st) {
  return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
}

// The newest done sweep of the profile name; NOT_FOUND when there is none.
absl::StatusOr<int64_t> LatestDone(const Connection& conn, const std::string& profile) {
  auto stub = pb::Query::NewStub(conn.channel);
  pb::ListSweepsRequest req;
  req.set_profile(profile);
  req.set_state("done");
  req.set_page_size(1);
  pb::ListSweepsResponse resp;
  grpc::Status st = stub->ListSweeps(conn.Context().get(), req, &resp);
  if (!st.ok()) return FromGrpc(st);
  if (resp.sweeps().empty()) {
    return absl::NotFoundError("--baseline latest: no done sweep of profile '" + profile + "'");
  }
  return resp.sweeps(0).sweep_id();
}

// Follows the sweep, prints its table, and runs the gate. Returns the exit code.
int WaitAndReport(const SubmitFlags& o, const Connection& conn, cluster::SweepDriver* driver,
                  int64_t sweep_id, int64_t baseline) {
  auto followed = driver->Follow(sweep_id, {});
  if (!followed.ok()) return Refused("GetSweep", followed.status());
  const pb::SweepProgress& p = followed->progress;
  if (p.state() != "done") {
    std::fprintf(stderr, "touchstone submit: sweep %lld ended %s\n",
                 static_cast<long long>(sweep_id), p.state().c_str());
    return 1;
  }
  auto table = driver->Table(sweep_id);
  if (!table.ok()) return Refused("GetSummary", table.status());
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
  if (!rules.ok())
    return Usage(kSubmit, "--gate " + o.gate + ": " + std::string(rules.status().message()));
  pb::GateRequest req;
  req.set_sweep_id(sweep_id);
  *req.mutable_rules() = *rules;
  pb::GateResponse resp;
  grpc::Status st = pb::Query::NewStub(conn.channel)->Gate(conn.Context().get(), req, &resp);
  if (!st.ok()) return Refused("Gate", FromGrpc(st));
  std::printf("%s", query::FormatGate(resp).c_str());
  return resp.pass() ? 0 : 1;
}

}  // namespace

int SubmitCommand(const std::vector<std::string>& args, const std::string& data_dir) {
  std::vector<std::string> rest = args;
  auto flags = TakeClientFlags(&rest);
  if (!flags.ok()) return Usage(kSubmit, std::string(flags.status().message()));
  flags->admin = true;
  SubmitFlags o;
  if (int rc = ParseSubmitFlags(rest, &o); rc != 0) return rc;
  pb::CreateSweepRequest create;
  if (int rc = ReadProfile(kSubmit, o.profile, create.mutable_profile()); rc != 0) return rc;
  if (!o.gate.empty()) {
    // The rules are checked before anything is created.
    std::ifstream in(o.gate);
    if (!in) return Usage(kSubmit, "--gate: cannot read " + o.gate);
    std::stringstream ss;
    ss << in.rdbuf();
    if (auto r = ParseGateRules(ss.str()); !r.ok()) {
      return Usage(kSubmit, "--gate " + o.gate + ": " + std::string(r.status().message()));
    }
  }
  auto conn = Connect(*flags);
  if (!conn.ok()) return Usage(kSubmit, std::string(conn.status().message()));
  auto driver = cluster::SweepDriver::Connect({flags->scheduler, conn->token, flags->tls_ca});
  if (!driver.ok()) return Usage(kSubmit, std::string(driver.status().message()));

  int64_t baseline = 0;
  if (o.baseline == "latest") {
    auto b = LatestDone(*conn, create.profile().name());
    if (b.status().code() == absl::StatusCode::kNotFound) {
      // The first sweep of a profile (a new nightly series) has nothing to compare with.
      std::fprintf(stderr, "touchstone submit: %s; no baseline\n",
                   std::string(b.status().message()).c_str());
    } else if (!b.ok()) {
      return Refused("ListSweeps", b.status());
    } else {
      baseline = *b;
    }
  } else if (!o.baseline.empty()) {
    ParseNonNegative(o.baseline, &baseline);
  }
  if (!o.catalog.empty()) {
    auto path = SweepCatalogPath(o.catalog, "", data_dir);
    if (!path.ok()) return Fail(kSubmit, std::string(path.status().message()));
    auto sample = SampleCatalog(*path, o.sample, o.seed);
    if (!sample.ok()) return Usage(kSubmit, "--catalog: " + std::string(sample.status().message()));
    if (absl::Status st = UploadRows(*path, sample->lines, driver->get(), &create); !st.ok()) {
      return Refused("UpsertModels", st);
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
  if (!created.ok()) return Refused("CreateSweep", created.status());
  std::fprintf(stderr, "touchstone submit: sweep %lld: %lld models in %lld shards, profile %s%s\n",
               static_cast<long long>(created->sweep_id()),
               static_cast<long long>(created->models()), static_cast<long long>(created->shards()),
               create.profile().name().c_str(),
               baseline > 0 ? (", baseline " + std::to_string(baseline)).c_str() : "");
  if (!o.wait) {
    std::printf("%lld\n", static_cast<long long>(created->sweep_id()));
    return 0;
  }
  return WaitAndReport(o, *conn, driver->get(), created->sweep_id(), baseline);
}

}  // namespace ts::cli
