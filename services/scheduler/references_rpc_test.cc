// A fleet's reference bundles through the scheduler (issue 31): real gRPC on loopback, a
// throwaway PostgreSQL. Uploads store a bundle's bytes once however many workers race; a stream
// cut mid-bundle (a worker killed mid-upload) stores nothing of it; bytes that are not the
// bundle they claim are refused; what is stored comes back byte for byte, in chunks, to the
// runs that want it; roles.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <pqxx/pqxx>
#include <string>
#include <thread>
#include <vector>

#include "services/scheduler/scheduler.h"
#include "services/scheduler/scheduler_test_util.h"
#include "touchstone/v1/scheduler.grpc.pb.h"
#include "workers/refs/key.h"
#include "workers/refs/refs_test_util.h"

namespace ts::scheduler {
namespace {

namespace pb = ::touchstone::v1;
using refs::testing::HeaderOnlyBundle;
using refs::testing::SampleKey;

constexpr size_t kChunk = 1 << 20;

class ReferencesRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    url_ = TestDatabaseUrl();
    ASSERT_FALSE(url_.empty());
    SchedulerOptions o;
    o.db_url = url_;
    ASSERT_TRUE(o.tokens.Add(common::Role::kAdmin, "admin").ok());
    ASSERT_TRUE(o.tokens.Add(common::Role::kWorker, "worker").ok());
    ASSERT_TRUE(o.tokens.Add(common::Role::kReader, "reader").ok());
    auto s = Scheduler::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = std::move(*s);
    stub_ = pb::Scheduler::NewStub(grpc::CreateChannel(
        "127.0.0.1:" + std::to_string(sched_->grpc_port()), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (sched_) sched_->Shutdown();
  }
  int64_t Count(const std::string& table) {
    pqxx::connection c(url_);
    pqxx::nontransaction n(c);
    return n.exec("SELECT count(*) FROM " + table)[0][0].as<int64_t>();
  }

  // A bundle of `key` of about `bytes` bytes (a metadata pad makes it large).
  static std::string Bundle(const refs::BundleKey& key, size_t bytes = 1000) {
    return HeaderOnlyBundle(key, {{"pad", std::string(bytes, 'p')}});
  }

  // Uploads `bundles` as one stream, each as 1 MiB chunks under `digests` (their own by default).
  grpc::Status Upload(const std::vector<std::string>& bundles, pb::UploadReferencesResponse* resp,
                      const std::string& token = "worker", std::vector<std::string> digests = {}) {
    auto ctx = BearerContext(token);
    auto w = stub_->UploadReferences(ctx.get(), resp);
    for (size_t i = 0; i < bundles.size(); ++i) {
      const std::string digest = i < digests.size() ? digests[i] : refs::Sha256Hex(bundles[i]);
      size_t off = 0;
      do {
        pb::ReferenceChunk c;
        c.set_content_digest(digest);
        c.set_data(bundles[i].substr(off, kChunk));
        off += std::min(kChunk, bundles[i].size() - off);
        c.set_last(off == bundles[i].size());
        if (!w->Write(c)) break;
      } while (off < bundles[i].size());
    }
    w->WritesDone();
    return w->Finish();
  }

  std::string Fetch(const std::string& digest, int* chunks = nullptr) {
    pb::FetchReferencesRequest req;
    req.add_content_digests(digest);
    auto ctx = BearerContext("worker");
    auto r = stub_->FetchReferences(ctx.get(), req);
    pb::ReferenceChunk c;
    std::string body;
    int n = 0;
    while (r->Read(&c)) {
      EXPECT_EQ(c.content_digest(), digest);
      body += c.data();
      ++n;
    }
    EXPECT_TRUE(r->Finish().ok());
    if (chunks) *chunks = n;
    return body;
  }

  std::string url_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<pb::Scheduler::Stub> stub_;
};

// Listed by model run and build, fetched back byte for byte: a 2.5 MiB bundle in 3 chunks.
TEST_F(ReferencesRpcTest, AnUploadedBundleIsListedAndFetchedBack) {
  const refs::BundleKey key = SampleKey("org/model-a");
  const std::string bundle = Bundle(key, (5 << 20) / 2);
  pb::UploadReferencesResponse up;
  ASSERT_TRUE(Upload({bundle}, &up).ok());
  EXPECT_EQ(up.stored(), 1);
  pb::ListReferencesRequest list;
  auto* w = list.add_wants();
  w->set_model_id("org/model-a");
  w->set_seed(key.weights_seed);
  list.set_zoo_version(key.zoo_version);
  list.set_torch_version(key.torch_version);
  pb::ListReferencesResponse listed;
  ASSERT_TRUE(stub_->ListReferences(BearerContext("worker").get(), list, &listed).ok());
  ASSERT_EQ(listed.entries_size(), 1);
  EXPECT_EQ(listed.entries(0).content_digest(), refs::Sha256Hex(bundle));
  EXPECT_EQ(listed.entries(0).key_digest(), refs::KeyDigest(key));
  EXPECT_EQ(listed.entries(0).size(), static_cast<int64_t>(bundle.size()));
  int chunks = 0;
  EXPECT_EQ(Fetch(refs::Sha256Hex(bundle), &chunks), bundle);
  EXPECT_EQ(chunks, 3);
  // Another build's CPU bundles are not listed.
  list.set_zoo_version("0000000000000000");
  ASSERT_TRUE(stub_->ListReferences(BearerContext("worker").get(), list, &listed).ok());
  EXPECT_EQ(listed.entries_size(), 0);
  // A digest nothing has: NOT_FOUND.
  pb::FetchReferencesRequest missing;
  missing.add_content_digests(std::string(64, 'e'));
  auto ctx = BearerContext("worker");
  auto r = stub_->FetchReferences(ctx.get(), missing);
  pb::ReferenceChunk c;
  while (r->Read(&c)) {
  }
  EXPECT_EQ(r->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
}

// Two workers computing the same bundle store it once: eight uploads race.
TEST_F(ReferencesRpcTest, RacingUploadsOfOneBundleStoreItOnce) {
  const std::string bundle = Bundle(SampleKey(), 300000);
  std::atomic<int> stored{0}, duplicates{0}, failed{0};
  std::vector<std::thread> workers;
  for (int i = 0; i < 8; ++i) {
    workers.emplace_back([&] {
      pb::UploadReferencesResponse r;
      if (!Upload({bundle}, &r).ok()) {
        ++failed;
        return;
      }
      stored += r.stored();
      duplicates += r.duplicates();
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(stored, 1);
  EXPECT_EQ(duplicates, 7);
  EXPECT_EQ(Count("reference_bundles"), 1);
  EXPECT_EQ(Count("reference_keys"), 1);
}

// A worker killed mid-upload: its stream ends after one chunk of a bundle, without the last.
// Nothing of that bundle is stored; a bundle the same stream finished before it is.
TEST_F(ReferencesRpcTest, AStreamCutMidBundleStoresNothingOfIt) {
  const std::string whole = Bundle(SampleKey("org/whole"), 1000);
  const std::string cut = Bundle(SampleKey("org/cut"), 3 << 20);
  pb::UploadReferencesResponse resp;
  auto ctx = BearerContext("worker");
  auto w = stub_->UploadReferences(ctx.get(), &resp);
  pb::ReferenceChunk c;
  c.set_content_digest(refs::Sha256Hex(whole));
  c.set_data(whole);
  c.set_last(true);
  ASSERT_TRUE(w->Write(c));
  c.set_content_digest(refs::Sha256Hex(cut));
  c.set_data(cut.substr(0, kChunk));
  c.set_last(false);
  ASSERT_TRUE(w->Write(c));
  // The process dies: its calls are cancelled.
  ctx->TryCancel();
  EXPECT_FALSE(w->Finish().ok());
  // The first bundle's store may still be in flight when the cancel lands; wait for it.
  for (int i = 0; i < 200 && Count("reference_bundles") == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  pqxx::connection conn(url_);
  pqxx::nontransaction n(conn);
  EXPECT_EQ(n.exec_params("SELECT count(*) FROM reference_bundles WHERE content_digest = $1",
                          refs::Sha256Hex(cut))[0][0]
                .as<int>(),
            0);
  EXPECT_EQ(
      n.exec("SELECT count(*) FROM reference_keys WHERE model_id = 'org/cut'")[0][0].as<int>(), 0);
  // A stream that ends (WritesDone) before a bundle's last chunk is refused the same way.
  pb::UploadReferencesResponse r2;
  auto ctx2 = BearerContext("worker");
  auto w2 = stub_->UploadReferences(ctx2.get(), &r2);
  ASSERT_TRUE(w2->Write(c));
  w2->WritesDone();
  const grpc::Status st = w2->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("nothing of it was stored"), std::string::npos)
      << st.error_message();
  EXPECT_EQ(
      n.exec("SELECT count(*) FROM reference_keys WHERE model_id = 'org/cut'")[0][0].as<int>(), 0);
}

// Bytes that do not hash to their digest (damaged on the way), and bytes that are no bundle,
// are refused naming the bundle; nothing is stored.
TEST_F(ReferencesRpcTest, DamagedOrForeignBytesAreRefused) {
  const std::string bundle = Bundle(SampleKey(), 5000);
  pb::UploadReferencesResponse resp;
  grpc::Status st = Upload({bundle}, &resp, "worker", {std::string(64, 'a')});
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("damaged or cut short"), std::string::npos)
      << st.error_message();
  st = Upload({"not a bundle"}, &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("bundle: "), std::string::npos) << st.error_message();
  pb::UploadReferencesResponse bad_digest;
  pb::ReferenceChunk c;
  c.set_content_digest("../../etc/passwd");
  auto ctx = BearerContext("worker");
  auto w = stub_->UploadReferences(ctx.get(), &bad_digest);
  w->Write(c);
  w->WritesDone();
  st = w->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("content_digest"), std::string::npos) << st.error_message();
  EXPECT_EQ(Count("reference_bundles"), 0);
  // Requests are checked by field.
  pb::ListReferencesRequest list;
  pb::ListReferencesResponse listed;
  st = stub_->ListReferences(BearerContext("worker").get(), list, &listed);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("wants"), std::string::npos) << st.error_message();
}

// Workers upload and fetch; readers read the stats; only admins prune.
TEST_F(ReferencesRpcTest, RolesAndStats) {
  const std::string bundle = Bundle(SampleKey(), 1000);
  pb::UploadReferencesResponse resp;
  EXPECT_EQ(Upload({bundle}, &resp, "reader").error_code(), grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(Upload({bundle}, &resp, "worker").ok());
  pb::ReferenceStatsResponse stats;
  ASSERT_TRUE(
      stub_->ReferenceStats(BearerContext("reader").get(), pb::ReferenceStatsRequest(), &stats)
          .ok());
  EXPECT_EQ(stats.bundles(), 1);
  EXPECT_EQ(stats.keys(), 1);
  EXPECT_EQ(stats.bytes(), static_cast<int64_t>(bundle.size()));
  // Its 1,000 'p's deflate: the table holds less than the bundle (workers/refs/blob.h).
  EXPECT_GT(stats.stored_bytes(), 0);
  EXPECT_LT(stats.stored_bytes(), stats.bytes() / 2);
  EXPECT_EQ(stats.sweep_id(), 0);
  pb::PruneReferencesRequest prune;
  prune.set_zoo_version("ffffffffffffffff");
  prune.set_torch_version("1.13.0");
  pb::PruneReferencesResponse pruned;
  EXPECT_EQ(stub_->PruneReferences(BearerContext("worker").get(), prune, &pruned).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  ASSERT_TRUE(stub_->PruneReferences(BearerContext("admin").get(), prune, &pruned).ok());
  EXPECT_EQ(pruned.keys_removed(), 1);
  EXPECT_EQ(pruned.bundles_removed(), 1);
  EXPECT_EQ(Count("reference_bundles"), 0);
}

}  // namespace
}  // namespace ts::scheduler
