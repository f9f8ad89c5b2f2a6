#include "cli/db.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>

#include "cli/usage.h"
#include "services/cluster/local_cluster.h"
#include "services/store/embedded_postgres.h"
#include "services/store/store.h"

namespace ts::cli {
namespace {

namespace fs = std::filesystem;

constexpr CommandText kDb = {
    "touchstone db", "touchstone db",
    "usage: touchstone db migrate --db URL\n"
    "       touchstone db prune [--db URL | --state-dir DIR] [--sweep ID]... [--older-than DAYS]\n"
    "                           [--keep N] [--dry-run]\n"
    "  prune: drop finished sweeps' results (a tombstone with their counts stays). --older-than:\n"
    "  those that finished more than DAYS ago; --keep: all but the newest N (both: both rules);\n"
    "  --sweep: these. Never a running sweep or a running sweep's baseline. Without --db, the\n"
    "  embedded database under --state-dir (default .touchstone).\n"
    "       touchstone db workers [--db URL | --state-dir DIR]\n"
    "  workers: the workers seen in the last day and every quarantined one (a worker that ends\n"
    "  too many leases in a row without a result leases nothing for a while).\n"};

int DbMigrate(const std::string& url) {
  store::StoreOptions o;
  o.url = url;
  auto s = store::Store::Connect(o);
  if (!s.ok()) return Fail(kDb, s.status().ToString());
  if (auto st = (*s)->Migrate(); !st.ok()) return Fail(kDb, st.ToString());
  auto v = (*s)->AppliedMigrations();
  if (!v.ok()) return Fail(kDb, v.status().ToString());
  std::printf("schema at version %d (%zu migrations applied)\n", v->empty() ? 0 : v->back(),
              v->size());
  return 0;
}

struct PruneFlags {
  store::PruneRequest req;
  std::string db;
  std::string state_dir = ".touchstone";
};

// Returns 0, or the exit code of a usage error (already printed).
int ParsePruneFlags(const std::vector<std::string>& args, PruneFlags* f) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has = i + 1 < args.size();
    int64_t v = 0;
    if (a == "--db" && has) {
      f->db = args[++i];
    } else if (a == "--state-dir" && has) {
      f->state_dir = args[++i];
    } else if (a == "--sweep" && has) {
      if (!ParseNonNegative(args[++i], &v) || v == 0) {
        return Usage(kDb, "--sweep: expected a sweep id, got '" + args[i] + "'");
      }
      f->req.sweep_ids.push_back(v);
    } else if (a == "--older-than" && has) {
      char* end = nullptr;
      const double days = std::strtod(args[++i].c_str(), &end);
      if (args[i].empty() || *end != '\0' || !(days >= 0)) {
        return Usage(kDb, "--older-than: expected days >= 0, got '" + args[i] + "'");
      }
      f->req.older_than_s = days * 86400;
    } else if (a == "--keep" && has) {
      if (!ParseNonNegative(args[++i], &v)) {
        return Usage(kDb, "--keep: expected N >= 0, got '" + args[i] + "'");
      }
      f->req.keep_last = v;
    } else if (a == "--dry-run") {
      f->req.dry_run = true;
    } else {
      return Usage(kDb, "prune: unknown or incomplete argument '" + a + "'");
    }
  }
  if (f->req.sweep_ids.empty() && f->req.older_than_s < 0 && f->req.keep_last < 0) {
    return Usage(kDb, "prune: give --sweep, --older-than or --keep");
  }
  return 0;
}

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

int DbPrune(const std::vector<std::string>& args) {
  PruneFlags f;
  if (int rc = ParsePruneFlags(args, &f); rc != 0) return rc;
  OpenedStore opened;
  if (int rc = OpenStore(f.db, f.state_dir, &opened, kDb); rc != 0) return rc;
  auto r = opened.store->PruneSweeps(f.req);
  if (!r.ok()) {
    std::fprintf(stderr, "touchstone db prune: %s\n", std::string(r.status().message()).c_str());
    const auto code = r.status().code();
    return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ||
                   code == absl::StatusCode::kFailedPrecondition
               ? 2
               : 1;
  }
  PrintPruned(f.req, *r);
  return 0;
}

int DbWorkers(const std::vector<std::string>& args) {
  std::string db, state_dir = ".touchstone";
  for (size_t i = 1; i < args.size(); ++i) {
    const bool has = i + 1 < args.size();
    if (args[i] == "--db" && has) {
      db = args[++i];
    } else if (args[i] == "--state-dir" && has) {
      state_dir = args[++i];
    } else {
      return Usage(kDb, "workers: unknown or incomplete argument '" + args[i] + "'");
    }
  }
  OpenedStore opened;
  if (int rc = OpenStore(db, state_dir, &opened, kDb); rc != 0) return rc;
  auto rows = opened.store->ListWorkers();
  if (!rows.ok()) return Fail(kDb, rows.status().ToString());
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

}  // namespace

OpenedStore::OpenedStore() = default;
OpenedStore::~OpenedStore() = default;

int OpenStore(std::string db, const std::string& state_dir, OpenedStore* out,
              const CommandText& cmd) {
  if (db.empty()) {
    const fs::path data = cluster::LocalCluster::EmbeddedDataDir(state_dir);
    std::error_code ec;
    if (!fs::exists(data / "PG_VERSION", ec)) {
      return Usage(cmd, "--state-dir: no embedded database under " + data.string() +
                            " (give --db URL for another one)");
    }
    store::EmbeddedPostgresOptions po;
    po.data_dir = data.string();
    auto p = store::EmbeddedPostgres::Start(po);
    if (!p.ok()) return Fail(cmd, p.status().ToString());
    out->pg = std::move(*p);
    db = out->pg->url();
  }
  store::StoreOptions o;
  o.url = db;
  auto s = store::Store::Connect(o);
  if (!s.ok()) return Fail(cmd, s.status().ToString());
  if (auto st = (*s)->Migrate(); !st.ok()) return Fail(cmd, st.ToString());
  out->store = std::move(*s);
  return 0;
}

int DbCommand(const std::vector<std::string>& args) {
  if (args.size() == 3 && args[0] == "migrate" && args[1] == "--db") return DbMigrate(args[2]);
  if (!args.empty() && args[0] == "prune") return DbPrune(args);
  if (!args.empty() && args[0] == "workers") return DbWorkers(args);
  return Usage(kDb, "expected 'db migrate --db URL', 'db prune ...' or 'db workers ...'");
}

}  // namespace ts::cli
