// A fleet's reference bundles in the store (migration 17) on a throwaway PostgreSQL: bytes
// stored once whatever the number of writers racing, keys listed by model run and build, a
// sweep's hit rate and bundles from its model runs, prune.
#include <gtest/gtest.h>

#include <atomic>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "proto/names.h"
#include "services/store/store.h"
#include "tests/fixtures/postgres_fixture.h"

namespace ts::store {
namespace {

std::string Hex(char c) { return std::string(64, c); }

ReferenceKeyRow Key(const std::string& key_digest, const std::string& model, uint64_t seed,
                    const std::string& device, const std::string& zoo) {
  ReferenceKeyRow k;
  k.key_digest = key_digest;
  k.model_id = model;
  k.weights_seed = seed;
  k.device = device;
  k.zoo_version = zoo;
  k.torch_version = "1.13.0";
  k.key_json = "{\"model_id\": \"" + model + "\", \"numerics\": \"" +
               (zoo == "transformers" ? "none" : "bf16") + "\"}";
  return k;
}

class ReferenceStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto* cluster = testing::PostgresCluster::Get();
    ASSERT_NE(cluster, nullptr);
    opts_.url =
        cluster->NewDatabase(::testing::UnitTest::GetInstance()->current_test_info()->name());
    store_ = Open();
    ASSERT_TRUE(store_->Migrate().ok());
  }
  std::unique_ptr<Store> Open() {
    auto s = Store::Connect(opts_);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }
  int64_t Count(const std::string& table) {
    pqxx::connection c(opts_.url);
    pqxx::nontransaction n(c);
    return n.exec("SELECT count(*) FROM " + table)[0][0].as<int64_t>();
  }

  StoreOptions opts_;
  std::unique_ptr<Store> store_;
};

// Eight writers (eight connections: eight workers' uploads through the scheduler's pool) store
// the same bundle at once: one row of bytes, one key, and exactly one writer told it stored
// them. The bytes come back as they went in, NUL bytes included.
TEST_F(ReferenceStoreTest, RacingWritersOfOneBundleStoreItOnce) {
  std::string body(300000, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i * 131 % 256);
  std::atomic<int> stored{0}, failed{0};
  std::vector<std::thread> writers;
  for (int i = 0; i < 8; ++i) {
    writers.emplace_back([&] {
      auto s = Open();
      auto r = s->PutReferenceBundle(Key(Hex('1'), "org/m", 7, "cpu", "z1"), Hex('a'), body);
      if (!r.ok()) {
        ++failed;
        return;
      }
      stored += *r ? 1 : 0;
    });
  }
  for (auto& t : writers) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(stored, 1);
  EXPECT_EQ(Count("reference_bundles"), 1);
  EXPECT_EQ(Count("reference_keys"), 1);
  auto back = store_->ReferenceBody(Hex('a'));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, body);
  EXPECT_EQ(store_->ReferenceBody(Hex('b')).status().code(), absl::StatusCode::kNotFound);
  // A recomputed bundle (another digest) under the same key: the key names it now.
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('1'), "org/m", 7, "cpu", "z1"), Hex('b'), "x").ok());
  auto listed = store_->ReferencesFor({{"org/m", 7}}, "z1", "1.13.0");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].content_digest, Hex('b'));
  EXPECT_EQ((*listed)[0].size, 1);
}

// A bundle is kept deflated when that saves (workers/refs/blob.h), as the folder store keeps it,
// and read back exactly; its `size` stays the bundle's. Bytes that do not compress, and a row
// stored before deflation, are kept and read as they are; a damaged deflated row is DATA_LOSS,
// never bytes.
TEST_F(ReferenceStoreTest, ABundleIsKeptDeflatedWhenThatSavesAndReadBackExactly) {
  std::string body(200000, '\0');
  for (size_t i = 0; i < body.size(); ++i) body[i] = static_cast<char>(i % 7 == 0 ? i % 251 : 0);
  std::string noise(50000, '\0');
  uint64_t x = 88172645463325252ULL;
  for (char& c : noise) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x & 0xff);
  }
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('1'), "org/m", 7, "cpu", "z1"), Hex('a'), body).ok());
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('2'), "org/n", 7, "cpu", "z1"), Hex('b'), noise).ok());
  pqxx::connection c(opts_.url);
  {
    pqxx::work w(c);
    // A bundle stored raw by a build before deflation.
    w.exec_params("INSERT INTO reference_bundles (content_digest, body, size) VALUES ($1, $2, 3)",
                  Hex('c'), pqxx::binarystring(std::string("r\0w", 3)));
    w.commit();
  }
  auto Stored = [&](char d) {
    pqxx::nontransaction n(c);
    return n.exec_params(
        "SELECT octet_length(body), size FROM reference_bundles "
        "WHERE content_digest = $1",
        Hex(d))[0];
  };
  EXPECT_LT(Stored('a')[0].as<int64_t>(), 200000 / 4) << "a compressible bundle is deflated";
  EXPECT_EQ(Stored('a')[1].as<int64_t>(), 200000);
  EXPECT_EQ(Stored('b')[0].as<int64_t>(), 50000) << "noise is kept as it is";
  for (const auto& [d, want] :
       {std::pair{'a', body}, {'b', noise}, {'c', std::string("r\0w", 3)}}) {
    auto back = store_->ReferenceBody(Hex(d));
    ASSERT_TRUE(back.ok()) << d << ": " << back.status();
    EXPECT_EQ(*back, want) << d;
  }
  auto counts = store_->CountReferences();
  ASSERT_TRUE(counts.ok()) << counts.status();
  EXPECT_EQ(counts->bytes, 200000 + 50000 + 3);
  EXPECT_LT(counts->stored_bytes, 50000 + 200000 / 4 + 100);
  EXPECT_GE(counts->stored_bytes, 50000);
  {
    pqxx::work w(c);
    w.exec_params(
        "UPDATE reference_bundles SET body = substring(body from 1 for 40) "
        "WHERE content_digest = $1",
        Hex('a'));
    w.commit();
  }
  auto damaged = store_->ReferenceBody(Hex('a'));
  EXPECT_EQ(damaged.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(damaged.status().message().find(Hex('a')), std::string::npos) << damaged.status();
}

// A worker gets the CPU bundles of its own build and every other device's, for its runs only.
TEST_F(ReferenceStoreTest, ReferencesForListsThisBuildsAndOtherDevicesBundlesOfTheRuns) {
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('1'), "org/m", 7, "cpu", "z1"), Hex('a'), "a").ok());
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('2'), "org/m", 7, "cpu", "z0"), Hex('b'), "b").ok());
  ASSERT_TRUE(store_
                  ->PutReferenceBundle(Key(Hex('3'), "org/m", 7, "cuda:H100", "transformers"),
                                       Hex('c'), "c")
                  .ok());
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('4'), "org/m", 8, "cpu", "z1"), Hex('d'), "d").ok());
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('5'), "org/other", 7, "cpu", "z1"), Hex('e'), "e").ok());
  // transformers on the CPU: another implementation, whatever its device.
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('7'), "org/m", 7, "cpu", "transformers"), Hex('9'), "9")
          .ok());
  auto listed = store_->ReferencesFor({{"org/m", 7}}, "z1", "1.13.0");
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::set<std::string> got;
  for (const auto& e : *listed) got.insert(e.content_digest);
  EXPECT_EQ(got, (std::set<std::string>{Hex('a'), Hex('c'), Hex('9')}));
  // A seed above 2^63 (seeds are uint64).
  ASSERT_TRUE(store_
                  ->PutReferenceBundle(Key(Hex('6'), "org/m", 18446744073709551615ull, "cpu", "z1"),
                                       Hex('f'), "f")
                  .ok());
  listed = store_->ReferencesFor({{"org/m", 18446744073709551615ull}}, "z1", "1.13.0");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].content_digest, Hex('f'));
}

// Prune drops the CPU keys of other builds and the bytes no key names; other devices' stay.
TEST_F(ReferenceStoreTest, PruneDropsOtherBuildsCpuBundles) {
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('1'), "org/m", 7, "cpu", "z1"), Hex('a'), "aa").ok());
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('2'), "org/m", 7, "cpu", "z0"), Hex('b'), "bbb").ok());
  ASSERT_TRUE(store_
                  ->PutReferenceBundle(Key(Hex('3'), "org/m", 7, "cuda:H100", "transformers"),
                                       Hex('c'), "c")
                  .ok());
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('4'), "org/m", 7, "cpu", "transformers"), Hex('d'), "dddd")
          .ok());
  auto p = store_->PruneReferences("z1", "1.13.0");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->keys_removed, 1);
  EXPECT_EQ(p->bundles_removed, 1);
  EXPECT_EQ(p->bytes_freed, 3);
  auto counts = store_->CountReferences();
  ASSERT_TRUE(counts.ok());
  EXPECT_EQ(counts->keys, 3);
  EXPECT_EQ(counts->bundles, 3);
  EXPECT_EQ(counts->bytes, 7);
}

// A sweep's hit rate and bundles come from the references its records name.
TEST_F(ReferenceStoreTest, ASweepsHitRateAndBundlesComeFromItsRecords) {
  pb::UpsertModelsRequest up;
  for (int i = 0; i < 4; ++i) {
    auto* m = up.add_models();
    m->set_id("org/m" + std::to_string(i));
    m->set_task("text-generation");
    m->set_arch("LlamaForCausalLM");
    m->set_config_json("{}");
  }
  ASSERT_TRUE(store_->UpsertModels(up).ok());
  pb::CreateSweepRequest sweep;
  sweep.set_name("t");
  sweep.mutable_profile()->set_name("p");
  sweep.mutable_profile()->set_body("{}");
  auto created = store_->CreateSweep(sweep);
  ASSERT_TRUE(created.ok()) << created.status();
  pb::RegisterWorkerRequest w;
  w.set_name("w");
  const int64_t worker = store_->RegisterWorker(w)->worker_id();
  auto l = store_->LeaseShard(worker);
  ASSERT_TRUE(l.ok() && l->has_shard());
  ASSERT_EQ(l->jobs_size(), 4);
  ASSERT_TRUE(
      store_->PutReferenceBundle(Key(Hex('1'), "org/m0", 0, "cpu", "z1"), Hex('a'), "a").ok());
  const std::vector<std::pair<std::string, char>> sources = {
      {"stored", 'a'}, {"stored", 'a'}, {"computed", 'c'}, {"completed", 'd'}};
  pb::ReportResultsRequest report;
  report.set_worker_id(worker);
  report.set_shard_id(l->shard_id());
  report.set_lease_token(l->lease_token());
  report.set_finish(true);
  for (int i = 0; i < 4; ++i) {
    pb::ModelResult* r = report.add_results();
    r->set_job_id(l->jobs(i).job_id());
    r->set_model_id(l->jobs(i).model_id());
    r->set_run(1);
    for (pb::Mode mode : {pb::MODE_EAGER, pb::MODE_COMPILE, pb::MODE_TRAIN}) {
      pb::ModeVerdict* v = r->add_modes();  // every mode of the sweep (its default: all)
      v->set_mode(mode);
      v->set_status(pb::VERDICT_PASS);
    }
    r->mutable_references()->set_source(sources[i].first);
    r->mutable_references()->set_key_digest(Hex('1'));
    r->mutable_references()->set_content_digest(Hex(sources[i].second));
    if (i == 2)
      r->mutable_references()->set_warning("stored reference bundle refused (x); recomputed");
    if (i == 3) r->mutable_references()->set_warning("reference from elsewhere left out: gpu: x");
  }
  {
    auto reported = store_->ReportResults(report);
    ASSERT_TRUE(reported.ok()) << reported.status();
  }
  auto use = store_->ReferenceUse(0);
  ASSERT_TRUE(use.ok()) << use.status();
  EXPECT_EQ(use->sweep_id, created->sweep_id());
  EXPECT_EQ(use->models, 4);
  EXPECT_EQ(use->stored, 2);
  EXPECT_EQ(use->computed, 1);
  EXPECT_EQ(use->completed, 1);
  EXPECT_EQ(use->fresh, 0);
  EXPECT_EQ(use->refused, 1);
  auto bundles = store_->SweepReferences(created->sweep_id());
  ASSERT_TRUE(bundles.ok()) << bundles.status();
  ASSERT_EQ(bundles->size(), 3u);  // a, c, d: each once
  EXPECT_EQ((*bundles)[0].content_digest, Hex('a'));
  EXPECT_EQ((*bundles)[0].size, 1);
  EXPECT_EQ((*bundles)[1].size, 0) << "not held by this database";
  EXPECT_EQ(store_->SweepReferences(999).status().code(), absl::StatusCode::kNotFound);
  // The record comes back with where its references came from.
  auto history = store_->ModelHistory("org/m0", 1);
  ASSERT_TRUE(history.ok()) << history.status();
  ASSERT_EQ(history->sweeps_size(), 1);
  EXPECT_EQ(history->sweeps(0).result().references().source(), "stored");
  EXPECT_EQ(history->sweeps(0).result().references().content_digest(), Hex('a'));
}

}  // namespace
}  // namespace ts::store
