// The bundle file: every tensor and curve comes back bit for bit, and a bundle whose tensors do
// not match its metadata, or whose bytes are cut short, is refused.
#include "workers/refs/bundle.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "workers/refs/refs_test_util.h"
#include "workers/zoo/safetensors.h"

namespace ts::refs {
namespace {

Bundle Sample() {
  at::manual_seed(3);
  Bundle b;
  b.key = testing::SampleKey();
  b.provenance = {{"producer", "bundle_test"}};
  ForwardReferences f;
  f.outputs = {at::randn({2, 3}), at::Tensor(), at::arange(4)};
  f.golden = {f.outputs[0].to(at::kDouble) + 1e-9, at::Tensor(), at::arange(4)};
  f.declared = {f.outputs[0].to(at::kBFloat16).to(at::kFloat), at::Tensor(), at::arange(4)};
  b.forward = f;
  TrainReferences t;
  t.loss_reference = {2.5, 2.25, std::numeric_limits<double>::quiet_NaN(),
                      std::numeric_limits<double>::infinity(), 1e-300};
  t.loss_declared = {2.5, 2.2500001, 2.0, 1.9, 1.8};
  t.grads = {{"a.weight", at::randn({4, 3})}, {"a.bias", at::randn({4})}};
  t.grads_declared = {{"a.weight", at::randn({4, 3})}, {"a.bias", at::randn({4})}};
  t.golden_state = TrainReferences::Golden::kPresent;
  t.grads_golden = {{"a.weight", at::randn({4, 3}, at::kDouble)}};
  // An embedding's gradient: most rows exactly zero (stored without them), one row -0.0 (not
  // zero bit for bit: kept).
  at::Tensor emb = at::zeros({16, 3});
  emb[2] = at::randn({3});
  emb[9] = at::randn({3});
  emb[11].fill_(-0.0);
  t.grads["embed.weight"] = emb;
  t.grads_declared["embed.weight"] = emb + 1e-3 * (emb != 0);
  t.grads_golden["embed.weight"] = emb.to(at::kDouble);
  for (const auto& [p, g] : t.grads_declared) t.declared_digests[p] = TensorDigest(g);
  t.declared_digests["b.weight"] = TensorDigest(at::ones({2, 2}));  // a digest alone
  // The golden and declared references in the form the engine judges and a bundle stores.
  for (size_t i = 0; i < f.outputs.size(); ++i) {
    f.golden[i] = AsStored(f.golden[i], f.outputs[i]);
    f.declared[i] = AsStored(f.declared[i], f.outputs[i]);
  }
  for (GradMap* m : {&t.grads_declared, &t.grads_golden}) {
    for (auto& [p, g] : *m) g = AsStored(g, t.grads.at(p));
  }
  b.forward = f;
  b.train = t;
  return b;
}

void ExpectSameList(const TensorList& a, const TensorList& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].defined(), b[i].defined()) << i;
    if (!a[i].defined()) continue;
    EXPECT_EQ(a[i].scalar_type(), b[i].scalar_type()) << i;
    EXPECT_TRUE(at::equal(a[i], b[i])) << i;
  }
}

void ExpectSameGrads(const GradMap& a, const GradMap& b) {
  ASSERT_EQ(a.size(), b.size());
  for (const auto& [name, t] : a) {
    ASSERT_TRUE(b.count(name)) << name;
    EXPECT_EQ(t.scalar_type(), b.at(name).scalar_type()) << name;
    EXPECT_TRUE(at::equal(t, b.at(name))) << name;
  }
}

void ExpectSameCurve(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(std::memcmp(&a[i], &b[i], sizeof(double)), 0) << i << ": " << a[i] << " " << b[i];
  }
}

TEST(BundleTest, EncodeDecodeKeepsEveryBit) {
  const Bundle b = Sample();
  auto bytes = EncodeBundle(b);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  auto back = DecodeBundle(*bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->key, b.key);
  EXPECT_EQ(back->provenance, b.provenance);
  ASSERT_TRUE(back->forward && back->train);
  ExpectSameList(back->forward->outputs, b.forward->outputs);
  ExpectSameList(back->forward->golden, b.forward->golden);
  ExpectSameList(back->forward->declared, b.forward->declared);
  ExpectSameCurve(back->train->loss_reference, b.train->loss_reference);
  ExpectSameCurve(back->train->loss_declared, b.train->loss_declared);
  EXPECT_TRUE(back->train->loss_band.empty());
  ExpectSameGrads(back->train->grads, b.train->grads);
  ExpectSameGrads(back->train->grads_declared, b.train->grads_declared);
  ExpectSameGrads(back->train->grads_golden, b.train->grads_golden);
  EXPECT_EQ(back->train->golden_state, TrainReferences::Golden::kPresent);
  EXPECT_EQ(back->train->declared_digests, b.train->declared_digests);
  EXPECT_FALSE(back->train->declared_is_reference);
  EXPECT_EQ(TensorDigest(back->train->grads.at("embed.weight")),
            TensorDigest(b.train->grads.at("embed.weight")))
      << "the zero rows come back, the -0.0 row as it was";
  std::map<std::string, std::string> meta;
  auto stored = zoo::DecodeSafetensors(*bytes, "b", &meta);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->at("train.grads.reference.embed.weight").size(0), 3) << "3 of 16 rows stored";
  EXPECT_EQ(stored->at("train.grads.reference.a.weight").size(0), 4) << "no zero row: whole";
  // The same bundle encodes to the same bytes: its content address is stable.
  EXPECT_EQ(*EncodeBundle(*back), *bytes);
}

// A golden (fp64) or declared (fp32) reference is stored as a BF16 residual against its fp32
// anchor: within 2^-8 of its distance from the anchor (the noise the judge measures with it),
// the same bits once in stored form, and 2 bytes an element.
TEST(BundleTest, GoldenAndDeclaredAreStoredAsResidualsNoFinerThanTheJudgeReadsThem) {
  at::manual_seed(5);
  const int64_t n = 4096;
  at::Tensor anchor = at::randn({n}) * at::pow(10.0, at::randint(-6, 4, {n}).to(at::kFloat));
  anchor.narrow(0, 0, 8).zero_();  // zero anchors: the residual is the value
  at::Tensor golden = anchor.to(at::kDouble) * (1 + 6e-8 * at::randn({n}, at::kDouble));
  golden.narrow(0, 8, 8) = anchor.narrow(0, 8, 8).to(at::kDouble) * (1 + 1e-15);  // tiny
  golden.narrow(0, 16, 8) = anchor.narrow(0, 16, 8).to(at::kDouble) * -3;  // |r| > |anchor|
  at::Tensor declared = (anchor * (1 + 4e-3 * at::randn({n}))).to(at::kFloat);
  declared.narrow(0, 24, 8) = anchor.narrow(0, 24, 8) * (1 + 1e-6f);  // a few fp32 units
  // The bound: 2^-8 of the distance from the anchor, and the rounding to the value's dtype.
  for (const auto& [value, rounding] :
       {std::pair{golden, std::ldexp(1.0, -52)}, std::pair{declared, std::ldexp(1.0, -23)}}) {
    const at::Tensor stored = AsStored(value, anchor);
    ASSERT_EQ(stored.scalar_type(), value.scalar_type());
    const at::Tensor a = anchor.to(at::kDouble), v = value.to(at::kDouble);
    const at::Tensor err = (stored.to(at::kDouble) - v).abs();
    const at::Tensor bound = (v - a).abs() * (1.0 / 256) * (1 + 1e-6) + v.abs() * rounding;
    EXPECT_TRUE((err <= bound).all().item<bool>())
        << "worst excess " << (err - bound).max().item<double>();
    EXPECT_TRUE(at::equal(AsStored(stored, anchor), stored)) << "idempotent";
    EXPECT_TRUE(at::equal(AsStored(value, at::Tensor()), value)) << "no anchor: as it is";
  }
  at::Tensor inf = golden.clone();
  inf[100] = std::numeric_limits<double>::infinity();
  EXPECT_TRUE(at::equal(AsStored(inf, anchor), inf)) << "non-finite: stored as it is";

  Bundle b;
  b.key = testing::SampleKey();
  ForwardReferences f;
  f.outputs = {anchor};
  f.golden = {AsStored(golden, anchor)};
  f.declared = {AsStored(declared, anchor)};
  b.forward = f;
  const std::string bytes = *EncodeBundle(b);
  EXPECT_LT(bytes.size(), static_cast<size_t>(n) * (4 + 2 + 2) + 1024) << "8 bytes, not 16";
  auto back = DecodeBundle(bytes);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ExpectSameList(back->forward->golden, f.golden);
  ExpectSameList(back->forward->declared, f.declared);
  // A residual without its anchor's shape is refused, never expanded against another tensor.
  std::map<std::string, std::string> meta;
  auto tensors = *zoo::DecodeSafetensors(bytes, "b", &meta);
  EXPECT_EQ(tensors.at("forward.golden.0").scalar_type(), at::kBFloat16);
  tensors["forward.outputs.0"] = anchor.narrow(0, 0, 10).contiguous();
  EXPECT_NE(DecodeBundle(*zoo::EncodeSafetensors(tensors, meta))
                .status()
                .message()
                .find("'forward.golden.0': a residual without an F32 anchor of its shape"),
            std::string::npos);
}

TEST(BundleTest, AFailedPartKeepsItsVerdict) {
  Bundle b;
  b.key = testing::SampleKey();
  b.forward = ForwardReferences{
      {"ref_nondeterministic", "reference: two CPU fp32 runs differ"}, {}, {}, {}};
  auto back = DecodeBundle(*EncodeBundle(b));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->forward.has_value());
  EXPECT_FALSE(back->train.has_value());
  EXPECT_EQ(back->forward->outcome.status, "ref_nondeterministic");
  EXPECT_EQ(back->forward->outcome.error, "reference: two CPU fp32 runs differ");
  EXPECT_TRUE(back->forward->outputs.empty());
}

TEST(BundleTest, TensorsThatDoNotMatchTheMetadataAreRefused) {
  const std::string bytes = *EncodeBundle(Sample());
  std::map<std::string, std::string> meta;
  auto tensors = zoo::DecodeSafetensors(bytes, "b", &meta);
  ASSERT_TRUE(tensors.ok());
  auto missing = *tensors;
  missing.erase("train.grads.golden.a.weight");
  EXPECT_NE(DecodeBundle(*zoo::EncodeSafetensors(missing, meta))
                .status()
                .message()
                .find("'train.grads.golden.a.weight' missing"),
            std::string::npos);
  auto extra = *tensors;
  extra["forward.outputs.7"] = at::ones({1});
  EXPECT_NE(DecodeBundle(*zoo::EncodeSafetensors(extra, meta))
                .status()
                .message()
                .find("'forward.outputs.7' is not in its metadata"),
            std::string::npos);
  auto curve = *tensors;
  curve["train.loss.reference"] = at::ones({5});  // F32, not F64
  EXPECT_NE(DecodeBundle(*zoo::EncodeSafetensors(curve, meta))
                .status()
                .message()
                .find("not an F64 vector"),
            std::string::npos);
}

// The digest stands for the tensor: its bytes, dtype and shape.
TEST(BundleTest, TensorDigestTellsEqualTensorsFromAnyOther) {
  const at::Tensor a = at::arange(12, at::kFloat).reshape({3, 4});
  EXPECT_EQ(TensorDigest(a), TensorDigest(a.clone()));
  EXPECT_EQ(TensorDigest(a.t().contiguous().t()), TensorDigest(a)) << "layout is not content";
  at::Tensor flipped = a.clone();
  flipped.view({-1})[5] = std::nextafter(5.0f, 6.0f);
  EXPECT_NE(TensorDigest(flipped), TensorDigest(a));
  EXPECT_NE(TensorDigest(a.reshape({4, 3})), TensorDigest(a));
  EXPECT_NE(TensorDigest(a.to(at::kDouble)), TensorDigest(a));
  EXPECT_TRUE(IsDigest(TensorDigest(a)));
}

TEST(BundleTest, TruncatedBytesAreRefused) {
  const std::string bytes = *EncodeBundle(Sample());
  for (size_t keep : {size_t{0}, size_t{7}, size_t{100}, bytes.size() - 1}) {
    auto b = DecodeBundle(std::string_view(bytes).substr(0, keep));
    EXPECT_FALSE(b.ok()) << keep;
    EXPECT_NE(b.status().message().find("truncated"), std::string::npos)
        << keep << ": " << b.status().message();
  }
}

}  // namespace
}  // namespace ts::refs
