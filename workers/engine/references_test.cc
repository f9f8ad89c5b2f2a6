// Reference bundles in the engine: a run from a stored bundle gives the verdicts of a fresh run
// byte for byte, a change to any part of the key misses the stored bundle, and a damaged,
// truncated or foreign bundle is refused with a warning and recomputed.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "workers/engine/engine.h"
#include "workers/engine/engine_test_util.h"
#include "workers/refs/bundle.h"
#include "workers/refs/store.h"
#include "workers/refs/zoo_version.h"
#include "workers/zoo/model.h"

namespace ts::engine {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// Classes of every kind: decoders (dense, MoE), encoders (whose key bias needs the fp64
// gradient step), encoder-decoders, vision (transformer and convolutional), audio.
const std::vector<std::string> kClasses = {
    "LlamaForCausalLM",
    "GPT2LMHeadModel",
    "MixtralForCausalLM",
    "BertForMaskedLM",
    "BertForSequenceClassification",
    "T5ForConditionalGeneration",
    "ViTForImageClassification",
    "ResNetForImageClassification",
    "Wav2Vec2ForCTC",
};

// The verdicts of a record: everything but wall-clock times and where the references came from.
json Verdicts(json j) {
  j.erase("timings_ms");
  j.erase("references");
  std::function<void(json&)> strip = [&](json& v) {
    if (!v.is_object()) return;
    for (const char* k : {"ms", "compile_wall_ms", "first_run_ms"}) v.erase(k);
    for (auto& [k, child] : v.items()) strip(child);
  };
  strip(j);
  return j;
}

json Fp32Numerics() {
  json p = Baseline();
  p["numerics"]["matmul"] = "fp32";
  return p;
}

class ReferencesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("engine_refs_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    EmptyStore();
  }
  void EmptyStore() {
    fs::remove_all(root_);
    store_ = std::make_unique<refs::DirStore>(*refs::DirStore::Open(root_.string()));
  }
  void TearDown() override { fs::remove_all(root_); }

  RunOptions WithStore(RunOptions o, bool reuse = true) {
    refs::DirStore* s = store_.get();
    o.references.save = [s](const refs::BundleKey& k, const std::string& b) {
      return s->Put(k, b);
    };
    if (reuse) o.references.load = [s](const refs::BundleKey& k) { return s->Get(k); };
    return o;
  }

  static RunOptions Row(const std::string& arch, uint64_t seed = 5) {
    RunOptions o;
    o.arch = arch;
    o.seed = seed;
    o.model_id = "org/" + arch + "-ft";
    return o;
  }

  static json Config(const std::string& arch) { return *zoo::ExampleConfig(arch); }

  // The one bundle file in the store.
  fs::path OnlyBlob() const {
    std::vector<fs::path> blobs;
    for (const auto& e : fs::recursive_directory_iterator(root_ / "blobs"))
      if (e.is_regular_file()) blobs.push_back(e.path());
    EXPECT_EQ(blobs.size(), 1u);
    return blobs.empty() ? fs::path() : blobs[0];
  }

  fs::path root_;
  std::unique_ptr<refs::DirStore> store_;
};

// The round trip: fresh, then computed and stored, then from the stored bundle; the three
// records' verdicts are equal byte for byte, on bf16 and fp32 declared numerics and on a
// profile whose defects fail outputs and gradients (so the fp64 gradient step is taken).
TEST_F(ReferencesTest, StoredBundlesGiveTheFreshVerdictsByteForByte) {
  const std::vector<std::pair<std::string, json>> profiles = {
      {"baseline", Baseline()},
      {"fp32", Fp32Numerics()},
      {"softmax backward +3%",
       WithDefect("aten::_softmax_backward_data", {{"kind", "scale"}, {"value", 1.03}})},
      {"softmax +2%", WithDefect("aten::_softmax", {{"kind", "scale"}, {"value", 1.02}})},
  };
  int golden_from_bundle = 0, failures = 0;
  for (const auto& [pname, profile] : profiles) {
    EmptyStore();  // each profile computes its own (bundles do not depend on defects: below)
    for (const std::string& arch : kClasses) {
      SCOPED_TRACE(pname + " " + arch);
      Use(profile);
      const ModelResult fresh = RunModel(Config(arch), Row(arch));
      Use(profile);
      const ModelResult computed = RunModel(Config(arch), WithStore(Row(arch)));
      Use(profile);
      const ModelResult stored = RunModel(Config(arch), WithStore(Row(arch)));
      EXPECT_EQ(fresh.references.source, "fresh");
      EXPECT_EQ(computed.references.source, "computed") << computed.references.warning;
      ASSERT_EQ(stored.references.source, "stored") << stored.references.warning;
      EXPECT_EQ(stored.references.content_digest, computed.references.content_digest);
      EXPECT_TRUE(stored.references.warning.empty()) << stored.references.warning;
      const std::string want = Verdicts(ToJson(fresh)).dump(1);
      EXPECT_EQ(Verdicts(ToJson(computed)).dump(1), want);
      EXPECT_EQ(Verdicts(ToJson(stored)).dump(1), want);
      // The stored run did none of the reference work.
      for (const char* t : {"train_reference", "train_declared", "train_golden_grads"}) {
        EXPECT_FALSE(stored.timings_ms.count(t)) << t;
      }
      if (computed.timings_ms.count("train_golden_grads")) ++golden_from_bundle;
      for (const auto& [m, v] : fresh.modes) failures += v.status != Verdict::kPass;
    }
  }
  EXPECT_GE(golden_from_bundle, 6) << "the fp64 gradient step should come from bundles";
  EXPECT_GE(failures, 6) << "the defect profiles should fail some modes";
}

// Bundles hold no trace of the device: a profile with the same declared numerics takes the
// bundles another profile stored. A bundle holds in full only the first-step gradients its
// producer's device made differ from the declared ones (the judge reads no other); a device
// that makes another one differ has train's references computed again, and the key then names
// the bundle with that gradient too (and its fp64 gradients): the next such run takes it.
TEST_F(ReferencesTest, AnotherProfileTakesTheBundlesAndCompletesThemWithWhatItNeeds) {
  const std::string arch = "LlamaForCausalLM";
  const json defect = WithDefect("aten::_softmax_backward_data", {{"kind", "scale"}, {"value", 1.03}});
  Use(defect);
  const ModelResult fresh = RunModel(Config(arch), Row(arch));
  ASSERT_TRUE(fresh.timings_ms.count("train_golden_grads")) << "the defect needs the fp64 step";
  Use(Baseline());
  const ModelResult clean = RunModel(Config(arch), WithStore(Row(arch)));
  ASSERT_EQ(clean.references.source, "computed");
  ASSERT_FALSE(clean.timings_ms.count("train_golden_grads")) << "a clean device needs none";
  const refs::Bundle slim =
      *refs::DecodeBundle(*store_->ReadBlob(clean.references.content_digest));
  EXPECT_GT(slim.train->declared_digests.size(), 5u);
  EXPECT_TRUE(slim.train->grads.empty()) << "no gradient read in full on a clean device";
  Use(defect);
  const ModelResult first = RunModel(Config(arch), WithStore(Row(arch)));
  EXPECT_EQ(first.references.source, "completed");
  EXPECT_TRUE(first.timings_ms.count("train_reference"));
  EXPECT_TRUE(first.timings_ms.count("train_golden_grads"));
  EXPECT_NE(first.references.content_digest, clean.references.content_digest);
  const refs::Bundle fuller =
      *refs::DecodeBundle(*store_->ReadBlob(first.references.content_digest));
  EXPECT_FALSE(fuller.train->grads.empty());
  EXPECT_EQ(fuller.train->grads_golden.size(), fuller.train->grads.size());
  EXPECT_LT(fuller.train->grads.size(), fuller.train->declared_digests.size());
  Use(defect);
  const ModelResult second = RunModel(Config(arch), WithStore(Row(arch)));
  EXPECT_EQ(second.references.source, "stored");
  for (const char* t : {"train_reference", "train_declared", "train_golden_grads"}) {
    EXPECT_FALSE(second.timings_ms.count(t)) << t;
  }
  EXPECT_EQ(second.references.content_digest, first.references.content_digest);
  // The clean device still takes the fuller bundle as it is.
  Use(Baseline());
  const ModelResult clean_again = RunModel(Config(arch), WithStore(Row(arch)));
  EXPECT_EQ(clean_again.references.source, "stored");
  EXPECT_EQ(Verdicts(ToJson(clean_again)).dump(1), Verdicts(ToJson(clean)).dump(1));
  for (const ModelResult* r : {&first, &second}) {
    EXPECT_EQ(Verdicts(ToJson(*r)).dump(1), Verdicts(ToJson(fresh)).dump(1));
  }
  EXPECT_EQ(Mode(fresh, "train").status, Verdict::kFailAccuracy);
}

// A bundle that holds a reference verdict (the producer's references failed) ends the modes
// with it, as the producer's run did, without computing anything.
TEST_F(ReferencesTest, AStoredReferenceVerdictEndsTheModesWithIt) {
  Use(Baseline());
  const std::string arch = "LlamaForCausalLM";
  ASSERT_EQ(RunModel(Config(arch), WithStore(Row(arch))).references.source, "computed");
  const refs::Entry entry = store_->List().at(0);
  refs::Bundle b = *refs::DecodeBundle(*store_->ReadBlob(entry.content_digest));
  b.train->outcome = {"ref_fail", "reference training loss is not finite"};
  b.train->loss_band = {1, 2, 3, 4, 5};
  ASSERT_TRUE(store_->Put(b.key, *refs::EncodeBundle(b)).ok());
  ModelResult r = RunModel(Config(arch), WithStore(Row(arch)));
  EXPECT_EQ(r.references.source, "stored");
  EXPECT_EQ(Mode(r, "eager").status, Verdict::kPass);
  EXPECT_EQ(Mode(r, "train").status, Verdict::kRefFail);
  EXPECT_EQ(Mode(r, "train").error, "reference training loss is not finite");
  EXPECT_EQ(Mode(r, "train").loss_band, b.train->loss_band);
  EXPECT_EQ(Mode(r, "train").loss_reference, b.train->loss_reference);
  EXPECT_FALSE(r.timings_ms.count("train_device"));

  b.forward = refs::ForwardReferences{
      {"ref_nondeterministic", "reference: two CPU fp32 runs differ"}, {}, {}, {}};
  ASSERT_TRUE(store_->Put(b.key, *refs::EncodeBundle(b)).ok());
  r = RunModel(Config(arch), WithStore(Row(arch)));
  for (const char* m : {"eager", "compile", "train"}) {
    EXPECT_EQ(Mode(r, m).status, Verdict::kRefNondeterministic) << m;
    EXPECT_EQ(Mode(r, m).error, "reference: two CPU fp32 runs differ") << m;
  }
  EXPECT_FALSE(r.timings_ms.count("eager"));
}

// Each run-side part of the key: another seed or another config misses the stored bundle.
TEST_F(ReferencesTest, AnotherSeedOrConfigOrModesMissesTheStoredBundle) {
  Use(Baseline());
  const std::string arch = "GPT2LMHeadModel";
  ASSERT_EQ(RunModel(Config(arch), WithStore(Row(arch))).references.source, "computed");
  EXPECT_EQ(RunModel(Config(arch), WithStore(Row(arch))).references.source, "stored");
  EXPECT_EQ(RunModel(Config(arch), WithStore(Row(arch, /*seed=*/6))).references.source, "computed");
  json other = Config(arch);
  other["layer_norm_epsilon"] = 1e-6;
  EXPECT_EQ(RunModel(other, WithStore(Row(arch))).references.source, "computed");
  RunOptions id = Row(arch);
  id.model_id += "-2";
  EXPECT_EQ(RunModel(Config(arch), WithStore(id)).references.source, "computed");
  RunOptions eager = Row(arch);
  eager.modes = {"eager"};
  EXPECT_EQ(RunModel(Config(arch), WithStore(eager)).references.source, "computed");
  Use(Fp32Numerics());  // other declared numerics
  EXPECT_EQ(RunModel(Config(arch), WithStore(Row(arch))).references.source, "computed");
  EXPECT_EQ(store_->List().size(), 6u);
}

// The build-side parts (zoo version, torch version, device, dtype): a bundle made by another
// build or device is stored under another key, so this run does not find it; placed under this
// run's key it is refused, naming the part that differs.
TEST_F(ReferencesTest, ABundleOfAnotherBuildOrDeviceMissesAndIsRefusedUnderThisKey) {
  Use(Baseline());
  const std::string arch = "LlamaForCausalLM";
  const ModelResult first = RunModel(Config(arch), WithStore(Row(arch)));
  ASSERT_EQ(first.references.source, "computed");
  auto stored = store_->List().at(0);
  auto bundle = refs::DecodeBundle(*store_->ReadBlob(stored.content_digest));
  ASSERT_TRUE(bundle.ok()) << bundle.status().ToString();
  const refs::BundleKey key = bundle->key;
  EXPECT_EQ(key.zoo_version, refs::ZooVersion());
  EXPECT_EQ(key.torch_version, TORCH_VERSION);
  const std::vector<std::pair<std::string, std::function<void(refs::BundleKey&)>>> parts = {
      {"zoo_version", [](refs::BundleKey& k) { k.zoo_version = "0000000000000000"; }},
      {"torch_version", [](refs::BundleKey& k) { k.torch_version = "2.11.0"; }},
      {"device", [](refs::BundleKey& k) { k.device = "cuda:NVIDIA H100 80GB HBM3"; }},
      {"dtype", [](refs::BundleKey& k) { k.dtype = "bfloat16"; }},
  };
  for (const auto& [part, edit] : parts) {
    SCOPED_TRACE(part);
    fs::remove_all(root_);
    store_ = std::make_unique<refs::DirStore>(*refs::DirStore::Open(root_.string()));
    refs::Bundle other = *bundle;
    edit(other.key);
    const std::string bytes = *refs::EncodeBundle(other);
    ASSERT_TRUE(store_->Put(other.key, bytes).ok());
    const ModelResult miss = RunModel(Config(arch), WithStore(Row(arch)));
    EXPECT_EQ(miss.references.source, "computed");
    EXPECT_TRUE(miss.references.warning.empty()) << miss.references.warning;
    // The foreign bundle under this run's key: refused, recomputed, stored right.
    ASSERT_TRUE(store_->Put(key, bytes).ok());
    const ModelResult refused = RunModel(Config(arch), WithStore(Row(arch)));
    EXPECT_EQ(refused.references.source, "computed");
    EXPECT_NE(refused.references.warning.find("another key: " + part), std::string::npos)
        << refused.references.warning;
    EXPECT_EQ(Verdicts(ToJson(refused)).dump(1), Verdicts(ToJson(first)).dump(1));
    EXPECT_EQ(RunModel(Config(arch), WithStore(Row(arch))).references.source, "stored");
  }
}

// A damaged or truncated bundle file is refused with a warning in the record, the references
// are computed again (the verdict is the fresh one) and stored whole.
TEST_F(ReferencesTest, ADamagedOrTruncatedBundleIsRefusedAndRecomputed) {
  Use(Baseline());
  const std::string arch = "BertForSequenceClassification";
  const ModelResult fresh = RunModel(Config(arch), Row(arch));
  const std::vector<std::pair<std::string, std::function<void(const fs::path&)>>> damages = {
      {"flipped bytes",
       [](const fs::path& p) {
         std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
         f.seekg(static_cast<std::streamoff>(fs::file_size(p) / 2));
         const char c = static_cast<char>(f.get());
         f.seekp(static_cast<std::streamoff>(fs::file_size(p) / 2));
         f.put(static_cast<char>(c ^ 0x5a));
       }},
      {"truncated", [](const fs::path& p) { fs::resize_file(p, fs::file_size(p) - 100); }},
      {"removed", [](const fs::path& p) { fs::remove(p); }},
  };
  for (const auto& [what, damage] : damages) {
    SCOPED_TRACE(what);
    fs::remove_all(root_);
    store_ = std::make_unique<refs::DirStore>(*refs::DirStore::Open(root_.string()));
    Use(Baseline());
    ASSERT_EQ(RunModel(Config(arch), WithStore(Row(arch))).references.source, "computed");
    damage(OnlyBlob());
    Use(Baseline());
    const ModelResult r = RunModel(Config(arch), WithStore(Row(arch)));
    EXPECT_EQ(r.references.source, "computed");
    EXPECT_NE(r.references.warning.find("stored reference bundle refused"), std::string::npos)
        << r.references.warning;
    EXPECT_EQ(Verdicts(ToJson(r)).dump(1), Verdicts(ToJson(fresh)).dump(1));
    Use(Baseline());
    const ModelResult again = RunModel(Config(arch), WithStore(Row(arch)));
    EXPECT_EQ(again.references.source, "stored") << again.references.warning;
  }
}

// --references fresh: nothing is read, the computed bundle is stored (the same bytes).
TEST_F(ReferencesTest, FreshReferencesReadNothingAndStoreTheSameBundle) {
  Use(Baseline());
  const std::string arch = "GPT2LMHeadModel";
  const ModelResult a = RunModel(Config(arch), WithStore(Row(arch)));
  const ModelResult b = RunModel(Config(arch), WithStore(Row(arch), /*reuse=*/false));
  EXPECT_EQ(a.references.source, "computed");
  EXPECT_EQ(b.references.source, "computed");
  EXPECT_EQ(a.references.content_digest, b.references.content_digest)
      << "references are deterministic: the same bundle, stored once";
  EXPECT_EQ(store_->Stats().blobs, 1);
}

}  // namespace
}  // namespace ts::engine
