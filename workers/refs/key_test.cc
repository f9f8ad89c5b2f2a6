// The key: its canonical JSON, its digests, and that every field changes it.
#include "workers/refs/key.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "workers/refs/refs_test_util.h"
#include "workers/refs/zoo_version.h"

namespace ts::refs {
namespace {

using testing::SampleKey;

TEST(KeyTest, JsonRoundTripsEveryField) {
  const BundleKey k = SampleKey();
  auto back = KeyFromJson(KeyToJson(k));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, k);
  EXPECT_EQ(KeyDigest(*back), KeyDigest(k));
  EXPECT_TRUE(IsDigest(KeyDigest(k)));
}

// A change to any one part of the key is another key: a stored bundle of the old one misses.
TEST(KeyTest, EveryFieldChangesTheDigestAndIsNamed) {
  const std::vector<std::pair<std::string, std::function<void(BundleKey&)>>> edits = {
      {"model_id", [](BundleKey& k) { k.model_id += "-ft"; }},
      {"config_hash", [](BundleKey& k) { k.config_hash = "fedcba9876543210"; }},
      {"arch", [](BundleKey& k) { k.arch = "LlamaForSequenceClassification"; }},
      {"task", [](BundleKey& k) { k.task = "text-classification"; }},
      {"weights_seed", [](BundleKey& k) { k.weights_seed += 1; }},
      {"batch_seed", [](BundleKey& k) { k.batch_seed += 1; }},
      {"batch_size", [](BundleKey& k) { k.batch_size = 4; }},
      {"train_steps", [](BundleKey& k) { k.train_steps = 6; }},
      {"learning_rate", [](BundleKey& k) { k.learning_rate = 0.01; }},
      {"modes", [](BundleKey& k) { k.modes = {kForwardPart}; }},
      {"zoo_version", [](BundleKey& k) { k.zoo_version = "ffffffffffffffff"; }},
      {"torch_version", [](BundleKey& k) { k.torch_version = "2.11.0"; }},
      {"device", [](BundleKey& k) { k.device = "cuda:NVIDIA H100 80GB HBM3"; }},
      {"dtype", [](BundleKey& k) { k.dtype = "bfloat16"; }},
      {"numerics", [](BundleKey& k) { k.numerics = "fp32"; }},
  };
  EXPECT_EQ(edits.size(), KeyToJson(SampleKey()).size()) << "a key field without a test here";
  const BundleKey base = SampleKey();
  for (const auto& [field, edit] : edits) {
    BundleKey k = base;
    edit(k);
    EXPECT_NE(KeyDigest(k), KeyDigest(base)) << field;
    EXPECT_EQ(FirstDifference(base, k), field);
  }
  EXPECT_EQ(FirstDifference(base, base), "");
}

// The run digest groups the bundles of one model run made by other devices or builds.
TEST(KeyTest, RunDigestIsTheModelRunAlone) {
  const BundleKey base = SampleKey();
  BundleKey gpu = base;
  gpu.device = "cuda:NVIDIA H100 80GB HBM3";
  gpu.dtype = "bfloat16";
  gpu.torch_version = "2.11.0";
  gpu.zoo_version = "transformers 5.17.0";
  gpu.numerics = "fp32";
  gpu.modes = {kForwardPart};
  EXPECT_EQ(RunDigest(gpu), RunDigest(base));
  EXPECT_NE(KeyDigest(gpu), KeyDigest(base));
  BundleKey other = base;
  other.weights_seed = 8;
  EXPECT_NE(RunDigest(other), RunDigest(base));
}

TEST(KeyTest, FromJsonNamesTheBadField) {
  nlohmann::json j = KeyToJson(SampleKey());
  j["weights_seed"] = "seven";
  EXPECT_NE(KeyFromJson(j).status().message().find("key.weights_seed"), std::string::npos);
  j = KeyToJson(SampleKey());
  j.erase("device");
  EXPECT_NE(KeyFromJson(j).status().message().find("key.device: missing"), std::string::npos);
  j = KeyToJson(SampleKey());
  j["modes"] = {"eager"};
  EXPECT_NE(KeyFromJson(j).status().message().find("key.modes"), std::string::npos);
  j = KeyToJson(SampleKey());
  j["colour"] = "blue";
  EXPECT_NE(KeyFromJson(j).status().message().find("key.colour: unknown field"), std::string::npos);
}

TEST(KeyTest, Sha256MatchesTheStandardVector) {
  EXPECT_EQ(Sha256Hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_FALSE(IsDigest("ABC"));
}

TEST(KeyTest, ZooVersionIsADigestOfThisBuild) {
  const std::string v = ZooVersion();
  ASSERT_EQ(v.size(), 16u);
  EXPECT_TRUE(IsDigest(v + v + v + v)) << v;
}

}  // namespace
}  // namespace ts::refs
