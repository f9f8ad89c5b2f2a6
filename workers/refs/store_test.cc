// The folder store: content addressing, damaged files refused, racing writers storing one
// blob, a writer killed mid-write leaving no half bundle, import, prune.
#include "workers/refs/store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "workers/refs/refs_test_util.h"

namespace ts::refs {
namespace {

namespace fs = std::filesystem;
using testing::HeaderOnlyBundle;
using testing::SampleKey;

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("refs_store_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  DirStore Open(DirStore::AfterWrite hook = nullptr) {
    auto s = DirStore::Open(root_.string(), std::move(hook));
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return std::move(*s);
  }

  std::vector<fs::path> Files(const std::string& sub) const {
    std::vector<fs::path> out;
    for (const auto& e : fs::recursive_directory_iterator(root_ / sub))
      if (e.is_regular_file()) out.push_back(e.path());
    return out;
  }

  fs::path root_;
};

TEST_F(StoreTest, PutThenGetReturnsTheBytesUnderTheirDigest) {
  DirStore store = Open();
  const std::string bytes = HeaderOnlyBundle(SampleKey());
  auto digest = store.Put(SampleKey(), bytes);
  ASSERT_TRUE(digest.ok()) << digest.status().ToString();
  EXPECT_EQ(*digest, Sha256Hex(bytes));
  auto got = store.Get(SampleKey());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->bytes, bytes);
  EXPECT_EQ(got->content_digest, *digest);
  BundleKey other = SampleKey();
  other.torch_version = "2.11.0";
  EXPECT_EQ(store.Get(other).status().code(), StatusCode::kNotFound);
  const StoreStats s = store.Stats();
  EXPECT_EQ(s.keys, 1);
  EXPECT_EQ(s.blobs, 1);
  EXPECT_EQ(s.blob_bytes, static_cast<int64_t>(fs::file_size(Files("blobs").at(0))));
  EXPECT_LT(s.blob_bytes, static_cast<int64_t>(bytes.size())) << "its JSON deflates";
  EXPECT_EQ(s.partial_files, 0);
}

// A blob is deflated when that saves 3% and read back byte for byte; bytes that do not deflate
// (a float's mantissas) are stored as they are.
TEST_F(StoreTest, ABlobIsStoredDeflatedWhenThatSavesAndReadBackExactly) {
  DirStore store = Open();
  const std::string text = HeaderOnlyBundle(SampleKey(), {{"pad", std::string(5000, 'x')}});
  std::string noise(4096, '\0');
  uint64_t x = 88172645463325252ull;
  for (char& c : noise) {  // xorshift: no pattern deflate can use
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    c = static_cast<char>(x >> 56);
  }
  BundleKey other = SampleKey();
  other.device = "cuda:other";
  ASSERT_TRUE(store.Put(SampleKey(), text).ok());
  ASSERT_TRUE(store.Put(other, noise).ok());
  std::map<std::string, std::string> files;
  for (const fs::path& p : Files("blobs")) {
    std::ifstream f(p, std::ios::binary);
    files[p.filename().string()] = std::string(std::istreambuf_iterator<char>(f), {});
  }
  const std::string& deflated = files.at(Sha256Hex(text));
  EXPECT_EQ(deflated.substr(0, 4), "TSZ1");
  EXPECT_LT(deflated.size(), text.size() / 10);
  EXPECT_EQ(files.at(Sha256Hex(noise)), noise) << "not deflated: it would not shrink";
  EXPECT_EQ(store.Get(SampleKey())->bytes, text);
  EXPECT_EQ(store.Get(other)->bytes, noise);
  // A deflated blob whose stated size is damaged is refused, never allocated.
  const fs::path blob = root_ / "blobs" / Sha256Hex(text).substr(0, 2) / Sha256Hex(text);
  {
    std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(11);
    f.put('\x7f');
  }
  auto got = store.Get(SampleKey());
  ASSERT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("damaged or truncated"), std::string::npos);
}

TEST_F(StoreTest, AFlippedByteIsRefusedAsDataLoss) {
  DirStore store = Open();
  const std::string bytes = HeaderOnlyBundle(SampleKey());
  ASSERT_TRUE(store.Put(SampleKey(), bytes).ok());
  const fs::path blob = Files("blobs").at(0);
  {
    std::fstream f(blob, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('#');
  }
  auto got = store.Get(SampleKey());
  ASSERT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("damaged or truncated"), std::string::npos);
  // Storing the bundle again repairs the blob: the damaged one is not taken for it.
  ASSERT_TRUE(store.Put(SampleKey(), bytes).ok());
  EXPECT_TRUE(store.Get(SampleKey()).ok());
}

TEST_F(StoreTest, ATruncatedBlobOrAMissingOneIsRefused) {
  DirStore store = Open();
  ASSERT_TRUE(store.Put(SampleKey(), HeaderOnlyBundle(SampleKey())).ok());
  const fs::path blob = Files("blobs").at(0);
  fs::resize_file(blob, fs::file_size(blob) / 2);
  EXPECT_EQ(store.Get(SampleKey()).status().code(), StatusCode::kDataLoss);
  fs::remove(blob);
  EXPECT_EQ(store.Get(SampleKey()).status().code(), StatusCode::kDataLoss);
}

// Two workers computing the same bundle store it once: eight processes race on one key.
TEST_F(StoreTest, RacingWritersOfOneBundleStoreOneBlob) {
  Open();
  const std::string bytes = HeaderOnlyBundle(SampleKey(), {{"pad", std::string(1 << 20, 'x')}});
  std::vector<pid_t> children;
  for (int i = 0; i < 8; ++i) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto s = DirStore::Open(root_.string());
      ::_exit(s.ok() && s->Put(SampleKey(), bytes).ok() ? 0 : 1);
    }
    children.push_back(pid);
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  DirStore store = Open();
  EXPECT_EQ(Files("blobs").size(), 1u);
  EXPECT_EQ(Files("keys").size(), 1u);
  EXPECT_EQ(Files("tmp").size(), 0u);
  auto got = store.Get(SampleKey());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(got->bytes, bytes);
}

// A writer killed after writing its bytes but before renaming them leaves only a tmp/ file: no
// blob, no key, so readers see no bundle (and compute it); prune removes the leftover.
TEST_F(StoreTest, AWriterKilledMidWriteLeavesNoHalfBundle) {
  Open();
  const std::string bytes = HeaderOnlyBundle(SampleKey());
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto s = DirStore::Open(root_.string(), [](const std::string&) { ::raise(SIGKILL); });
    (void)s->Put(SampleKey(), bytes);
    ::_exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  DirStore store = Open();
  EXPECT_EQ(store.Get(SampleKey()).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(Files("blobs").size(), 0u);
  EXPECT_EQ(store.Stats().partial_files, 1);
  const PruneResult pr = store.Prune([](const Entry&) { return true; }, /*partial_age_s=*/0);
  EXPECT_EQ(pr.partial_files_removed, 1);
  EXPECT_EQ(store.Stats().partial_files, 0);
  // The next writer stores it whole.
  ASSERT_TRUE(store.Put(SampleKey(), bytes).ok());
  EXPECT_TRUE(store.Get(SampleKey()).ok());
}

TEST_F(StoreTest, ImportFilesTheBundleUnderTheKeyInside) {
  DirStore store = Open();
  BundleKey gpu = SampleKey();
  gpu.device = "cuda:NVIDIA H100 80GB HBM3";
  auto e = store.Import(HeaderOnlyBundle(gpu));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->key, gpu);
  EXPECT_TRUE(store.Get(gpu).ok());
  EXPECT_EQ(store.Get(SampleKey()).status().code(), StatusCode::kNotFound);
  ASSERT_TRUE(store.Put(SampleKey(), HeaderOnlyBundle(SampleKey())).ok());
  // Both bundles of the run, found by its digest.
  EXPECT_EQ(store.ListRun(RunDigest(gpu)).size(), 2u);
  EXPECT_EQ(store.List().size(), 2u);
  EXPECT_EQ(store.Import("not a bundle at all").status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(store.Import(HeaderOnlyBundle(SampleKey(), {{"format", 99}}))
                .status()
                .message()
                .find("format 99, this build reads 1 to 2"),
            std::string::npos);
  // Format 1 (make_references.py's: every tensor as computed) is read still; 0 never was.
  BundleKey older = SampleKey();
  older.device = "cuda:older";
  EXPECT_TRUE(store.Import(HeaderOnlyBundle(older, {{"format", 1}})).ok());
  EXPECT_FALSE(store.Import(HeaderOnlyBundle(older, {{"format", 0}})).ok());
}

TEST_F(StoreTest, PruneRemovesRejectedKeysAndTheBlobsNoKeyNames) {
  DirStore store = Open();
  BundleKey old_build = SampleKey();
  old_build.zoo_version = "0000000000000000";
  const std::string old_bytes = HeaderOnlyBundle(old_build);
  ASSERT_TRUE(store.Put(old_build, old_bytes).ok());
  ASSERT_TRUE(store.Put(SampleKey(), HeaderOnlyBundle(SampleKey())).ok());
  const std::string d = Sha256Hex(old_bytes);
  const auto on_disk = static_cast<int64_t>(fs::file_size(root_ / "blobs" / d.substr(0, 2) / d));
  const PruneResult r =
      store.Prune([](const Entry& e) { return e.key.zoo_version == SampleKey().zoo_version; });
  EXPECT_EQ(r.keys_removed, 1);
  EXPECT_EQ(r.blobs_removed, 1);
  EXPECT_EQ(r.bytes_freed, on_disk) << "the disk the blob took (deflated)";
  EXPECT_EQ(store.Get(old_build).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store.Get(SampleKey()).ok());
}

}  // namespace
}  // namespace ts::refs
