#include "cli/refs.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

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

constexpr CommandText kRefs = {
    "touchstone refs", "touchstone refs",
    "usage: touchstone refs stats  [--state-dir DIR | --scheduler HOST:PORT --token-file F]\n"
    "       touchstone refs prune  [--state-dir DIR | --scheduler HOST:PORT --token-file F]\n"
    "       touchstone refs import DIR [--state-dir DIR | --scheduler HOST:PORT ...]\n"
    "       touchstone refs export --sweep ID DIR [--state-dir DIR | --scheduler HOST:PORT ...]\n"
    "       touchstone refs inputs --catalog FILE (--sample N | --models ID,...) [--seed S]\n"
    "                              --out DIR\n"
    "  Reference bundles (workers/refs/README.md) under --state-dir (default .touchstone), or a\n"
    "  fleet's, held by its scheduler (--scheduler; --tls-ca FILE for TLS):\n"
    "  stats: 'N bundles, SIZE' and the newest sweep's hit rate (models whose references came\n"
    "  from a stored bundle); prune: drop the CPU bundles of other builds (another zoo or torch\n"
    "  version: never used again) and what a killed writer left; import: store every bundle\n"
    "  file in DIR under the key written inside it (make_references.py's GPU bundles); export:\n"
    "  write the bundles a sweep used into DIR as <sha256>.safetensors; inputs: each catalog\n"
    "  row's run (config, weights, batch, key) as a folder for clients/python/make_references.py\n"
    "  (references from transformers on a GPU; scripts/gpu_references).\n"};

struct Flags {
  std::string sub;
  std::vector<std::string> client;  // --scheduler, --token-file, --tls-ca and their values
  std::string state_dir = ".touchstone";
  std::string dir;   // import / export
  int64_t sweep = 0; // export
  // inputs
  std::string catalog, out;
  int64_t sample = 0;
  std::set<std::string> models;
  int64_t seed = 0;
};

int Parse(const std::vector<std::string>& args, Flags* f) {
  if (args.empty()) return Usage(kRefs, "expected stats, prune, import or export");
  f->sub = args[0];
  if (f->sub != "stats" && f->sub != "prune" && f->sub != "import" && f->sub != "export" &&
      f->sub != "inputs") {
    return Usage(kRefs, "unknown subcommand '" + f->sub + "'");
  }
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has = i + 1 < args.size();
    if ((a == "--scheduler" || a == "--token-file" || a == "--tls-ca") && has) {
      f->client.push_back(a);
      f->client.push_back(args[++i]);
    } else if (a == "--state-dir" && has) {
      f->state_dir = args[++i];
    } else if (a == "--sweep" && has && f->sub == "export") {
      if (!ParseNonNegative(args[++i], &f->sweep) || f->sweep == 0) {
        return Usage(kRefs, "--sweep: a sweep id (a positive number)");
      }
    } else if (f->sub == "inputs" && a == "--catalog" && has) {
      f->catalog = args[++i];
    } else if (f->sub == "inputs" && a == "--out" && has) {
      f->out = args[++i];
    } else if (f->sub == "inputs" && a == "--sample" && has) {
      if (!ParseNonNegative(args[++i], &f->sample) || f->sample == 0) {
        return Usage(kRefs, "--sample: a positive number");
      }
    } else if (f->sub == "inputs" && a == "--seed" && has) {
      if (!ParseNonNegative(args[++i], &f->seed)) return Usage(kRefs, "--seed: not a number");
    } else if (f->sub == "inputs" && a == "--models" && has) {
      std::stringstream ss(args[++i]);
      for (std::string id; std::getline(ss, id, ',');) {
        if (!id.empty()) f->models.insert(id);
      }
    } else if (a.rfind("--", 0) != 0 && f->dir.empty() &&
               (f->sub == "import" || f->sub == "export")) {
      f->dir = a;
    } else {
      return Usage(kRefs, f->sub + ": unknown or incomplete argument '" + a + "'");
    }
  }
  if ((f->sub == "import" || f->sub == "export") && f->dir.empty()) {
    return Usage(kRefs, f->sub + ": the folder DIR is required");
  }
  if (f->sub == "export" && f->sweep == 0) return Usage(kRefs, "export: --sweep ID is required");
  if (f->sub == "inputs" && (f->catalog.empty() || f->out.empty())) {
    return Usage(kRefs, "inputs: --catalog FILE and --out DIR are required");
  }
  if (f->sub == "inputs" && (f->sample > 0) == !f->models.empty()) {
    return Usage(kRefs, "inputs: give --sample N or --models ID,... (one of them)");
  }
  return 0;
}

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
    std::printf("%lld modes judged against references from elsewhere too; %lld with the "
                "reference in question (ours and another disagree beyond their noise)\n",
                static_cast<long long>(u.modes_compared),
                static_cast<long long>(u.modes_in_question));
  }
}

// The embedded database, when the state folder has one (a sweep ran there).
bool HasDatabase(const std::string& state_dir) {
  std::error_code ec;
  return fs::exists(fs::path(cluster::LocalCluster::EmbeddedDataDir(state_dir)) / "PG_VERSION",
                    ec);
}

int Stats(const Flags& f, const refs::DirStore& s) {
  const refs::StoreStats st = s.Stats();
  std::printf("%lld bundles, %s (%lld keys; %s)\n", static_cast<long long>(st.blobs),
              Size(st.blob_bytes).c_str(), static_cast<long long>(st.keys), s.root().c_str());
  if (st.partial_files > 0) {
    std::printf("%lld partial file(s) in tmp/: writes in progress, or left by a killed writer "
                "(prune removes them after an hour)\n",
                static_cast<long long>(st.partial_files));
  }
  if (!HasDatabase(f.state_dir)) {
    std::printf("no sweep recorded a model yet\n");
    return 0;
  }
  OpenedStore db;
  if (int rc = OpenStore("", f.state_dir, &db, kRefs); rc != 0) return rc;
  auto use = db.store->ReferenceUse(0);
  if (!use.ok()) return Fail(kRefs, use.status().ToString());
  PrintUse(*use);
  return 0;
}

int Prune(const refs::DirStore& s) {
  const std::string zoo = refs::ZooVersion(), torch = refs::TorchVersion();
  const refs::PruneResult r = s.Prune([&](const refs::Entry& e) {
    return e.key.device != refs::kCpuDevice || e.key.numerics == refs::kOtherImplementation ||
           (e.key.zoo_version == zoo && e.key.torch_version == torch);
  });
  std::printf("pruned %lld keys and %lld bundles (%s) of builds other than zoo %s, torch %s; %lld "
              "partial file(s)\n",
              static_cast<long long>(r.keys_removed), static_cast<long long>(r.blobs_removed),
              Size(r.bytes_freed).c_str(), zoo.c_str(), torch.c_str(),
              static_cast<long long>(r.partial_files_removed));
  return 0;
}

int Import(const Flags& f, const refs::DirStore& s) {
  std::error_code ec;
  if (!fs::is_directory(f.dir, ec)) return Usage(kRefs, "import: " + f.dir + ": not a folder");
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

int Export(const Flags& f, const refs::DirStore& s) {
  if (!HasDatabase(f.state_dir)) {
    return Usage(kRefs, "--state-dir: no embedded database under " + f.state_dir);
  }
  OpenedStore db;
  if (int rc = OpenStore("", f.state_dir, &db, kRefs); rc != 0) return rc;
  auto entries = db.store->SweepReferences(f.sweep);
  if (!entries.ok()) return Fail(kRefs, entries.status().ToString());
  std::error_code ec;
  fs::create_directories(f.dir, ec);
  if (ec) return Usage(kRefs, "export: " + f.dir + ": " + ec.message());
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
    if (!o) return Fail(kRefs, out.string() + ": write failed");
    ++written;
  }
  std::printf("exported %lld bundle(s) of sweep %lld to %s; %lld missing from the store\n",
              static_cast<long long>(written), static_cast<long long>(f.sweep), f.dir.c_str(),
              static_cast<long long>(missing));
  return missing == 0 ? 0 : 1;
}

// One folder per catalog row (engine/run_export.h), named by its model id ('/' -> '_').
int Inputs(const Flags& f) {
  std::set<int64_t> lines;
  if (f.sample > 0) {
    auto sample = SampleCatalog(f.catalog, f.sample, static_cast<uint64_t>(f.seed));
    if (!sample.ok()) return Usage(kRefs, "--catalog: " + std::string(sample.status().message()));
    lines = sample->lines;
  } else {
    auto all = SampleCatalog(f.catalog, 0, 0);
    if (!all.ok()) return Usage(kRefs, "--catalog: " + std::string(all.status().message()));
    lines = all->lines;
  }
  int64_t written = 0, failed = 0;
  std::set<std::string> found;
  absl::Status st = ForEachRow(f.catalog, lines, [&](catalog::Row row) {
    if (!f.models.empty() && !f.models.count(row.id)) return absl::OkStatus();
    found.insert(row.id);
    engine::RunOptions o;
    o.arch = row.arch;
    o.seed = static_cast<uint64_t>(f.seed);
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
  if (!st.ok()) return Fail(kRefs, std::string(st.message()));
  for (const std::string& id : f.models) {
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

}  // namespace

int RefsCommand(const std::vector<std::string>& args) {
  Flags f;
  if (int rc = Parse(args, &f); rc != 0) return rc;
  if (f.sub == "inputs") return Inputs(f);
  if (!f.client.empty()) return RefsFleetCommand(f.client, f.sub, f.dir, f.sweep);
  auto s = refs::DirStore::Open(cluster::LocalCluster::ReferencesDir(f.state_dir));
  if (!s.ok()) return Usage(kRefs, "--state-dir: " + s.status().message());
  if (f.sub == "stats") return Stats(f, *s);
  if (f.sub == "prune") return Prune(*s);
  if (f.sub == "import") return Import(f, *s);
  return Export(f, *s);
}

}  // namespace ts::cli
