// `touchstone db migrate | prune | workers` (commands.h): the database's schema, retention and
// workers.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/usage.h"
#include "services/cluster/local_cluster.h"
#include "services/store/embedded_postgres.h"
#include "services/store/store.h"

namespace ts::cli {
namespace {

namespace fs = std::filesystem;

int DbMigrate(const std::string& url) {
  store::StoreOptions o;
  o.url = url;
  auto s = store::Store::Connect(o);
  if (!s.ok()) return Fail(s.status().ToString());
  if (auto st = (*s)->Migrate(); !st.ok()) return Fail(st.ToString());
  auto v = (*s)->AppliedMigrations();
  if (!v.ok()) return Fail(v.status().ToString());
  std::printf("schema at version %d (%zu migrations applied)\n", v->empty() ? 0 : v->back(),
              v->size());
  return 0;
}

struct PruneFlags {
  store::PruneRequest req;
  double older_than_days = -1;  // < 0: not given
  std::string db;
  std::string state_dir = ".touchstone";
};

void PrintPruned(const store::PruneRequest& req, const store::PruneResult& r) {
  const char* verb = req.dry_run ? "would prune" : "pruned";
  int64_t models = 0;
  for (const auto& p : r.pruned) {
    std::printf("%s sweep %lld '%s' (%s, %lld models recorded)\n", verb,
                static_cast<long long>(p.sweep_id), p.name.c_str(), p.state.c_str(),
                static_cast<long long>(p.models_recorded));
    models += p.models_recorded;
  }
  for (const auto& k : r.kept) std::printf("kept %s\n", k.c_str());
  for (int64_t id : r.already) {
    std::printf("sweep %lld was already pruned\n", static_cast<long long>(id));
  }
  for (int64_t id : r.completed) {
    std::printf("finished the interrupted prune of sweep %lld\n", static_cast<long long>(id));
  }
  std::printf("%s %zu sweep(s), %lld models' results\n", verb, r.pruned.size(),
              static_cast<long long>(models));
}

// The store of `db`, else of the embedded cluster under `state_dir` (started, never created:
// these commands only read or trim what a sweep made), migrated.
struct OpenedStore {
  std::unique_ptr<store::EmbeddedPostgres> pg;  // when embedded: stopped when this goes
  std::unique_ptr<store::Store> store;
};

// Returns 0, or the exit code of an error (already printed).
int OpenStore(std::string db, const std::string& state_dir, OpenedStore* out) {
  if (db.empty()) {
    const fs::path data = cluster::LocalCluster::EmbeddedDataDir(state_dir);
    std::error_code ec;
    if (!fs::exists(data / "PG_VERSION", ec)) {
      return Usage("--state-dir: no embedded database under " + data.string() +
                   " (give --db URL for another one)");
    }
    store::EmbeddedPostgresOptions po;
    po.data_dir = data.string();
    auto p = store::EmbeddedPostgres::Start(po);
    if (!p.ok()) return Fail(p.status().ToString());
    out->pg = std::move(*p);
    db = out->pg->url();
  }
  store::StoreOptions o;
  o.url = db;
  auto s = store::Store::Connect(o);
  if (!s.ok()) return Fail(s.status().ToString());
  if (auto st = (*s)->Migrate(); !st.ok()) return Fail(st.ToString());
  out->store = std::move(*s);
  return 0;
}

int DbPrune(const PruneFlags& f) {
  store::PruneRequest req = f.req;
  if (f.older_than_days >= 0) req.older_than_s = f.older_than_days * 86400;
  if (req.sweep_ids.empty() && req.older_than_s < 0 && req.keep_last < 0) {
    return Usage("give --sweep, --older-than or --keep");
  }
  OpenedStore opened;
  if (int rc = OpenStore(f.db, f.state_dir, &opened); rc != 0) return rc;
  auto r = opened.store->PruneSweeps(req);
  if (!r.ok()) {
    const auto code = r.status().code();
    return Error(code == absl::StatusCode::kInvalidArgument ||
                         code == absl::StatusCode::kNotFound ||
                         code == absl::StatusCode::kFailedPrecondition
                     ? 2
                     : 1,
                 std::string(r.status().message()));
  }
  PrintPruned(req, *r);
  return 0;
}

struct StoreFlags {
  std::string db;
  std::string state_dir = ".touchstone";
};

int DbWorkers(const StoreFlags& f) {
  OpenedStore opened;
  if (int rc = OpenStore(f.db, f.state_dir, &opened); rc != 0) return rc;
  auto rows = opened.store->ListWorkers();
  if (!rows.ok()) return Fail(rows.status().ToString());
  std::printf("%-8s %-32s %-20s %8s %7s  %s\n", "worker", "name", "last seen", "failures",
              "leased", "quarantined until");
  int quarantined = 0;
  for (const auto& w : *rows) {
    quarantined += !w.quarantined_until.empty();
    std::printf("%-8lld %-32s %-20s %8d %7lld  %s\n", static_cast<long long>(w.worker_id),
                w.name.c_str(), w.last_seen.c_str(), w.failures,
                static_cast<long long>(w.shards_leased),
                w.quarantined_until.empty() ? "-" : w.quarantined_until.c_str());
  }
  std::printf("%zu workers, %d quarantined\n", rows->size(), quarantined);
  return 0;
}

// --db URL | --state-dir DIR: the database the command opens (OpenStore).
void AddStoreFlags(flags::Command& c, std::string* db, std::string* state_dir) {
  c.Option("--db", db, "URL", "a PostgreSQL database");
  c.Option("--state-dir", state_dir, "DIR", "else the embedded database under this state folder")
      .Dir()
      .Excludes("--db");
}

}  // namespace

void AddDbCommands(flags::Command& root) {
  flags::Command& db = root.Group("db", "the database: schema, retention, workers");
  auto url = std::make_shared<std::string>();
  db.Add("migrate", "apply schema/ migrations", [url] { return DbMigrate(*url); })
      .Option("--db", url.get(), "URL", "the PostgreSQL database")
      .Required();

  auto p = std::make_shared<PruneFlags>();
  flags::Command& prune = db.Add(
      "prune",
      "retention: drop finished sweeps' results, jobs and shards (a tombstone with their counts "
      "stays)",
      [p] { return DbPrune(*p); });
  AddStoreFlags(prune, &p->db, &p->state_dir);
  prune.Option("--sweep", &p->req.sweep_ids, "ID", "this sweep").Min(1);
  prune
      .Option("--older-than", &p->older_than_days, "DAYS",
              "sweeps that finished more than DAYS ago")
      .Min(0)
      .Default("");
  prune.Option("--keep", &p->req.keep_last, "N", "all but the newest N").Min(0).Default("");
  prune.Flag("--dry-run", &p->req.dry_run, "say what would go; drop nothing");
  prune.Notes(
      "--older-than and --keep together: both rules. Never a running sweep or a running sweep's\n"
      "baseline. Without --db, the embedded database under --state-dir (never created by a\n"
      "prune). GetSweep still answers for a pruned sweep; ListResults is FAILED_PRECONDITION.\n"
      "exit: 0 done, 2 usage or a bad sweep (named), 1 database failure");

  auto w = std::make_shared<StoreFlags>();
  flags::Command& workers = db.Add(
      "workers",
      "the workers seen in the last day and every quarantined one (a worker that ends 5 leases "
      "in a row without a result leases nothing for 10 min)",
      [w] { return DbWorkers(*w); });
  AddStoreFlags(workers, &w->db, &w->state_dir);
}

}  // namespace ts::cli
