// A fleet's reference bundles with real processes (issue 31): touchstone-scheduler on a
// throwaway PostgreSQL, two touchstone-worker processes over loopback gRPC, no folder shared
// between them. Workers fetch a shard's bundles from the scheduler and upload the ones they
// computed; two sweeps of the same models racing store each bundle once; a later sweep takes
// every model's references from the stored bundles, with the same verdicts; a worker killed
// while it uploads leaves no half bundle.
#include <pqxx/binarystring>

#include "tests/sweep_fixture.h"
#include "workers/refs/blob.h"
#include "workers/refs/key.h"

namespace ts {
namespace {

using RefsFleetTest = SweepTest;

int64_t CountSql(const std::string& db, const std::string& sql) {
  pqxx::connection c(db);
  pqxx::nontransaction n(c);
  return n.exec(sql)[0][0].as<int64_t>();
}

TEST_F(RefsFleetTest, WorkersShareBundlesThroughTheSchedulerAndStoreEachOnce) {
  StartScheduler();
  // Two sweeps of the same 12 models at once: both workers compute references for the same
  // (model, seed) runs, in either sweep, often at the same time.
  const int64_t a = CreateSweep(12, Cheap, json::array(), 120, /*shard_max=*/3);
  const int64_t b = CreateSweep(12, Cheap, json::array(), 120, /*shard_max=*/3);
  StartWorker("w1");
  StartWorker("w2");
  for (int64_t s : {a, b}) {
    WaitFor(
        s, [](const auto& p) { return p.state() == "done"; }, 300);
    ExpectExactlyOnce(s);
  }
  const int64_t models = static_cast<int64_t>(models_.size());
  // One bundle and one key per run, however many computed it.
  EXPECT_EQ(CountSql(db_, "SELECT count(*) FROM reference_bundles"), models);
  EXPECT_EQ(CountSql(db_, "SELECT count(*) FROM reference_keys"), models);
  // Every run names a stored bundle.
  EXPECT_EQ(CountSql(db_,
                     "SELECT count(*) FROM model_runs mr JOIN reference_bundles b "
                     "ON b.content_digest = mr.refs_content WHERE mr.run = 1"),
            2 * models);
  EXPECT_EQ(Verdicts(a), Verdicts(b));

  // A third sweep: every model's references come from the scheduler's bundles.
  const int64_t c = CreateSweep(12, Cheap, json::array(), 120, 3);
  WaitFor(
      c, [](const auto& p) { return p.state() == "done"; }, 300);
  ExpectExactlyOnce(c);
  EXPECT_EQ(CountSql(db_,
                     "SELECT count(*) FROM model_runs WHERE run = 1 AND refs_source = "
                     "'stored' AND sweep_id = " +
                         std::to_string(c)),
            models);
  EXPECT_EQ(CountSql(db_, "SELECT count(*) FROM reference_bundles"), models);
  EXPECT_EQ(Verdicts(c), Verdicts(a));
  // Each worker's local copy holds only what it fetched or computed: no folder is shared.
  for (const char* w : {"w1", "w2"}) {
    EXPECT_TRUE(fs::exists(dir_ / w / "refs" / "blobs")) << w;
  }
}

// Bundles whose bytes are not whole: kept deflated or not (workers/refs/blob.h), they do not
// read back, or their SHA-256 or length is not the one they are stored under (a half bundle).
int64_t HalfBundles(const std::string& db) {
  pqxx::connection c(db);
  pqxx::nontransaction n(c);
  int64_t half = 0;
  for (const auto& r : n.exec("SELECT content_digest, size, body FROM reference_bundles")) {
    auto bundle = refs::BundleOf(pqxx::binarystring(r[2]).str());
    half += !bundle.ok() || static_cast<int64_t>(bundle->size()) != r[1].as<int64_t>() ||
            refs::Sha256Hex(*bundle) != r[0].c_str();
  }
  return half;
}

// w1 is SIGKILLed as soon as the scheduler holds its first bundle: it reports two models at a
// time and uploads a batch's bundles just before the batch, so it is killed in or between its
// uploads, with computed bundles still unsent. Nothing it sent in part is stored: every stored
// bundle is whole; w2 finishes the sweep; every model run names a stored, whole bundle, each
// stored once. (A stream cut at a chosen chunk: references_rpc_test.cc.)
TEST_F(RefsFleetTest, AWorkerKilledMidUploadLeavesNoHalfBundle) {
  StartScheduler();
  const int64_t sweep = CreateSweep(16, Cheap, json::array(), 120, /*shard_max=*/8);
  StartWorker("w1");
  {
    pqxx::connection c(db_);
    pqxx::nontransaction n(c);
    const auto deadline = Clock::now() + std::chrono::seconds(240);
    while (n.exec("SELECT count(*) FROM reference_bundles")[0][0].as<int64_t>() == 0 &&
           Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  ASSERT_GT(CountSql(db_, "SELECT count(*) FROM reference_bundles"), 0)
      << "w1 never uploaded a bundle\n"
      << ReadText(dir_ / "w1.log");
  Kill9("w1");
  EXPECT_EQ(HalfBundles(db_), 0);
  StartWorker("w2");
  auto p = WaitFor(
      sweep, [](const auto& q) { return q.state() == "done"; }, 300);
  EXPECT_EQ(p.failures(), 0);
  ExpectExactlyOnce(sweep);
  const int64_t models = static_cast<int64_t>(models_.size());
  EXPECT_EQ(HalfBundles(db_), 0);
  EXPECT_EQ(CountSql(db_, "SELECT count(*) FROM reference_bundles"), models);
  EXPECT_EQ(CountSql(db_, "SELECT count(*) FROM reference_keys"), models);
  EXPECT_EQ(CountSql(db_,
                     "SELECT count(*) FROM model_runs mr JOIN reference_bundles b "
                     "ON b.content_digest = mr.refs_content WHERE mr.run = 1 AND "
                     "mr.sweep_id = " +
                         std::to_string(sweep)),
            models);
}

}  // namespace
}  // namespace ts
