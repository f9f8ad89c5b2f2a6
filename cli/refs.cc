// `touchstone refs stats | prune | import DIR | export --sweep ID DIR | inputs` (commands.h): the
// reference bundles (workers/refs/README.md) of the embedded default (--state-dir DIR: the
// folder STATE/refs, the sweeps in the embedded database) or of a fleet (--scheduler HOST:PORT
// --token-file F: the scheduler's PostgreSQL through its RPCs, refs_fleet.cc).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/client.h"
#include "cli/commands.h"
#include "cli/db.h"
#include "cli/refs_fleet.h"
#include "cli/sweep_catalog.h"
#include "cli/usage.h"
#include "services/cluster/local_cluster.h"
#include "services/store/store.h"
#include "workers/engine/run_export.h"
#include "workers/refs/format.h"
#include "workers/refs/store.h"
#include "workers/refs/zoo_version.h"

namespace ts::cli {
namespace {

namespace fs = std::filesystem;

struct RefsFlags {
  std::string sub;
  ClientFlags client;  // client.scheduler "" (no flag, no TOUCHSTONE_SCHEDULER): the state folder
  std::string state_dir = ".touchstone";
  std::string dir;    // import / export
  int64_t sweep = 0;  // export
  // inputs
  std::string catalog, out;
  int64_t sample = 0;
  std::vector<std::string> models;
  uint64_t seed = 0;
};

std::string Size(int64_t bytes) {
  char buf[32];
  const double b = static_cast<double>(bytes);
  if (b >= 1024.0 * 1024 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.2f GiB", b / (1024.0 * 1024 * 1024));
  } else if (b >= 1024.0 * 1024) {
    std::snprintf(buf, sizeof(buf), "%.1f MiB", b / (1024.0 * 1024));
  } else {
    std::snprintf(buf, sizeof(buf), "%.1f KiB", b / 1024.0);
  }
  return buf;
}

// "last sweep 12: 4,990 of 5,000 models from stored bundles (99.8% hit rate); 10 computed ..."
void PrintUse(const store::SweepReferenceUse& u) {
  if (u.sweep_id == 0) {
    std::printf("no sweep recorded a model yet\n");
    return;
  }
  const double rate = u.models > 0 ? 100.0 * static_cast<double>(u.stored) / u.models : 0.0;
  std::printf(
      "last sweep %lld: %lld of %lld models from stored bundles (%.1f%% hit rate); %lld computed, "
      "%lld completed (a stored bundle lacking a gradient), %lld fresh; %lld refused a damaged "
      "or foreign bundle\n",
      static_cast<long long>(u.sweep_id), static_cast<long long>(u.stored),
      static_cast<long long>(u.models), rate, static_cast<long long>(u.computed),
      static_cast<long long>(u.completed), static_cast<long long>(u.fresh),
      static_cast<long long>(u.refused));
  if (u.modes_compared > 0) {
    std::printf(
        "%lld modes judged against references from elsewhere too; %lld with the "
        "reference in question (ours and another disagree beyond their noise)\n",
        static_cast<long long>(u.modes_compared), static_cast<long long>(u.modes_in_question));
  }
}

// The embedded database, when the state folder has one (a sweep ran there).
bool HasDatabase(const std::string& state_dir) {
  std::error_code ec;
  return fs::exists(fs::path(cluster::LocalCluster::EmbeddedDataDir(state_dir)) / "PG_VERSION", ec);
}

int Stats(const RefsFlags& f, const refs::DirStore& s) {
  const refs::StoreStats st = s.Stats();
  std::printf("%lld bundles, %s (%lld keys; %s)\n", static_cast<long long>(st.blobs),
              Size(st.blob_bytes).c_str(), static_cast<long long>(st.keys), s.root().c_str());
  if (st.partial_files > 0) {
    std::printf(
        "%lld partial file(s) in tmp/: writes in progress, or left by a killed writer "
        "(prune removes them after an hour)\n",
        static_cast<long long>(st.partial_files));
  }
  if (!HasDatabase(f.state_dir)) {
    std::printf("no sweep recorded a model yet\n");
    return 0;
  }
  OpenedStore db;
  if (int rc = OpenStore("", f.state_dir, &db); rc != 0) return rc;
  auto use = db.store->ReferenceUse(0);
  if (!use.ok()) return Fail(use.status().ToString());
  PrintUse(*use);
  return 0;
}

int Prune(const refs::DirStore& s) {
  const std::string zoo = refs::ZooVersion(), torch = refs::TorchVersion();
  const refs::PruneResult r = s.Prune([&](const refs::Entry& e) {
    return e.key.device != refs::kCpuDevice || e.key.numerics == refs::kOtherImplementation ||
           (e.key.zoo_version == zoo && e.key.torch_version == torch);
  });
  std::printf(
      "pruned %lld keys and %lld bundles (%s) of builds other than zoo %s, torch %s; %lld "
      "partial file(s)\n",
      static_cast<long long>(r.keys_removed), static_cast<long long>(r.blobs_removed),
      Size(r.bytes_freed).c_str(), zoo.c_str(), torch.c_str(),
      static_cast<long long>(r.partial_files_removed));
  return 0;
}

int Import(const RefsFlags& f, const refs::DirStore& s) {
  std::error_code ec;
  if (!fs::is_directory(f.dir, ec)) return Usage("import: " + f.dir + ": not a folder");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(f.dir, ec)) {
    if (e.is_regular_file(ec)) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  int64_t imported = 0, failed = 0;
  for (const auto& p : files) {
    auto bytes = refs::ReadFileBytes(p.string());
    auto entry = bytes.ok() ? s.Import(*bytes) : StatusOr<refs::Entry>(bytes.status());
    if (!entry.ok()) {
      ++failed;
      std::fprintf(stderr, "touchstone refs: %s: %s (skipped)\n", p.string().c_str(),
                   entry.status().message().c_str());
      continue;
    }
    ++imported;
  }
  std::printf("imported %lld bundle(s) from %s; %lld file(s) refused\n",
              static_cast<long long>(imported), f.dir.c_str(), static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}

int Export(const RefsFlags& f, const refs::DirStore& s) {
  if (!HasDatabase(f.state_dir)) {
    return Usage("--state-dir: no embedded database under " + f.state_dir);
  }
  OpenedStore db;
  if (int rc = OpenStore("", f.state_dir, &db); rc != 0) return rc;
  auto entries = db.store->SweepReferences(f.sweep);
  if (!entries.ok()) return Fail(entries.status().ToString());
  std::error_code ec;
  fs::create_directories(f.dir, ec);
  if (ec) return Usage("export: " + f.dir + ": " + ec.message());
  int64_t written = 0, missing = 0;
  for (const auto& e : *entries) {
    auto bytes = s.ReadBlob(e.content_digest);
    if (!bytes.ok()) {
      ++missing;
      std::fprintf(stderr, "touchstone refs: %s\n", bytes.status().message().c_str());
      continue;
    }
    const fs::path out = fs::path(f.dir) / (e.content_digest + ".safetensors");
    std::ofstream o(out, std::ios::binary | std::ios::trunc);
    o.write(bytes->data(), static_cast<std::streamsize>(bytes->size()));
    if (!o) return Fail(out.string() + ": write failed");
    ++written;
  }
  std::printf("exported %lld bundle(s) of sweep %lld to %s; %lld missing from the store\n",
              static_cast<long long>(written), static_cast<long long>(f.sweep), f.dir.c_str(),
              static_cast<long long>(missing));
  return missing == 0 ? 0 : 1;
}

// One folder per catalog row (engine/run_export.h), named by its model id ('/' -> '_').
int Inputs(const RefsFlags& f) {
  if ((f.sample > 0) == !f.models.empty()) return Usage("give --sample N or --models ID,... (one)");
  const std::set<std::string> models(f.models.begin(), f.models.end());
  std::set<int64_t> lines;
  if (f.sample > 0) {
    auto sample = SampleCatalog(f.catalog, f.sample, f.seed);
    if (!sample.ok()) return Usage("--catalog: " + std::string(sample.status().message()));
    lines = sample->lines;
  } else {
    auto all = SampleCatalog(f.catalog, 0, 0);
    if (!all.ok()) return Usage("--catalog: " + std::string(all.status().message()));
    lines = all->lines;
  }
  int64_t written = 0, failed = 0;
  std::set<std::string> found;
  absl::Status st = ForEachRow(f.catalog, lines, [&](catalog::Row row) {
    if (!models.empty() && !models.count(row.id)) return absl::OkStatus();
    found.insert(row.id);
    engine::RunOptions o;
    o.arch = row.arch;
    o.seed = f.seed;
    o.model_id = row.id;
    std::string folder = row.id;
    for (char& c : folder) c = c == '/' ? '_' : c;
    const Status e = engine::ExportRun(row.config, o, (fs::path(f.out) / folder).string());
    if (!e.ok()) {
      ++failed;
      std::fprintf(stderr, "touchstone refs: %s: %s (skipped)\n", row.id.c_str(),
                   e.message().c_str());
      return absl::OkStatus();
    }
    ++written;
    return absl::OkStatus();
  });
  if (!st.ok()) return Fail(std::string(st.message()));
  for (const std::string& id : models) {
    if (!found.count(id)) {
      ++failed;
      std::fprintf(stderr, "touchstone refs: --models: %s is not in %s\n", id.c_str(),
                   f.catalog.c_str());
    }
  }
  std::printf("wrote %lld run folder(s) to %s; %lld failed\n", static_cast<long long>(written),
              f.out.c_str(), static_cast<long long>(failed));
  return failed == 0 ? 0 : 1;
}

// The bundles of the state folder, or of the fleet when --scheduler (or TOUCHSTONE_SCHEDULER)
// names one.
int Refs(const RefsFlags& f) {
  if (!f.client.scheduler.empty()) return RefsFleetCommand(f.client, f.sub, f.dir, f.sweep);
  auto s = refs::DirStore::Open(cluster::LocalCluster::ReferencesDir(f.state_dir));
  if (!s.ok()) return Usage("--state-dir: " + s.status().message());
  if (f.sub == "stats") return Stats(f, *s);
  if (f.sub == "prune") return Prune(*s);
  if (f.sub == "import") return Import(f, *s);
  return Export(f, *s);
}

// stats, prune, import and export: on the state folder, or a fleet's scheduler.
flags::Command& AddWhere(flags::Command& refs, const std::string& sub, const std::string& summary) {
  auto f = std::make_shared<RefsFlags>();
  f->sub = sub;
  f->client.scheduler.clear();
  flags::Command& c = refs.Add(sub, summary, [f] { return Refs(*f); });
  AddClientFlags(c, &f->client, /*format=*/false);
  c.Option("--state-dir", &f->state_dir, "DIR",
           "else the bundles under this state folder (STATE/refs)")
      .Dir()
      .Excludes("--scheduler");
  if (sub == "import") {
    c.Positional("DIR", &f->dir, "a folder of bundle files").Required().Dir();
  } else if (sub == "export") {
    c.Option("--sweep", &f->sweep, "ID", "the sweep whose bundles to write").Required().Min(1);
    c.Positional("DIR", &f->dir, "the folder to write <sha256>.safetensors into").Required().Dir();
  }
  return c;
}

}  // namespace

void AddRefsCommands(flags::Command& root) {
  flags::Command& refs = root.Group(
      "refs",
      "reference bundles: under --state-dir (default .touchstone), or a fleet's held by its "
      "scheduler (--scheduler HOST:PORT --token-file F)");
  AddWhere(refs, "stats",
           "'N bundles, SIZE' and the newest sweep's hit rate (models whose references came from "
           "a stored bundle)");
  AddWhere(refs, "prune",
           "drop the CPU bundles of other builds (another zoo or torch version: never used "
           "again) and what a killed writer left");
  AddWhere(refs, "import",
           "store every bundle file in DIR under the key written inside it (make_references.py's "
           "GPU bundles)");
  AddWhere(refs, "export", "write the bundles a sweep used into DIR as <sha256>.safetensors");

  auto in = std::make_shared<RefsFlags>();
  flags::Command& inputs =
      refs.Add("inputs",
               "each catalog row's run (config, weights, batch, key) as a folder for "
               "clients/python/make_references.py (references from transformers on a GPU)",
               [in] { return Inputs(*in); });
  inputs.Option("--catalog", &in->catalog, "FILE", "the catalog (JSON lines)").Required().File();
  inputs.Option("--sample", &in->sample, "N", "a stratified sample of N rows").Min(1).Default("");
  inputs.Option("--models", &in->models, "ID,...", "these rows instead")
      .Split(',')
      .Excludes("--sample");
  inputs.Option("--seed", &in->seed, "S", "the sample's and the runs' seed");
  inputs.Option("--out", &in->out, "DIR", "one folder per run, named by model id").Required().Dir();
  inputs.Notes("exit: 0 done, 2 usage or an unreadable catalog, 1 a run that could not be written");
}

}  // namespace ts::cli
