// `touchstone sweep` (commands.h): the one-command distributed sweep. Parses the flags, starts a
// services/cluster LocalCluster (a private PostgreSQL under the state folder unless --db, the
// scheduler and W workers as child processes of this one), loads the sampled catalog rows and
// creates the sweep through a SweepDriver, which shows progress; prints the per-task table (the
// shape run-catalog prints) and stops everything it started (after serving, with --serve).
// Ctrl-C (SIGINT/SIGTERM) cancels the sweep and stops the services in order.
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "cli/commands.h"
#include "cli/profile_file.h"
#include "cli/query_text.h"
#include "cli/serve.h"
#include "cli/sweep_catalog.h"
#include "cli/usage.h"
#include "services/cluster/local_cluster.h"
#include "services/cluster/sweep_driver.h"
#include "services/query/text_tables.h"

namespace ts::cli {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using Clock = std::chrono::steady_clock;

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
};

// What the sweep printed its table from.
struct SweepOutcome {
  int64_t sweep_id = 0;
  cluster::FollowResult followed;
  pb::Summary table;  // GetSummary's answer
};

// Loads the sampled catalog rows and creates the sweep. Returns 0 or the exit code of the error
// (already printed).
int CreateSweep(const SweepFlags& o, const ProfileFile& profile, const std::string& state,
                const std::string& data_dir, cluster::SweepDriver* driver,
                pb::CreateSweepResponse* created) {
  auto path = SweepCatalogPath(o.catalog, state, data_dir);
  if (!path.ok()) return Fail(std::string(path.status().message()));
  auto sample = SampleCatalog(*path, o.sample, o.seed);
  if (!sample.ok()) return Usage("--catalog: " + std::string(sample.status().message()));
  pb::CreateSweepRequest create;
  if (absl::Status st = UploadRows(*path, sample->lines, driver, &create); !st.ok()) {
    return Fail("loading the catalog: " + std::string(st.message()));
  }
  create.set_name(o.sample > 0 ? "sample-" + std::to_string(o.sample) : "full");
  create.mutable_profile()->set_name(profile.info.name);
  create.mutable_profile()->set_body(profile.text);
  create.set_seed(o.seed);
  for (const auto& m : o.modes) create.add_modes(m);
  create.set_baseline_sweep_id(o.baseline);
  create.set_model_timeout_s(o.model_timeout_s);
  create.set_audit_ops(o.audit_ops);
  auto c = driver->CreateSweep(create);
  if (!c.ok()) {
    if (c.status().code() == absl::StatusCode::kInvalidArgument) {
      return Error(2, std::string(c.status().message()));
    }
    return Fail("CreateSweep: " + std::string(c.status().message()));
  }
  *created = *c;
  std::fprintf(
      stderr, "touchstone sweep: sweep %lld: %lld models in %lld shards, %d workers, profile %s\n",
      static_cast<long long>(created->sweep_id()), static_cast<long long>(created->models()),
      static_cast<long long>(created->shards()), o.workers, profile.info.name.c_str());
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
  if (!followed.ok()) return Fail(std::string(followed.status().message()));
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
  if (!table.ok()) return Fail("GetSummary: " + std::string(table.status().message()));
  s->table = *table;
  return 0;
}

// The sweep once its flags and profile are good: cluster up, sweep created, followed, printed.
// On every path the cluster is stopped in order (workers, scheduler, database) when it goes out
// of scope, after any message was printed.
int RunSweep(const SweepFlags& o, const ProfileFile& profile, const std::string& data_dir,
             Clock::time_point t_start) {
  cluster::LocalClusterOptions co;
  co.state_dir = o.state_dir;
  co.db_url = o.db;
  co.workers = o.workers;
  co.lease_ttl_s = o.lease_ttl_s;
  co.fast_unsafe = o.fast_unsafe;
  co.interrupted = &interrupted;
  auto cluster = cluster::LocalCluster::Start(co);
  if (!cluster.ok()) return Fail(std::string(cluster.status().message()));
  auto driver = cluster::SweepDriver::Connect({(*cluster)->target(), (*cluster)->token()});
  if (!driver.ok()) return Fail(std::string(driver.status().message()));
  pb::CreateSweepResponse created;
  if (int rc = CreateSweep(o, profile, (*cluster)->state_dir(), data_dir, driver->get(), &created);
      rc != 0) {
    return rc;
  }
  if (absl::Status st = (*cluster)->StartWorkers(); !st.ok()) {
    return Fail(std::string(st.message()));
  }
  SweepOutcome s;
  s.sweep_id = created.sweep_id();
  if (int rc = FollowAndSummarize(cluster->get(), driver->get(), &s); rc != 0) return rc;
  PrintTable(o, s);
  if (!o.json_out.empty()) {
    WriteJson(o, s, profile.info.name, (*cluster)->scheduler_restarts(), t_start);
  }
  if (o.serve) Serve(cluster->get());
  return 0;
}

int Sweep(const SweepFlags& flags) {
  SweepFlags o = flags;
  if (o.workers == 0) o.workers = std::max(1u, std::thread::hardware_concurrency());
  ProfileFile profile;
  if (int rc = ReadProfileFile(o.profile, &profile); rc != 0) return rc;
  std::error_code ec;
  fs::create_directories(o.state_dir + "/logs", ec);
  if (ec) return Usage("--state-dir: " + ec.message());
  const auto t_start = Clock::now();

  // Ctrl-C stops the sweep cleanly (services are stopped; results stay in the database).
  struct sigaction sa {};
  sa.sa_handler = [](int) { interrupted = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  return RunSweep(o, profile, DefaultDataDir(), t_start);
}

}  // namespace

void AddSweepCommand(flags::Command& root) {
  auto f = std::make_shared<SweepFlags>();
  f->profile = std::string(TS_PROFILES_DIR) + "/sim-2.0.json";
  flags::Command& c = root.Add(
      "sweep",
      "the distributed sweep: embedded PostgreSQL, touchstone-scheduler and W touchstone-worker "
      "processes; the same sample and table as run-catalog",
      [f] { return Sweep(*f); });
  c.Option("--sample", &f->sample, "N|all", "models, stratified (all: the whole catalog)")
      .Check(CountOrAll);
  c.Option("--profile", &f->profile, "FILE", "the device profile").File();
  c.Option("--workers", &f->workers, "W", "worker processes (0: one per core)").Range(0, 256);
  c.Option("--db", &f->db, "URL", "an existing PostgreSQL instead of the embedded one");
  c.Option("--baseline", &f->baseline, "SWEEP", "compare with this sweep (new failures)")
      .Min(1)
      .Default("");
  c.Option("--json", &f->json_out, "FILE", "also write the table and counts as JSON").File();
  c.Flag("--serve", &f->serve, "then keep the scheduler up for the query commands (Ctrl-C)");
  c.Option("--catalog", &f->catalog, "FILE",
           "the catalog (default: the 104,909-model one, generated once under --state-dir)")
      .File();
  c.Option("--seed", &f->seed, "N", "the sample's and the models' seed");
  c.Option("--modes", &f->modes, "MODES", "eager,compile,train (default: every mode)")
      .Split(',')
      .Choices(ModeNames());
  c.Option("--state-dir", &f->state_dir, "DIR", "the embedded database, logs, the catalog").Dir();
  c.Option("--lease-ttl", &f->lease_ttl_s, "S", "the scheduler's lease time").Positive();
  c.Option("--model-timeout", &f->model_timeout_s, "S", "one model's time limit").Positive();
  c.Flag("--audit-ops", &f->audit_ops, "replay passing modes op by op too (the default)");
  c.Flag("--no-audit-ops", &f->audit_ops, "no op-by-op replay of passing modes (-19% per model)",
         false);
  c.Flag("--fast-unsafe", &f->fast_unsafe,
         "the embedded PostgreSQL without fsync: faster, but an OS crash or power loss can "
         "corrupt its results");
  c.Notes(
      "JSON (--json): the table, sweep_id, models_expected, models_recorded, duplicates, ...\n"
      "exit: 0 done, 2 usage or bad input (the flag or profile field named), 1 infrastructure\n"
      "failure or interrupted");
}

}  // namespace ts::cli
