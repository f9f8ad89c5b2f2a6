// services/cluster as a library: a LocalCluster (embedded PostgreSQL, scheduler, workers) on a
// throwaway state folder and a SweepDriver run a small sweep to completion through a scheduler
// restart and a scheduler crash, then the cluster stops in order. No torch: the models are real
// Hugging Face configs from ../shared/data/hf-configs, given to the scheduler as they are.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/fixtures/subprocess.h"
#include "services/cluster/local_cluster.h"
#include "services/cluster/sweep_driver.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using json = nlohmann::json;

constexpr int kModels = 20;

using ::ts::testing::ReadText;

fs::path SourceDir() {
  const char* env = std::getenv("TS_SOURCE_DIR");
  return env != nullptr && *env != '\0' ? fs::path(env) : fs::path(TS_SOURCE_DIR_DEFAULT);
}

// kModels catalog models over a few real causal-LM configs (ids differ, configs repeat).
std::vector<pb::CatalogModel> Models() {
  const fs::path dir = SourceDir() / ".." / "shared" / "data" / "hf-configs";
  const std::vector<std::string> files = {"llama2_7b", "gpt2", "mistral_7b", "qwen2", "gemma_2b"};
  std::vector<pb::CatalogModel> out;
  for (int i = 0; i < kModels; ++i) {
    const std::string name = files[i % files.size()];
    const json config = json::parse(ReadText(dir / (name + ".json")));
    pb::CatalogModel m;
    m.set_id("cluster-test/" + name + "-" + std::to_string(i));
    m.set_task("text-generation");
    m.set_arch(config["architectures"][0].get<std::string>());
    m.set_family(config.value("model_type", ""));
    m.set_config_json(config.dump());
    out.push_back(std::move(m));
  }
  return out;
}

class LocalClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/ts-cluster-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  cluster::LocalClusterOptions Options(const std::string& bin_dir) const {
    cluster::LocalClusterOptions o;
    o.state_dir = (dir_ / "state").string();
    o.bin_dir = bin_dir;
    o.workers = 2;
    o.lease_ttl_s = 2;  // a shard held by the crashed scheduler's workers comes back quickly
    return o;
  }
  fs::path Postmaster() const { return dir_ / "state" / "pg" / "data" / "postmaster.pid"; }

  // The kModels catalog models, and a sweep over them on sim-2.0 in shards of 2 (many shards,
  // so that work is in flight when something is killed).
  static absl::StatusOr<pb::CreateSweepResponse> CreateSweep(cluster::SweepDriver& d) {
    pb::CreateSweepRequest req;
    for (auto& m : Models()) {
      req.mutable_filter()->add_model_ids(m.id());
      if (auto st = d.AddModel(std::move(m)); !st.ok()) return st;
    }
    if (auto st = d.FlushModels(); !st.ok()) return st;
    const std::string profile = ReadText(fs::path(TS_PROFILES_DIR) / "sim-2.0.json");
    req.set_name("cluster-test");
    req.mutable_profile()->set_name(json::parse(profile)["name"].get<std::string>());
    req.mutable_profile()->set_body(profile);
    req.set_shard_max_models(2);
    return d.CreateSweep(req);
  }

  // A cluster started on Options(TS_BIN_DIR), a driver connected to it and the kModels sweep
  // created; its workers not yet started.
  struct Running {
    std::unique_ptr<cluster::LocalCluster> cluster;
    std::unique_ptr<cluster::SweepDriver> driver;  // destroyed first
    pb::CreateSweepResponse sweep;
  };
  absl::StatusOr<Running> StartWithSweep() const {
    Running r;
    auto started = cluster::LocalCluster::Start(Options(TS_BIN_DIR));
    if (!started.ok()) return started.status();
    r.cluster = std::move(*started);
    auto driver = cluster::SweepDriver::Connect({r.cluster->target(), r.cluster->token()});
    if (!driver.ok()) return driver.status();
    r.driver = std::move(*driver);
    auto created = CreateSweep(*r.driver);
    if (!created.ok()) return created.status();
    r.sweep = std::move(*created);
    return r;
  }

  fs::path dir_;
};

bool Gone(pid_t pid) { return ::kill(pid, 0) == -1 && errno == ESRCH; }

// Waits until a killed child of this process is a zombie (dead, not yet reaped), so that the
// next Supervise() finds it dead whatever the timing.
void AwaitZombie(pid_t pid) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    const std::string stat = ReadText("/proc/" + std::to_string(pid) + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'Z') return;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "pid " << pid << " did not die";
}

// Polls until the sweep has recorded a model (or ended), so that the restart falls mid-sweep.
void AwaitFirstResult(cluster::SweepDriver* driver, int64_t sweep_id) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (std::chrono::steady_clock::now() < deadline) {
    auto p = driver->Progress(sweep_id);
    if (p.ok() && (p->models_recorded() > 0 || p->state() != "running")) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ADD_FAILURE() << "no result in 300 s";
}

// Follows a sweep with the cluster supervised between polls and its progress lines captured.
// `watch`, if set, sees what was printed so far before each poll.
struct Followed {
  absl::StatusOr<cluster::FollowResult> result;
  std::string printed;
};
Followed FollowPrinting(cluster::LocalCluster& c, cluster::SweepDriver& d, int64_t sweep_id,
                        double stall_note_s = 60,
                        std::function<void(const std::string&)> watch = nullptr) {
  char notes[] = "/tmp/ts-cluster-notes-XXXXXX";
  const int fd = ::mkstemp(notes);
  if (fd < 0) return {absl::InternalError("mkstemp"), ""};
  FILE* out = ::fdopen(fd, "w");
  cluster::FollowOptions fo;
  fo.between_polls = [&]() -> absl::Status {
    if (watch) {
      std::fflush(out);
      watch(ReadText(notes));
    }
    return c.Supervise();
  };
  fo.why_stalled = [&c] { return c.Diagnose(); };
  fo.stall_note_s = stall_note_s;
  fo.out = out;
  Followed f{d.Follow(sweep_id, fo), ""};
  std::fclose(out);
  f.printed = ReadText(notes);
  fs::remove(notes);
  return f;
}

// The sweep ended done with each of its kModels models recorded once, and every row reads back.
void ExpectEveryModelOnce(cluster::SweepDriver& d, const Followed& f, int64_t sweep_id) {
  ASSERT_TRUE(f.result.ok()) << f.result.status() << "\n" << f.printed;
  EXPECT_EQ(f.result->progress.state(), "done");
  EXPECT_EQ(f.result->progress.models_recorded(), kModels);
  EXPECT_EQ(f.result->progress.duplicates(), 0);
  int64_t rows_with_status = 0;
  auto tally = d.Summarize(sweep_id, [&](const pb::ResultRow& row) {
    rows_with_status += !row.status().empty();
  });
  ASSERT_TRUE(tally.ok()) << tally.status();
  EXPECT_EQ(rows_with_status, kModels);
}

TEST_F(LocalClusterTest, SweepCompletesOnceEachThroughSchedulerRestartAndCrashThenStopsInOrder) {
  auto running = StartWithSweep();
  ASSERT_TRUE(running.ok()) << running.status();
  cluster::LocalCluster& c = *running->cluster;
  cluster::SweepDriver& d = *running->driver;
  const pb::CreateSweepResponse* created = &running->sweep;
  EXPECT_TRUE(fs::exists(Postmaster()));
  EXPECT_GT(c.http_port(), 0);
  EXPECT_FALSE(c.token().empty());
  EXPECT_EQ(fs::status(c.token_file()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(created->models(), kModels);
  ASSERT_TRUE(c.StartWorkers().ok());

  // A restart mid-way (returns once the new scheduler listens on the same port), then a crash
  // behind the cluster's back, which Supervise() between polls must notice and repair.
  AwaitFirstResult(&d, created->sweep_id());
  const pid_t first = c.scheduler_pid();
  const std::string target = c.target();
  ASSERT_TRUE(c.RestartScheduler(0).ok());
  EXPECT_NE(c.scheduler_pid(), first);
  EXPECT_EQ(c.target(), target);
  ASSERT_EQ(::kill(c.scheduler_pid(), SIGKILL), 0);
  AwaitZombie(c.scheduler_pid());

  cluster::FollowOptions fo;
  fo.between_polls = [&c] { return c.Supervise(); };
  fo.out = nullptr;
  auto followed = d.Follow(created->sweep_id(), fo);
  ASSERT_TRUE(followed.ok()) << followed.status();
  EXPECT_FALSE(followed->interrupted);
  EXPECT_EQ(followed->progress.state(), "done");
  EXPECT_EQ(followed->progress.models_expected(), kModels);
  EXPECT_EQ(followed->progress.models_recorded(), followed->progress.models_expected());
  EXPECT_EQ(followed->progress.duplicates(), 0);
  EXPECT_EQ(c.scheduler_restarts(), 2);
  EXPECT_EQ(c.worker_restarts(), 0);

  int64_t rows_with_status = 0;
  auto tally = d.Summarize(created->sweep_id(), [&](const pb::ResultRow& row) {
    rows_with_status += !row.status().empty();
  });
  ASSERT_TRUE(tally.ok()) << tally.status();
  EXPECT_EQ(tally->listed, kModels);
  EXPECT_EQ(rows_with_status, kModels);

  // Stop in order: every process gone and reaped, the database closed; idempotent.
  const pid_t scheduler = c.scheduler_pid();
  const std::vector<pid_t> workers = c.worker_pids();
  ASSERT_EQ(workers.size(), 2u);
  ASSERT_TRUE(c.Stop().ok());
  EXPECT_TRUE(Gone(scheduler));
  for (pid_t w : workers) EXPECT_TRUE(Gone(w)) << w;
  EXPECT_EQ(c.scheduler_pid(), -1);
  EXPECT_FALSE(fs::exists(Postmaster()));
  EXPECT_TRUE(c.Stop().ok());
  EXPECT_FALSE(d.Progress(created->sweep_id()).ok());
}

// Issue 14: kill -9 of the embedded PostgreSQL's postmaster mid-sweep. Supervise() notices,
// restarts it (crash recovery), and the sweep finishes with every model recorded once; the
// stalled progress line meanwhile says why.
TEST_F(LocalClusterTest, EmbeddedPostgresKilledMidSweepIsRestartedAndTheSweepFinishesOnce) {
  auto running = StartWithSweep();
  ASSERT_TRUE(running.ok()) << running.status();
  cluster::LocalCluster& c = *running->cluster;
  cluster::SweepDriver& d = *running->driver;
  const pb::CreateSweepResponse* created = &running->sweep;
  ASSERT_TRUE(c.StartWorkers().ok());
  AwaitFirstResult(&d, created->sweep_id());

  pid_t postmaster = 0;
  std::ifstream(Postmaster()) >> postmaster;
  ASSERT_GT(postmaster, 0);
  ASSERT_EQ(::kill(postmaster, SIGKILL), 0);
  for (int i = 0; i < 200 && !Gone(postmaster); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
  }
  EXPECT_EQ(c.Diagnose(), "the embedded PostgreSQL is down");

  const Followed f = FollowPrinting(c, d, created->sweep_id());
  ExpectEveryModelOnce(d, f, created->sweep_id());
  EXPECT_EQ(c.database_restarts(), 1);
  ASSERT_TRUE(c.Stop().ok());
}

// Issue 14: the embedded PostgreSQL's data folder fills up (a 160 MiB tmpfs under state/pg,
// filled with a ballast file once the sweep is queued: the sweep's fresh partitions have no page
// yet, so its first report cannot be stored). The sweep stalls, the progress line says the disk
// is full and what to do, workers keep their results and retry; once the ballast is removed the
// sweep finishes with every model recorded once, and every stored row reads back.
TEST_F(LocalClusterTest, DiskFullStallsSayingWhyAndFinishesOnceAfterSpaceIsFreed) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root (CI runs as root)";
  const fs::path pg = dir_ / "state" / "pg";
  fs::create_directories(pg);
  ASSERT_EQ(std::system(("mount -t tmpfs -o size=160m,mode=0700 touchstone-test " + pg.string())
                            .c_str()),
            0);
  struct Unmount {
    fs::path at;
    ~Unmount() { (void)std::system(("umount -l " + at.string()).c_str()); }
  } unmount{pg};
  auto running = StartWithSweep();
  ASSERT_TRUE(running.ok()) << running.status();
  cluster::LocalCluster& c = *running->cluster;
  cluster::SweepDriver& d = *running->driver;
  const pb::CreateSweepResponse* created = &running->sweep;
  EXPECT_EQ(c.Diagnose().find("is full"), std::string::npos);

  // Fill the file system to the last byte.
  const fs::path ballast = pg / "ballast";
  {
    std::ofstream out(ballast, std::ios::binary);
    const std::string mib(1 << 20, 'x');
    while (out.write(mib.data(), static_cast<std::streamsize>(mib.size())) && out.flush()) {
    }
    const std::string kib(1024, 'x');
    out.clear();
    while (out.write(kib.data(), static_cast<std::streamsize>(kib.size())) && out.flush()) {
    }
  }
  EXPECT_LT(fs::space(pg).available, uint64_t{1} << 20);
  EXPECT_NE(c.Diagnose().find("is full"), std::string::npos) << c.Diagnose();
  ASSERT_TRUE(c.StartWorkers().ok());

  int64_t recorded_while_full = -1;
  // Free the space once the progress line has said why it stalled.
  const Followed f = FollowPrinting(c, d, created->sweep_id(), /*stall_note_s=*/3,
                                    [&](const std::string& printed) {
    if (recorded_while_full >= 0 || printed.find("is full") == std::string::npos) return;
    auto p = d.Progress(created->sweep_id());
    recorded_while_full = p.ok() ? p->models_recorded() : -2;
    fs::remove(ballast);
  });
  EXPECT_NE(f.printed.find("data folder " + (pg / "data").string() + " is full"),
            std::string::npos)
      << f.printed;
  EXPECT_NE(f.printed.find("free space there and the sweep carries on"), std::string::npos);
  EXPECT_EQ(recorded_while_full, 0) << "nothing can be stored on a full disk";
  ExpectEveryModelOnce(d, f, created->sweep_id());
  ASSERT_TRUE(c.Stop().ok());
}

TEST_F(LocalClusterTest, StartThatFailsStopsTheDatabaseItStarted) {
  auto started = cluster::LocalCluster::Start(Options((dir_ / "no-bin").string()));
  ASSERT_FALSE(started.ok());
  EXPECT_NE(started.status().message().find("touchstone-scheduler"), std::string::npos)
      << started.status();
  EXPECT_TRUE(fs::exists(dir_ / "state" / "pg" / "data" / "PG_VERSION"));
  EXPECT_FALSE(fs::exists(Postmaster()));
}

}  // namespace
}  // namespace ts
