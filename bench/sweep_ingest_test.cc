// The query benchmark's fill path against a real PostgreSQL: sweeps end done with every model
// once, new failures against the baseline get exactly their confirmation reruns, and the sizes
// count the rows the store wrote.
#include "bench/sweep_ingest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "bench/bench_database.h"
#include "tests/fixtures/postgres_fixture.h"

namespace ts::bench {
namespace {

std::vector<CatalogEntry> Catalog(int models) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "sweep_ingest_test.jsonl").string();
  {
    std::ofstream out(path);
    for (int i = 0; i < models; ++i) {
      out << R"({"id":"org/m-)" << i << R"(","task":"task-)" << i % 3 << R"(","arch":"Arch)"
          << i % 25 << R"(","family":"f","config":{"num_hidden_layers":4}})"
          << "\n";
    }
  }
  auto c = LoadCatalog(path);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? std::move(*c) : std::vector<CatalogEntry>{};
}

pb::CreateSweepRequest Sweep(int n, int64_t baseline) {
  pb::CreateSweepRequest cs;
  cs.set_name("query-bench-fill-" + std::to_string(n));
  cs.mutable_profile()->set_name("query-bench");
  cs.mutable_profile()->set_body(R"({"name": "query-bench"})");
  cs.set_shard_max_models(250);
  cs.set_shard_target_s(1e9);
  cs.set_baseline_sweep_id(baseline);
  return cs;
}

TEST(SweepIngestTest, SweepsEndDoneWithTheirConfirmationRerunsAndSizesCountTheRows) {
  auto* cluster = testing::PostgresCluster::Get();
  ASSERT_NE(cluster, nullptr);
  auto db = OpenDatabase({"", cluster->NewDatabase("ingest")});
  ASSERT_TRUE(db.ok()) << db.status();
  const std::vector<CatalogEntry> catalog = Catalog(3000);
  const RecordGenerator gen(catalog, 7);
  auto upserted = UpsertCatalog(db->url, catalog);
  ASSERT_TRUE(upserted.ok()) << upserted.status();
  EXPECT_EQ(*upserted, 3000);

  // Four connections: runs 2 and 3 of a flip are often reported in concurrent transactions.
  // Every regression must still be settled (services/store/reports.cc, SettleConfirmations,
  // which once left such a regression `pending` for good).
  const IngestOptions io{db->url, 4};
  auto first = IngestSweep(io, Sweep(1, 0), gen);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->models, 3000);
  EXPECT_EQ(first->reruns, 0);
  auto second = IngestSweep(io, Sweep(2, first->sweep_id), gen);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->models, 3000);

  // The flips the generator made, counted independently of the store.
  std::set<std::string> flipped_models;
  int64_t flipped_modes = 0;
  for (const auto& e : catalog) {
    for (pb::Mode m : {pb::MODE_EAGER, pb::MODE_COMPILE, pb::MODE_TRAIN}) {
      if (gen.Status(e, m, first->sweep_id) == pb::VERDICT_PASS &&
          gen.Status(e, m, second->sweep_id) != pb::VERDICT_PASS) {
        flipped_models.insert(e.model.id());
        ++flipped_modes;
      }
    }
  }
  ASSERT_GT(flipped_modes, 0);
  EXPECT_EQ(second->reruns, 2 * static_cast<int64_t>(flipped_models.size()));
  EXPECT_EQ(second->deterministic + second->flaky, flipped_modes);

  auto fills = FillSweeps(db->url);
  ASSERT_TRUE(fills.ok()) << fills.status();
  ASSERT_EQ(fills->size(), 2u);
  EXPECT_EQ((*fills)[1].state, "done");
  auto size = MeasureDatabase(db->url, {first->sweep_id, second->sweep_id});
  ASSERT_TRUE(size.ok()) << size.status();
  ASSERT_EQ(size->sweeps.size(), 2u);
  EXPECT_EQ(size->sweeps[0].results_rows, 3 * 3000);
  EXPECT_EQ(size->sweeps[0].runs_rows, 3000);
  EXPECT_EQ(size->sweeps[1].results_rows, 3 * (3000 + second->reruns));
  EXPECT_GT(size->sweeps[0].partitions_bytes, 3000 * 1000);  // ~40 ops and a loss curve a model
  EXPECT_GT(size->sweeps[1].state_bytes, 0);
  EXPECT_GT(size->sweeps[0].materialized_bytes, 0);  // the answers kept when it was done
}

TEST(SweepIngestTest, OpenDatabaseWantsExactlyOneOfStateDirAndUrl) {
  EXPECT_EQ(OpenDatabase({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenDatabase({"/tmp/x", "postgresql://a@b/c"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ts::bench
