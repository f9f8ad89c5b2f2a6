#include "cli/sweep.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "services/common/process.h"
#include "services/store/embedded_postgres.h"
#include "services/store/store.h"
#include "touchstone/v1/scheduler.grpc.pb.h"
#include "workers/catalog/catalog.h"
#include "workers/catalog/summary.h"
#include "workers/simdevice/profile.h"

namespace ts::cli {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using Clock = std::chrono::steady_clock;

constexpr const char* kSweepUsage =
    "usage: touchstone sweep [--sample N|all] [--profile FILE] [--workers W] [--db URL]\n"
    "                        [--baseline SWEEP] [--json FILE] [--serve] [--catalog FILE]\n"
    "                        [--seed N] [--modes eager,compile,train] [--state-dir DIR]\n"
    "                        [--lease-ttl S] [--model-timeout S]\n";

std::atomic<bool> interrupted{false};

int Usage(const std::string& why) {
  std::fprintf(stderr, "touchstone: %s\n%s", why.c_str(), kSweepUsage);
  return 2;
}
int Fail(const std::string& why) {
  std::fprintf(stderr, "touchstone sweep: %s\n", why.c_str());
  return 1;
}

bool ParseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (*end != '\0' || v < 0) return false;
  *out = v;
  return true;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string RandomToken() {
  std::random_device rd;
  char buf[33];
  std::snprintf(buf, sizeof(buf), "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

// A service process this command started: respawned if it dies while the sweep runs.
struct Service {
  std::vector<std::string> argv;
  std::string log;
  pid_t pid = -1;
  int restarts = 0;
};

absl::Status Launch(Service* s) {
  common::SpawnOptions o;
  o.log_path = s->log;
  // Their own process group: a terminal's Ctrl-C reaches only this command, which then stops
  // the workers (they drain and release their shards) before the scheduler.
  o.new_process_group = true;
  auto pid = common::Spawn(s->argv, o);
  if (!pid.ok()) return pid.status();
  s->pid = *pid;
  return absl::OkStatus();
}

struct Options {
  int64_t sample = 1000;
  std::string profile;
  int workers = 0;
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
};

}  // namespace

namespace {

constexpr const char* kDbUsage =
    "usage: touchstone db migrate --db URL\n"
    "       touchstone db prune [--db URL | --state-dir DIR] [--sweep ID]... [--older-than DAYS]\n"
    "                           [--keep N] [--dry-run]\n"
    "  prune: drop finished sweeps' results (a tombstone with their counts stays). --older-than:\n"
    "  those that finished more than DAYS ago; --keep: all but the newest N (both: both rules);\n"
    "  --sweep: these. Never a running sweep or a running sweep's baseline. Without --db, the\n"
    "  embedded database under --state-dir (default .touchstone).\n";

// Where `touchstone sweep` keeps its embedded cluster under the state folder (and where
// `db prune` looks for it).
std::string EmbeddedDataDir(const std::string& state_dir) {
  return (fs::absolute(state_dir) / "pg" / "data").string();
}

int DbUsage(const std::string& why) {
  std::fprintf(stderr, "touchstone db: %s\n%s", why.c_str(), kDbUsage);
  return 2;
}
int DbFail(const std::string& why) {
  std::fprintf(stderr, "touchstone db: %s\n", why.c_str());
  return 1;
}

int DbMigrate(const std::string& url) {
  store::StoreOptions o;
  o.url = url;
  auto s = store::Store::Connect(o);
  if (!s.ok()) return DbFail(s.status().ToString());
  if (auto st = (*s)->Migrate(); !st.ok()) return DbFail(st.ToString());
  auto v = (*s)->AppliedMigrations();
  if (!v.ok()) return DbFail(v.status().ToString());
  std::printf("schema at version %d (%zu migrations applied)\n", v->empty() ? 0 : v->back(),
              v->size());
  return 0;
}

int DbPrune(const std::vector<std::string>& args) {
  store::PruneRequest req;
  std::string db, state_dir = ".touchstone";
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has = i + 1 < args.size();
    int64_t v = 0;
    if (a == "--db" && has) {
      db = args[++i];
    } else if (a == "--state-dir" && has) {
      state_dir = args[++i];
    } else if (a == "--sweep" && has) {
      if (!ParseInt(args[++i], &v) || v == 0) {
        return DbUsage("--sweep: expected a sweep id, got '" + args[i] + "'");
      }
      req.sweep_ids.push_back(v);
    } else if (a == "--older-than" && has) {
      char* end = nullptr;
      const double days = std::strtod(args[++i].c_str(), &end);
      if (args[i].empty() || *end != '\0' || !(days >= 0)) {
        return DbUsage("--older-than: expected days >= 0, got '" + args[i] + "'");
      }
      req.older_than_s = days * 86400;
    } else if (a == "--keep" && has) {
      if (!ParseInt(args[++i], &v)) return DbUsage("--keep: expected N >= 0, got '" + args[i] + "'");
      req.keep_last = v;
    } else if (a == "--dry-run") {
      req.dry_run = true;
    } else {
      return DbUsage("prune: unknown or incomplete argument '" + a + "'");
    }
  }
  if (req.sweep_ids.empty() && req.older_than_s < 0 && req.keep_last < 0) {
    return DbUsage("prune: give --sweep, --older-than or --keep");
  }
  std::unique_ptr<store::EmbeddedPostgres> pg;
  if (db.empty()) {
    // Only an existing embedded cluster: pruning never creates one.
    const fs::path data = EmbeddedDataDir(state_dir);
    std::error_code ec;
    if (!fs::exists(data / "PG_VERSION", ec)) {
      return DbUsage("--state-dir: no embedded database under " + data.string() +
                     " (give --db URL for another one)");
    }
    store::EmbeddedPostgresOptions po;
    po.data_dir = data.string();
    auto p = store::EmbeddedPostgres::Start(po);
    if (!p.ok()) return DbFail(p.status().ToString());
    pg = std::move(*p);
    db = pg->url();
  }
  store::StoreOptions o;
  o.url = db;
  auto s = store::Store::Connect(o);
  if (!s.ok()) return DbFail(s.status().ToString());
  if (auto st = (*s)->Migrate(); !st.ok()) return DbFail(st.ToString());
  auto r = (*s)->PruneSweeps(req);
  if (!r.ok()) {
    std::fprintf(stderr, "touchstone db prune: %s\n", std::string(r.status().message()).c_str());
    const auto code = r.status().code();
    return code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound ||
                   code == absl::StatusCode::kFailedPrecondition
               ? 2
               : 1;
  }
  const char* verb = req.dry_run ? "would prune" : "pruned";
  int64_t models = 0;
  for (const auto& p : r->pruned) {
    std::printf("%s sweep %lld '%s' (%s, %lld models recorded)\n", verb,
                static_cast<long long>(p.sweep_id), p.name.c_str(), p.state.c_str(),
                static_cast<long long>(p.models_recorded));
    models += p.models_recorded;
  }
  for (const auto& k : r->kept) std::printf("kept %s\n", k.c_str());
  for (int64_t id : r->already) {
    std::printf("sweep %lld was already pruned\n", static_cast<long long>(id));
  }
  for (int64_t id : r->completed) {
    std::printf("finished the interrupted prune of sweep %lld\n", static_cast<long long>(id));
  }
  std::printf("%s %zu sweep(s), %lld models' results\n", verb, r->pruned.size(),
              static_cast<long long>(models));
  return 0;
}

}  // namespace

int DbCommand(const std::vector<std::string>& args) {
  if (args.size() == 3 && args[0] == "migrate" && args[1] == "--db") return DbMigrate(args[2]);
  if (!args.empty() && args[0] == "prune") return DbPrune(args);
  return DbUsage("expected 'db migrate --db URL' or 'db prune ...'");
}

int SweepCommand(const std::vector<std::string>& args, const std::string& data_dir) {
  Options o;
  o.profile = std::string(TS_PROFILES_DIR) + "/sim-2.0.json";
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has = i + 1 < args.size();
    int64_t v = 0;
    if (a == "--sample" && has) {
      const std::string s = args[++i];
      if (s == "all") {
        o.sample = 0;
      } else if (!ParseInt(s, &o.sample) || o.sample == 0) {
        return Usage("--sample: a positive number or 'all'");
      }
    } else if (a == "--profile" && has) {
      o.profile = args[++i];
    } else if (a == "--workers" && has) {
      if (!ParseInt(args[++i], &v) || v < 1 || v > 256) return Usage("--workers: 1..256");
      o.workers = static_cast<int>(v);
    } else if (a == "--db" && has) {
      o.db = args[++i];
    } else if (a == "--baseline" && has) {
      if (!ParseInt(args[++i], &o.baseline) || o.baseline == 0) {
        return Usage("--baseline: a sweep id");
      }
    } else if (a == "--json" && has) {
      o.json_out = args[++i];
    } else if (a == "--serve") {
      o.serve = true;
    } else if (a == "--catalog" && has) {
      o.catalog = args[++i];
    } else if (a == "--seed" && has) {
      if (!ParseInt(args[++i], &v)) return Usage("--seed: not a number");
      o.seed = static_cast<uint64_t>(v);
    } else if (a == "--modes" && has) {
      std::stringstream ss(args[++i]);
      std::string m;
      while (std::getline(ss, m, ',')) {
        if (m != "eager" && m != "compile" && m != "train") {
          return Usage("--modes: unknown mode '" + m + "'");
        }
        o.modes.push_back(m);
      }
    } else if (a == "--state-dir" && has) {
      o.state_dir = args[++i];
    } else if (a == "--lease-ttl" && has) {
      o.lease_ttl_s = std::atof(args[++i].c_str());
      if (!(o.lease_ttl_s > 0)) return Usage("--lease-ttl: seconds > 0");
    } else if (a == "--model-timeout" && has) {
      o.model_timeout_s = std::atof(args[++i].c_str());
      if (!(o.model_timeout_s > 0)) return Usage("--model-timeout: seconds > 0");
    } else {
      return Usage("sweep: unknown argument '" + a + "'");
    }
  }
  if (o.workers == 0) o.workers = std::max(1u, std::thread::hardware_concurrency());

  // The profile is checked here, field by field, before anything starts.
  std::error_code ec;
  if (!fs::is_regular_file(o.profile, ec)) return Usage("--profile: cannot read " + o.profile);
  const std::string profile_text = ReadAll(o.profile);
  auto profile = simdevice::ParseProfile(profile_text);
  if (!profile.ok()) {
    std::fprintf(stderr, "touchstone: profile %s: %s\n", o.profile.c_str(),
                 profile.status().message().c_str());
    return 2;
  }
  fs::create_directories(o.state_dir + "/logs", ec);
  if (ec) return Usage("--state-dir: " + ec.message());
  const std::string state = fs::absolute(o.state_dir).string();
  const std::string bin = common::SelfDir();
  const auto t_start = Clock::now();

  // Ctrl-C stops the sweep cleanly (services are stopped; results stay in the database).
  struct sigaction sa {};
  sa.sa_handler = [](int) { interrupted = true; };
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);

  // 1. Database.
  std::unique_ptr<store::EmbeddedPostgres> pg;
  std::string db = o.db;
  if (db.empty()) {
    store::EmbeddedPostgresOptions po;
    po.data_dir = EmbeddedDataDir(state);
    std::fprintf(stderr, "touchstone sweep: starting embedded PostgreSQL under %s\n",
                 po.data_dir.c_str());
    auto p = store::EmbeddedPostgres::Start(po);
    if (!p.ok()) return Fail(p.status().ToString());
    pg = std::move(*p);
    db = pg->url();
  }

  // 2. Scheduler.
  const std::string token_file = state + "/token";
  if (!fs::exists(token_file)) {
    std::ofstream(token_file) << RandomToken() << "\n";
    fs::permissions(token_file, fs::perms::owner_read | fs::perms::owner_write, ec);
  }
  std::string token = ReadAll(token_file);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) token.pop_back();
  const std::string port_file = state + "/scheduler.ports";
  fs::remove(port_file, ec);
  Service scheduler;
  scheduler.argv = {bin + "/touchstone-scheduler", "--db", db, "--listen", "127.0.0.1:0",
                    "--http-port", "0", "--token-file", token_file, "--port-file", port_file,
                    "--lease-ttl", std::to_string(o.lease_ttl_s)};
  scheduler.log = state + "/logs/scheduler.log";
  std::vector<Service> workers;
  auto stop_all = [&] {
    for (auto& w : workers) {
      if (w.pid > 0) ::kill(w.pid, SIGTERM);
    }
    for (auto& w : workers) {
      if (w.pid > 0) common::WaitFor(w.pid, 30);
      if (w.pid > 0) common::Stop(w.pid, 1);
      w.pid = -1;
    }
    if (scheduler.pid > 0) common::Stop(scheduler.pid, 15);
    scheduler.pid = -1;
  };
  if (auto st = Launch(&scheduler); !st.ok()) return Fail(st.ToString());
  int grpc_port = 0, http_port = 0;
  for (int i = 0; i < 1200 && grpc_port == 0; ++i) {
    if (fs::exists(port_file)) {
      auto j = nlohmann::json::parse(ReadAll(port_file), nullptr, false);
      if (!j.is_discarded()) {
        grpc_port = j.value("grpc_port", 0);
        http_port = j.value("http_port", 0);
      }
    }
    if (grpc_port) break;
    if (common::WaitFor(scheduler.pid, 0).exited || interrupted) {
      scheduler.pid = -1;
      stop_all();
      return Fail("the scheduler did not start; see " + scheduler.log);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (grpc_port == 0) {
    stop_all();
    return Fail("the scheduler did not report its port in 60 s; see " + scheduler.log);
  }
  const std::string target = "127.0.0.1:" + std::to_string(grpc_port);
  grpc::ChannelArguments cargs;
  cargs.SetMaxSendMessageSize(64 << 20);
  cargs.SetMaxReceiveMessageSize(64 << 20);
  auto stub = pb::Scheduler::NewStub(
      grpc::CreateCustomChannel(target, grpc::InsecureChannelCredentials(), cargs));
  auto call = [&](auto method, const auto& req, auto* resp) {
    for (int attempt = 0;; ++attempt) {
      grpc::ClientContext ctx;
      ctx.AddMetadata("authorization", "Bearer " + token);
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(300));
      grpc::Status st = (stub.get()->*method)(&ctx, req, resp);
      if (st.ok() || st.error_code() != grpc::StatusCode::UNAVAILABLE || attempt > 100) return st;
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  };

  // 3. Catalog rows: the same stratified sample run-catalog takes.
  std::string catalog_path = o.catalog;
  if (catalog_path.empty()) {
    catalog_path = state + "/catalog-seed0.jsonl";
    if (!fs::exists(catalog_path)) {
      std::fprintf(stderr, "touchstone sweep: generating the 104,909-model catalog\n");
      std::ofstream out(catalog_path + ".tmp");
      catalog::GenerateOptions go;
      go.data_dir = data_dir;
      auto g = catalog::Generate(go, out);
      out.close();
      if (!g.ok()) {
        stop_all();
        return Fail("catalog: " + g.status().message());
      }
      fs::rename(catalog_path + ".tmp", catalog_path, ec);
    }
  }
  std::vector<catalog::Row> keys;
  {
    std::ifstream in(catalog_path);
    if (!in) {
      stop_all();
      return Usage("--catalog: cannot read " + catalog_path);
    }
    std::string line;
    int64_t line_no = 0;
    while (std::getline(in, line)) {
      ++line_no;
      if (line.empty()) continue;
      auto k = catalog::ParseKeys(line);
      if (!k.ok()) continue;
      k->config_hash = std::to_string(line_no);
      keys.push_back(std::move(*k));
    }
  }
  std::vector<catalog::Row> picked =
      o.sample > 0 ? catalog::StratifiedSample(keys, o.sample, o.seed) : keys;
  std::set<int64_t> wanted;
  for (const auto& r : picked) wanted.insert(std::stoll(r.config_hash));
  std::map<std::string, std::pair<std::string, std::string>> task_arch;  // id -> task, arch
  pb::CreateSweepRequest create;
  {
    std::ifstream in(catalog_path);
    std::string line;
    int64_t line_no = 0;
    pb::UpsertModelsRequest up;
    auto flush = [&]() -> grpc::Status {
      if (up.models_size() == 0) return grpc::Status::OK;
      pb::UpsertModelsResponse resp;
      grpc::Status st = call(&pb::Scheduler::Stub::UpsertModels, up, &resp);
      up.clear_models();
      return st;
    };
    while (std::getline(in, line)) {
      ++line_no;
      if (!wanted.count(line_no)) continue;
      auto r = catalog::ParseJsonLine(line);
      if (!r.ok()) continue;
      auto* m = up.add_models();
      m->set_id(r->id);
      m->set_task(r->task);
      m->set_arch(r->arch);
      m->set_family(r->family);
      m->set_config_json(r->config.dump());
      m->set_config_hash(r->config_hash);
      create.mutable_filter()->add_model_ids(r->id);
      task_arch[r->id] = {r->task, r->arch};
      if (up.models_size() >= 2000) {
        if (auto st = flush(); !st.ok()) {
          stop_all();
          return Fail("loading the catalog: " + st.error_message());
        }
      }
    }
    if (auto st = flush(); !st.ok()) {
      stop_all();
      return Fail("loading the catalog: " + st.error_message());
    }
  }

  // 4. The sweep.
  create.set_name(o.sample > 0 ? "sample-" + std::to_string(o.sample) : "full");
  create.mutable_profile()->set_name(profile->name);
  create.mutable_profile()->set_body(profile_text);
  create.set_seed(o.seed);
  for (const auto& m : o.modes) create.add_modes(m);
  create.set_baseline_sweep_id(o.baseline);
  create.set_model_timeout_s(o.model_timeout_s);
  pb::CreateSweepResponse created;
  if (auto st = call(&pb::Scheduler::Stub::CreateSweep, create, &created); !st.ok()) {
    stop_all();
    if (st.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      std::fprintf(stderr, "touchstone: %s\n", st.error_message().c_str());
      return 2;
    }
    return Fail("CreateSweep: " + st.error_message());
  }
  std::fprintf(stderr,
               "touchstone sweep: sweep %lld: %lld models in %lld shards, %d workers, profile %s\n",
               static_cast<long long>(created.sweep_id()), static_cast<long long>(created.models()),
               static_cast<long long>(created.shards()), o.workers, profile->name.c_str());

  // 5. Workers.
  for (int i = 0; i < o.workers; ++i) {
    Service w;
    w.argv = {bin + "/touchstone-worker", "--scheduler", target, "--token-file", token_file,
              "--name", "sweep-" + std::to_string(::getpid()) + "/w" + std::to_string(i),
              "--state-dir", state + "/workers/w" + std::to_string(i), "--http-port", "-1"};
    w.log = state + "/logs/worker-" + std::to_string(i) + ".log";
    if (auto st = Launch(&w); !st.ok()) {
      stop_all();
      return Fail(st.ToString());
    }
    workers.push_back(std::move(w));
  }

  // 6. Progress until done; dead services are restarted (their work is requeued by lease).
  pb::GetSweepRequest get;
  get.set_sweep_id(created.sweep_id());
  pb::SweepProgress p;
  const bool tty = ::isatty(2);
  auto last_line = Clock::now() - std::chrono::seconds(60);
  const auto t_sweep = Clock::now();
  for (;;) {
    if (interrupted) {
      // Cancel first, so that no worker (here or elsewhere) picks up its remaining shards.
      pb::CancelSweepRequest cancel;
      cancel.set_sweep_id(created.sweep_id());
      pb::SweepProgress cp;
      grpc::ClientContext cctx;
      cctx.AddMetadata("authorization", "Bearer " + token);
      cctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
      grpc::Status cst = stub->CancelSweep(&cctx, cancel, &cp);
      std::fprintf(stderr,
                   "\ntouchstone sweep: interrupted; sweep %lld %s (%lld of %lld models "
                   "recorded stay in the database); stopping services\n",
                   static_cast<long long>(created.sweep_id()),
                   cst.ok() ? "cancelled" : ("not cancelled: " + cst.error_message()).c_str(),
                   static_cast<long long>(cp.models_recorded()),
                   static_cast<long long>(cp.models_expected()));
      stop_all();
      return 1;
    }
    for (auto* s : [&] {
           std::vector<Service*> v = {&scheduler};
           for (auto& w : workers) v.push_back(&w);
           return v;
         }()) {
      auto e = common::WaitFor(s->pid, 0);
      if (!e.exited) continue;
      ++s->restarts;
      std::fprintf(stderr, "\ntouchstone sweep: %s exited (code %d, signal %d); restarting\n",
                   s->argv[0].c_str(), e.code, e.signal);
      if (s == &scheduler) {
        // Same port as before, so workers reconnect to it.
        scheduler.argv[4] = target;
      }
      if (s->restarts > 20 || !Launch(s).ok()) {
        s->pid = -1;
        stop_all();
        return Fail(s->argv[0] + " keeps dying; see " + s->log);
      }
    }
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + token);
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    const auto t_poll = Clock::now();
    grpc::Status st = stub->GetSweep(&ctx, get, &p);
    const auto poll_cost = Clock::now() - t_poll;
    if (st.ok()) {
      const double secs = std::chrono::duration<double>(Clock::now() - t_sweep).count();
      const double rate = secs > 0 ? p.models_recorded() / secs : 0;
      const double eta =
          rate > 0 ? (p.models_expected() - p.models_recorded()) / rate : 0;
      if (tty || Clock::now() - last_line > std::chrono::seconds(10) || p.state() != "running") {
        std::fprintf(stderr,
                     "%s%lld/%lld models  %.1f models/s  ETA %.0f s  failures %lld  "
                     "confirmation runs %lld/%lld%s",
                     tty ? "\r" : "", static_cast<long long>(p.models_recorded()),
                     static_cast<long long>(p.models_expected()), rate, eta,
                     static_cast<long long>(p.failures()),
                     static_cast<long long>(p.jobs_done() - p.models_recorded()),
                     static_cast<long long>(p.jobs_total() - p.models_expected()),
                     tty ? "   " : "\n");
        last_line = Clock::now();
      }
      if (p.state() != "running") break;
    }
    // GetSweep counts over the sweep's jobs and results, so it grows with the sweep (~0.3 s of
    // PostgreSQL at 100k models): poll once a second, but never spend more than ~5% of the
    // time on it, which would be taken from the models.
    std::this_thread::sleep_for(std::clamp<Clock::duration>(20 * poll_cost, std::chrono::seconds(1),
                                                            std::chrono::seconds(15)));
  }
  if (tty) std::fprintf(stderr, "\n");
  const double sweep_s = std::chrono::duration<double>(Clock::now() - t_sweep).count();

  // 7. The table, from the stored results.
  catalog::Summary summary;
  pb::ListResultsRequest lr;
  lr.set_sweep_id(created.sweep_id());
  grpc::ClientContext lctx;
  lctx.AddMetadata("authorization", "Bearer " + token);
  auto reader = stub->ListResults(&lctx, lr);
  pb::ResultPage page;
  int64_t listed = 0, flaky = 0, deterministic = 0;
  while (reader->Read(&page)) {
    for (const auto& row : page.rows()) {
      nlohmann::json r;
      for (const auto& [mode, status] : row.status()) r["modes"][mode]["status"] = status;
      r["op_coverage"]["ratio"] = row.opcov_ratio();
      summary.Add(row.task(), row.arch(), r);
      ++listed;
      flaky += row.confirmation() == "flaky";
      deterministic += row.confirmation() == "deterministic";
    }
  }
  grpc::Status lst = reader->Finish();
  if (!lst.ok()) {
    stop_all();
    return Fail("ListResults: " + lst.error_message());
  }
  std::printf("%s", summary.ToText().c_str());
  std::printf("sweep %lld: %lld/%lld models recorded, %lld duplicates, %.1f s (%.2f models/s)\n",
              static_cast<long long>(created.sweep_id()),
              static_cast<long long>(p.models_recorded()),
              static_cast<long long>(p.models_expected()), static_cast<long long>(p.duplicates()),
              sweep_s, sweep_s > 0 ? p.models_recorded() / sweep_s : 0.0);
  if (o.baseline > 0) {
    std::printf("new failures vs sweep %lld: %lld deterministic, %lld flaky\n",
                static_cast<long long>(o.baseline), static_cast<long long>(deterministic),
                static_cast<long long>(flaky));
  }
  if (!o.json_out.empty()) {
    nlohmann::json j = summary.ToJson();
    j["sweep_id"] = created.sweep_id();
    j["models_expected"] = p.models_expected();
    j["models_recorded"] = p.models_recorded();
    j["models_listed"] = listed;
    j["duplicates"] = p.duplicates();
    j["failures"] = p.failures();
    j["confirmed_deterministic"] = p.confirmed_deterministic();
    j["confirmed_flaky"] = p.confirmed_flaky();
    j["profile"] = profile->name;
    j["workers"] = o.workers;
    j["sweep_s"] = sweep_s;
    j["total_s"] = std::chrono::duration<double>(Clock::now() - t_start).count();
    j["restarts"] = {{"scheduler", scheduler.restarts}};
    std::ofstream(o.json_out) << j.dump(2) << "\n";
  }
  if (o.serve) {
    for (auto& w : workers) {
      if (w.pid > 0) ::kill(w.pid, SIGTERM);
    }
    std::fprintf(stderr,
                 "touchstone sweep: serving: scheduler gRPC %s, HTTP http://127.0.0.1:%d/metrics "
                 "(token in %s), database %s. Ctrl-C stops.\n",
                 target.c_str(), http_port, token_file.c_str(), db.c_str());
    while (!interrupted) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  stop_all();
  return 0;
}

}  // namespace ts::cli
