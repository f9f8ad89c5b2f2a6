#include "cli/sweep.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/query_text.h"
#include "cli/serve.h"
#include "cli/sweep_catalog.h"
#include "cli/usage.h"
#include "services/cluster/local_cluster.h"
#include "services/cluster/sweep_driver.h"
#include "services/query/text_tables.h"
#include "workers/simdevice/profile.h"

namespace ts::cli {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using Clock = std::chrono::steady_clock;

constexpr CommandText kSweep = {
    "touchstone", "touchstone sweep",
    "usage: touchstone sweep [--sample N|all] [--profile FILE] [--workers W] [--db URL]\n"
    "                        [--baseline SWEEP] [--json FILE] [--serve] [--catalog FILE]\n"
    "                        [--seed N] [--modes eager,compile,train] [--state-dir DIR]\n"
    "                        [--lease-ttl S] [--model-timeout S] [--no-audit-ops]\n"
    "                        [--references stored|fresh]  (reference bundles in STATE/refs:\n"
    "                        used when stored (default), or every model's computed again)\n"
    "                        [--fast-unsafe]  (the embedded PostgreSQL without fsync: faster,\n"
    "                        but an OS crash or power loss can corrupt its results)\n"};

// Set by SIGINT/SIGTERM: the sweep is cancelled and the services stopped in order.
std::atomic<bool> interrupted{false};

struct SweepFlags {
  int64_t sample = 1000;  // 0: the whole catalog
  std::string profile;
  int workers = 0;  // 0: one per core
  std::string db;
  int64_t baseline = 0;
  std::string json_out;
  bool serve = false;
  std::string catalog;
  uint64_t seed = 0;
  std::vector<std::string> modes;
  std::string state_dir = ".touchstone";
  double lease_ttl_s = 30;
  double model_timeout_s = 300;
  // Replay passing modes op by op too (suspects as warnings). On by default: it costs +19% per
  // model (bench/RESULTS.md, "Deeper verdicts"), under the +30% a nightly sweep affords.
  bool audit_ops = true;
  bool fast_unsafe = false;  // the embedded PostgreSQL without fsync
  std::string references = "stored";  // reference bundles: "stored" or "fresh"
};

// Returns 0, or the exit code of a usage error (already printed).
int ParseSweepFlags(const std::vector<std::string>& args, SweepFlags* o) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has = i + 1 < args.size();
    int64_t v = 0;
    if (a == "--sample" && has) {
      const std::string s = args[++i];
      if (s == "all") {
        o->sample = 0;
      } else if (!ParseNonNegative(s, &o->sample) || o->sample == 0) {
        return Usage(kSweep, "--sample: a positive number or 'all'");
      }
    } else if (a == "--profile" && has) {
      o->profile = args[++i];
    } else if (a == "--workers" && has) {
      if (!ParseNonNegative(args[++i], &v) || v < 1 || v > 256) {
        return Usage(kSweep, "--workers: 1..256");
      }
      o->workers = static_cast<int>(v);
    } else if (a == "--db" && has) {
      o->db = args[++i];
    } else if (a == "--baseline" && has) {
      if (!ParseNonNegative(args[++i], &o->baseline) || o->baseline == 0) {
        return Usage(kSweep, "--baseline: a sweep id");
      }
    } else if (a == "--json" && has) {
      o->json_out = args[++i];
    } else if (a == "--serve") {
      o->serve = true;
    } else if (a == "--audit-ops") {
      o->audit_ops = true;
    } else if (a == "--fast-unsafe") {
      o->fast_unsafe = true;
    } else if (a == "--no-audit-ops") {
      o->audit_ops = false;
    } else if (a == "--catalog" && has) {
      o->catalog = args[++i];
    } else if (a == "--seed" && has) {
      if (!ParseNonNegative(args[++i], &v)) return Usage(kSweep, "--seed: not a number");
      o->seed = static_cast<uint64_t>(v);
    } else if (a == "--modes" && has) {
      std::stringstream ss(args[++i]);
      std::string m;
      while (std::getline(ss, m, ',')) {
        if (m != "eager" && m != "compile" && m != "train") {
          return Usage(kSweep, "--modes: unknown mode '" + m + "'");
        }
        o->modes.push_back(m);
      }
    } else if (a == "--state-dir" && has) {
      o->state_dir = args[++i];
    } else if (a == "--references" && has) {
      o->references = args[++i];
      if (o->references != "stored" && o->references != "fresh") {
        return Usage(kSweep, "--references: 'stored' or 'fresh'");
      }
    } else if (a == "--lease-ttl" && has) {
      o->lease_ttl_s = std::atof(args[++i].c_str());
      if (!(o->lease_ttl_s > 0)) return Usage(kSweep, "--lease-ttl: seconds > 0");
    } else if (a == "--model-timeout" && has) {
      o->model_timeout_s = std::atof(args[++i].c_str());
      if (!(o->model_timeout_s > 0)) return Usage(kSweep, "--model-timeout: seconds > 0");
    } else {
      return Usage(kSweep, "sweep: unknown argument '" + a + "'");
    }
  }
  if (o->workers == 0) o->workers = std::max(1u, std::thread::hardware_concurrency());
  return 0;
}

struct Profile {
  std::string text;
  std::string name;
};

// The profile is checked here, field by field, before anything starts. Returns 0 or the exit
// code of the error (already printed).
int LoadProfile(const std::string& path, Profile* out) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return Usage(kSweep, "--profile: cannot read " + path);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  out->text = ss.str();
  auto profile = simdevice::ParseProfile(out->text);
  if (!profile.ok()) {
    std::fprintf(stderr, "touchstone: profile %s: %s\n", path.c_str(),
                 profile.status().message().c_str());
    return 2;
  }
  out->name = profile->name;
  return 0;
}

// What the sweep printed its table from.
struct SweepOutcome {
  int64_t sweep_id = 0;
  cluster::FollowResult followed;
  pb::Summary table;  // GetSummary's answer
};

// Loads the sampled catalog rows and creates the sweep. Returns 0 or the exit code of the error
// (already printed).
int CreateSweep(const SweepFlags& o, const Profile& profile, const std::string& state,
                const std::string& data_dir, cluster::SweepDriver* driver,
                pb::CreateSweepResponse* created) {
  auto path = SweepCatalogPath(o.catalog, state, data_dir);
  if (!path.ok()) return Fail(kSweep, std::string(path.status().message()));
  auto sample = SampleCatalog(*path, o.sample, o.seed);
  if (!sample.ok()) return Usage(kSweep, "--catalog: " + std::string(sample.status().message()));
  pb::CreateSweepRequest create;
  if (absl::Status st = UploadRows(*path, sample->lines, driver, &create); !st.ok()) {
    return Fail(kSweep, "loading the catalog: " + std::string(st.message()));
  }
  create.set_name(o.sample > 0 ? "sample-" + std::to_string(o.sample) : "full");
  create.mutable_profile()->set_name(profile.name);
  create.mutable_profile()->set_body(profile.text);
  create.set_seed(o.seed);
  for (const auto& m : o.modes) create.add_modes(m);
  create.set_baseline_sweep_id(o.baseline);
  create.set_model_timeout_s(o.model_timeout_s);
  create.set_audit_ops(o.audit_ops);
  auto c = driver->CreateSweep(create);
  if (!c.ok()) {
    if (c.status().code() == absl::StatusCode::kInvalidArgument) {
      std::fprintf(stderr, "touchstone: %s\n", std::string(c.status().message()).c_str());
      return 2;
    }
    return Fail(kSweep, "CreateSweep: " + std::string(c.status().message()));
  }
  *created = *c;
  std::fprintf(
      stderr, "touchstone sweep: sweep %lld: %lld models in %lld shards, %d workers, profile %s\n",
      static_cast<long long>(created->sweep_id()), static_cast<long long>(created->models()),
      static_cast<long long>(created->shards()), o.workers, profile.name.c_str());
  return 0;
}

void PrintTable(const SweepFlags& o, const SweepOutcome& s) {
  const pb::SweepProgress& p = s.followed.progress;
  const double sweep_s = s.followed.sweep_s;
  std::printf("%s", query::FormatSummary(s.table).c_str());
  std::printf("sweep %lld: %lld/%lld models recorded, %lld duplicates, %.1f s (%.2f models/s)\n",
              static_cast<long long>(s.sweep_id), static_cast<long long>(p.models_recorded()),
              static_cast<long long>(p.models_expected()), static_cast<long long>(p.duplicates()),
              sweep_s, sweep_s > 0 ? p.models_recorded() / sweep_s : 0.0);
  if (o.baseline > 0) {
    std::printf("new failures vs sweep %lld: %lld deterministic, %lld flaky\n",
                static_cast<long long>(o.baseline),
                static_cast<long long>(p.confirmed_deterministic()),
                static_cast<long long>(p.confirmed_flaky()));
  }
}

void WriteJson(const SweepFlags& o, const SweepOutcome& s, const std::string& profile_name,
               int scheduler_restarts, Clock::time_point t_start) {
  const pb::SweepProgress& p = s.followed.progress;
  nlohmann::json j = SummaryJson(s.table);
  j["sweep_id"] = s.sweep_id;
  j["models_expected"] = p.models_expected();
  j["models_recorded"] = p.models_recorded();
  j["models_listed"] = s.table.total().models();  // the models the table counted
  j["duplicates"] = p.duplicates();
  j["failures"] = p.failures();
  j["confirmed_deterministic"] = p.confirmed_deterministic();
  j["confirmed_flaky"] = p.confirmed_flaky();
  j["profile"] = profile_name;
  j["workers"] = o.workers;
  j["sweep_s"] = s.followed.sweep_s;
  j["total_s"] = std::chrono::duration<double>(Clock::now() - t_start).count();
  j["restarts"] = {{"scheduler", scheduler_restarts}};
  std::ofstream(o.json_out) << j.dump(2) << "\n";
}

// --serve: the workers go; the scheduler (gRPC, HTTP) and the database stay up until Ctrl-C,
// for the query commands (`touchstone summary ... --scheduler HOST:PORT --token-file FILE`).
void Serve(cluster::LocalCluster* cluster) {
  cluster->StopWorkers();
  std::printf("%s\n", ServingLine(*cluster).c_str());
  std::fflush(stdout);
  std::fprintf(stderr, "touchstone sweep: serving; Ctrl-C stops.\n");
  while (!interrupted) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    if (absl::Status st = cluster->Supervise(); !st.ok()) {
      std::fprintf(stderr, "touchstone sweep: %s\n", std::string(st.message()).c_str());
      return;
    }
  }
}

// Follows the sweep to its end, supervising the cluster, and takes its table (GetSummary).
// Returns 0 or the exit code (the message already printed).
int FollowAndSummarize(cluster::LocalCluster* cluster, cluster::SweepDriver* driver,
                       SweepOutcome* s) {
  cluster::FollowOptions fo;
  fo.interrupted = &interrupted;
  fo.between_polls = [cluster] { return cluster->Supervise(); };
  fo.why_stalled = [cluster] { return cluster->Diagnose(); };
  auto followed = driver->Follow(s->sweep_id, fo);
  if (!followed.ok()) return Fail(kSweep, std::string(followed.status().message()));
  s->followed = *followed;
  if (followed->interrupted) {
    // The sweep was cancelled first, so that no worker (here or elsewhere) picks up its
    // remaining shards.
    const absl::Status& cst = followed->cancel;
    std::fprintf(stderr,
                 "\ntouchstone sweep: interrupted; sweep %lld %s (%lld of %lld models "
                 "recorded stay in the database); stopping services\n",
                 static_cast<long long>(s->sweep_id),
                 cst.ok() ? "cancelled" : ("not cancelled: " + std::string(cst.message())).c_str(),
                 static_cast<long long>(followed->progress.models_recorded()),
                 static_cast<long long>(followed->progress.models_expected()));
    return 1;
  }
  // The table is the Query service's answer, the one `touchstone summary` prints.
  auto table = driver->Table(s->sweep_id);
  if (!table.ok()) return Fail(kSweep, "GetSummary: " + std::string(table.status().message()));
  s->table = *table;
  return 0;
}

// The sweep once its flags and profile are good: cluster up, sweep created, followed, printed.
// On every path the cluster is stopped in order (workers, scheduler, database) when it goes out
// of scope, after any message was printed.
int RunSweep(const SweepFlags& o, const Profile& profile, const std::string& data_dir,
             Clock::time_point t_start) {
  cluster::LocalClusterOptions co;
  co.state_dir = o.state_dir;
  co.db_url = o.db;
  co.workers = o.workers;
  co.lease_ttl_s = o.lease_ttl_s;
  co.fast_unsafe = o.fast_unsafe;
  co.references = o.references;
  co.interrupted = &interrupted;
  auto cluster = cluster::LocalCluster::Start(co);
  if (!cluster.ok()) return Fail(kSweep, std::string(cluster.status().message()));
  auto driver = cluster::SweepDriver::Connect({(*cluster)->target(), (*cluster)->token()});
  if (!driver.ok()) return Fail(kSweep, std::string(driver.status().message()));
  pb::CreateSweepResponse created;
  if (int rc = CreateSweep(o, profile, (*cluster)->state_dir(), data_dir, driver->get(), &created);
      rc != 0) {
    return rc;
  }
  if (absl::Status st = (*cluster)->StartWorkers(); !st.ok()) {
    return Fail(kSweep, std::string(st.message()));
  }
  SweepOutcome s;
  s.sweep_id = created.sweep_id();
  if (int rc = FollowAndSummarize(cluster->get(), driver->get(), &s); rc != 0) return rc;
  PrintTable(o, s);
  if (!o.json_out.empty()) {
    WriteJson(o, s, profile.name, (*cluster)->scheduler_restarts(), t_start);
  }
  if (o.serve) Serve(cluster->get());
  return 0;
}

}  // namespace

int SweepCommand(const std::vector<std::string>& args, const std::string& data_dir) {
  SweepFlags o;
  o.profile = std::string(TS_PROFILES_DIR) + "/sim-2.0.json";
  if (int rc = ParseSweepFlags(args, &o); rc != 0) return rc;
  Profile profile;
  if (int rc = LoadProfile(o.profile, &profile); rc != 0) return rc;
  std::error_code ec;
  fs::create_directories(o.state_dir + "/logs", ec);
  if (ec) return Usage(kSweep, "--state-dir: " + ec.message());
  const auto t_start = Clock::now();

  // Ctrl-C stops the sweep cleanly (services are stopped; results stay in the database).
  struct sigaction sa {};
  sa.sa_handler = [](int) { interrupted = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return RunSweep(o, profile, data_dir, t_start);
}

}  // namespace ts::cli
