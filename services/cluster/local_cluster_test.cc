// LocalCluster's private tokens: one random token per role in a 0600 tokens file, enforced by
// the real touchstone-scheduler it starts, kept across runs. A real PostgreSQL (the test
// fixture's) and loopback gRPC; no workers (they would need the torch-linked runner).
#include "services/cluster/local_cluster.h"

#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "services/cluster/sweep_driver.h"
#include "services/common/auth.h"
#include "tests/fixtures/postgres_fixture.h"

namespace ts::cluster {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using common::Role;

pb::CatalogModel Model() {
  pb::CatalogModel m;
  m.set_id("org/m0");
  m.set_task("text-generation");
  m.set_arch("LlamaForCausalLM");
  m.set_family("llama");
  m.set_config_json("{}");
  return m;
}

pb::CreateSweepRequest Sweep() {
  pb::CreateSweepRequest req;
  req.mutable_profile()->set_name("p");
  req.mutable_profile()->set_body("{}");
  req.add_modes("eager");
  return req;
}

TEST(LocalClusterTokensTest, PrivateTokensByRoleAreEnforcedAndKeptAcrossRuns) {
  auto* pg = testing::PostgresCluster::Get();
  ASSERT_NE(pg, nullptr);
  const fs::path state =
      fs::path(::testing::TempDir()) / ("local_cluster_test_" + std::to_string(::getpid()));
  fs::remove_all(state);
  LocalClusterOptions o;
  o.state_dir = state.string();
  o.db_url = pg->NewDatabase("local_cluster_tokens");
  o.bin_dir = TS_BIN_DIR;
  o.workers = 0;
  o.notices = nullptr;
  auto started = LocalCluster::Start(o);
  ASSERT_TRUE(started.ok()) << started.status();
  LocalCluster& c = **started;

  EXPECT_EQ(c.token_file(), (state / "tokens").string());
  EXPECT_EQ(fs::status(c.token_file()).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  auto set = common::TokenSet::FromFile(c.token_file());
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->size(), 3u);
  EXPECT_EQ(set->RoleOf(c.token()), Role::kAdmin);
  EXPECT_EQ(set->RoleOf(c.worker_token()), Role::kWorker);
  EXPECT_EQ(set->RoleOf(c.reader_token()), Role::kReader);
  EXPECT_EQ(*common::ReadClientToken(c.token_file(), {Role::kWorker}), c.worker_token());

  // The admin token drives a sweep; the reader reads it and cannot make one; the worker
  // cannot read it; no token gets nothing.
  auto admin = SweepDriver::Connect({c.target(), c.token()});
  ASSERT_TRUE(admin.ok()) << admin.status();
  ASSERT_TRUE((*admin)->AddModel(Model()).ok());
  ASSERT_TRUE((*admin)->FlushModels().ok());
  auto created = (*admin)->CreateSweep(Sweep());
  ASSERT_TRUE(created.ok()) << created.status();
  auto reader = SweepDriver::Connect({c.target(), c.reader_token()});
  ASSERT_TRUE(reader.ok());
  auto progress = (*reader)->Progress(created->sweep_id());
  ASSERT_TRUE(progress.ok()) << progress.status();
  EXPECT_EQ(progress->models_expected(), 1);
  EXPECT_EQ((*reader)->CreateSweep(Sweep()).status().code(), absl::StatusCode::kPermissionDenied);
  auto worker = SweepDriver::Connect({c.target(), c.worker_token()});
  ASSERT_TRUE(worker.ok());
  EXPECT_EQ((*worker)->Progress(created->sweep_id()).status().code(),
            absl::StatusCode::kPermissionDenied);
  auto nobody = SweepDriver::Connect({c.target(), ""});
  ASSERT_TRUE(nobody.ok());
  EXPECT_EQ((*nobody)->Progress(created->sweep_id()).status().code(),
            absl::StatusCode::kUnauthenticated);

  // A second run on the same state folder keeps the tokens (clients started by hand go on).
  const std::string admin_token = c.token(), worker_token = c.worker_token();
  admin->reset();
  ASSERT_TRUE(c.Stop().ok());
  started->reset();
  auto again = LocalCluster::Start(o);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->token(), admin_token);
  EXPECT_EQ((*again)->worker_token(), worker_token);
  auto later = SweepDriver::Connect({(*again)->target(), admin_token});
  ASSERT_TRUE(later.ok());
  EXPECT_TRUE((*later)->Progress(created->sweep_id()).ok());
  later->reset();
  (*again)->Stop().IgnoreError();
  fs::remove_all(state);
}

}  // namespace
}  // namespace ts::cluster
