// Tests of safetensors.h and export.h: every registered class exports and replays to identical
// outputs; truncated, mislabelled, sharded and mismatched checkpoints.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "workers/zoo/export.h"
#include "workers/zoo/safetensors.h"
#include "workers/zoo/state_dict.h"

namespace ts::zoo {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() / ("zoo_export_test_" + std::to_string(::getpid()) + "_" +
                                         std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  fs::path path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::string Export(const std::string& arch, const fs::path& dir, uint64_t seed = 3) {
  ExportOptions o;
  o.arch = arch;
  o.seed = seed;
  Status s = ExportModel(*ExampleConfig(arch), o, dir.string());
  return s.ok() ? "" : s.ToString();
}

std::unique_ptr<Model> Tiny(const std::string& arch) {
  BuildOptions o;
  o.arch = arch;
  auto m = BuildModel(*ExampleConfig(arch), o);
  EXPECT_TRUE(m.ok()) << arch << ": " << m.status().ToString();
  return m.ok() ? std::move(*m) : nullptr;
}

std::string Bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteBytes(const fs::path& p, const std::string& b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(b.data(), static_cast<std::streamsize>(b.size()));
}

// The header and the data of a safetensors file.
std::pair<nlohmann::json, std::string> Split(const std::string& b) {
  uint64_t len = 0;
  for (int i = 7; i >= 0; --i) len = (len << 8) | static_cast<unsigned char>(b[i]);
  return {nlohmann::json::parse(b.substr(8, len)), b.substr(8 + len)};
}

std::string Join(const nlohmann::json& header, const std::string& data) {
  std::string h = header.dump();
  while (h.size() % 8) h.push_back(' ');
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((h.size() >> (8 * i)) & 0xff);
  return out + h + data;
}

TEST(ExportTest, EveryClassRoundTripsToIdenticalOutputs) {
  TempDir tmp;
  std::vector<std::string> failed;
  for (const ArchInfo& a : SupportedArchitectures()) {
    const fs::path dir = tmp.path() / a.arch;
    const std::string err = Export(a.arch, dir);
    if (!err.empty()) {
      failed.push_back(a.arch + ": export: " + err);
      continue;
    }
    for (const char* f : {"config.json", "model.safetensors", "inputs.safetensors",
                          "outputs.safetensors"}) {
      EXPECT_TRUE(fs::exists(dir / f)) << a.arch << " " << f;
    }
    auto worst = ReplayExport(dir.string());
    if (!worst.ok()) {
      failed.push_back(a.arch + ": replay: " + worst.status().ToString());
    } else if (*worst != 0.0) {
      failed.push_back(a.arch + ": outputs differ by " + std::to_string(*worst));
    }
    fs::remove_all(dir);
  }
  EXPECT_TRUE(failed.empty()) << failed.size() << " classes, first: " << failed.front();
  for (const auto& f : failed) ADD_FAILURE() << f;
}

TEST(ExportTest, SameSeedSameFilesOtherSeedOtherWeights) {
  TempDir tmp;
  ASSERT_EQ(Export("LlamaForCausalLM", tmp.path() / "a", 5), "");
  ASSERT_EQ(Export("LlamaForCausalLM", tmp.path() / "b", 5), "");
  ASSERT_EQ(Export("LlamaForCausalLM", tmp.path() / "c", 6), "");
  EXPECT_EQ(Bytes(tmp.path() / "a/model.safetensors"), Bytes(tmp.path() / "b/model.safetensors"));
  EXPECT_NE(Bytes(tmp.path() / "a/model.safetensors"), Bytes(tmp.path() / "c/model.safetensors"));
  auto cfg = nlohmann::json::parse(Bytes(tmp.path() / "a/config.json"));
  EXPECT_EQ(cfg["architectures"][0], "LlamaForCausalLM");
  EXPECT_EQ(cfg["model_type"], "llama");
}

// transformers' LlamaForSequenceClassification (modeling_llama.py, via
// GenericForSequenceClassification.forward in modeling_layers.py) pools
// (arange(S) * (input_ids != pad_token_id)).argmax(-1) and raises for a batch of two without a pad
// id; the zoo pools the last attended token. The export names a pad id no attended token holds
// and pads with it, so both pool the same token, and the logits are the zoo's without it.
TEST(ExportTest, DecoderSequenceClassificationGetsAPadIdTheBatchPadsWith) {
  TempDir tmp;
  const std::string arch = "LlamaForSequenceClassification";
  ASSERT_FALSE(ExampleConfig(arch)->contains("pad_token_id"));
  ASSERT_EQ(Export(arch, tmp.path()), "");
  auto cfg = nlohmann::json::parse(Bytes(tmp.path() / "config.json"));
  ASSERT_TRUE(cfg.contains("pad_token_id") && cfg["pad_token_id"].is_number_integer());
  const int64_t pad = cfg["pad_token_id"].get<int64_t>();
  auto in = ReadSafetensors((tmp.path() / "inputs.safetensors").string());
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  const at::Tensor ids = in->at("input_ids"), mask = in->at("attention_mask");
  ASSERT_GT(mask.eq(0).sum().item<int64_t>(), 0) << "the batch has padded positions";
  EXPECT_TRUE(ids.masked_select(mask.eq(0)).eq(pad).all().item<bool>());
  EXPECT_FALSE(ids.masked_select(mask.ne(0)).eq(pad).any().item<bool>());
  // transformers' pooled index equals the last attended one in every row.
  const at::Tensor hf_index = (at::arange(ids.size(1)) * ids.ne(pad).to(at::kLong)).argmax(-1);
  const at::Tensor last_attended = mask.to(at::kLong).sum(-1) - 1;
  EXPECT_TRUE(at::equal(hf_index, last_attended));
  // The logits are those of the zoo's model without the pad id (same weights and tokens).
  auto m = Tiny(arch);
  ASSERT_NE(m, nullptr);
  auto w = m->InitWeights(3);
  auto out = ReadSafetensors((tmp.path() / "outputs.safetensors").string());
  ASSERT_TRUE(out.ok());
  const at::Tensor zoo = m->Forward(w, m->MakeBatch(3, 0).inputs)[0];
  EXPECT_LT((zoo - out->at("logits")).abs().max().item<double>(), 1e-5);
  auto replay = ReplayExport(tmp.str());
  ASSERT_TRUE(replay.ok()) << replay.status().ToString();
  EXPECT_EQ(*replay, 0.0);
  // An encoder's pooling does not read the pad id: its config is left as it was.
  ASSERT_EQ(Export("BertForSequenceClassification", tmp.path() / "bert"), "");
  EXPECT_EQ(nlohmann::json::parse(Bytes(tmp.path() / "bert/config.json"))["pad_token_id"],
            (*ExampleConfig("BertForSequenceClassification"))["pad_token_id"]);
}

TEST(ExportTest, CompactExportIsF16OnAGridAndReplaysExactly) {
  TempDir tmp;
  for (const char* arch : {"LlamaForCausalLM", "BertForMaskedLM", "ResNetForImageClassification"}) {
    ExportOptions o;
    o.arch = arch;
    o.seed = 4;
    o.compact = true;
    const fs::path dir = tmp.path() / arch;
    ASSERT_TRUE(ExportModel(*ExampleConfig(arch), o, dir.string()).ok()) << arch;
    auto worst = ReplayExport(dir.string());
    ASSERT_TRUE(worst.ok()) << worst.status().ToString();
    EXPECT_EQ(*worst, 0.0) << arch;
    auto w = ReadSafetensors((dir / "model.safetensors").string());
    ASSERT_TRUE(w.ok());
    for (const auto& [k, t] : *w) {
      if (!at::isFloatingType(t.scalar_type())) continue;  // num_batches_tracked
      EXPECT_EQ(t.scalar_type(), at::kHalf) << k;
      const double top = t.abs().max().item<double>();
      if (top == 0.0) continue;
      const double step = std::exp2(std::ceil(std::log2(top / 15.0)));
      const at::Tensor levels = t.to(at::kDouble) / step;
      EXPECT_TRUE(at::equal(levels, at::round(levels))) << k << ": on the grid";
      EXPECT_LE(std::get<0>(at::_unique(levels)).size(0), 31) << k;
    }
  }
}

// The extra state_dict entries transformers keeps (state_dict.h), and the export writes them.
TEST(ExportTest, StateDictHasTiedCopiesAndBuffers) {
  auto tied_to = [](const std::string& arch, const std::string& name) -> std::string {
    auto m = Tiny(arch);
    if (!m) return "<no model>";
    for (const StateDictEntry& e : StateDictShapes(*m))
      if (e.name == name) return e.tied_to.empty() ? "<own>" : e.tied_to;
    return "<absent>";
  };
  EXPECT_EQ(tied_to("GemmaForCausalLM", "lm_head.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(tied_to("LlamaForCausalLM", "lm_head.weight"), "<own>");  // untied: a weight
  EXPECT_EQ(tied_to("BertForMaskedLM", "cls.predictions.decoder.weight"),
            "bert.embeddings.word_embeddings.weight");
  EXPECT_EQ(tied_to("BertForMaskedLM", "cls.predictions.decoder.bias"), "cls.predictions.bias");
  EXPECT_EQ(tied_to("T5ForConditionalGeneration", "encoder.embed_tokens.weight"), "shared.weight");
  EXPECT_EQ(tied_to("T5ForConditionalGeneration", "decoder.embed_tokens.weight"), "shared.weight");
  EXPECT_EQ(tied_to("T5EncoderModel", "decoder.embed_tokens.weight"), "<absent>");
  EXPECT_EQ(tied_to("ResNetForImageClassification",
                    "resnet.embedder.embedder.normalization.num_batches_tracked"),
            "<own>");
  EXPECT_EQ(tied_to("Wav2Vec2ForCTC", "wav2vec2.masked_spec_embed"), "<own>");
  TempDir tmp;
  ASSERT_EQ(Export("GemmaForCausalLM", tmp.path()), "");
  auto sd = ReadSafetensors((tmp.path() / "model.safetensors").string());
  ASSERT_TRUE(sd.ok());
  ASSERT_TRUE(sd->count("lm_head.weight"));
  EXPECT_TRUE(at::equal(sd->at("lm_head.weight"), sd->at("model.embed_tokens.weight")));
}

TEST(ExportTest, TruncatedFileIsLoadFailNamingTheTensor) {
  TempDir tmp;
  ASSERT_EQ(Export("BertForMaskedLM", tmp.path()), "");
  const fs::path f = tmp.path() / "model.safetensors";
  const std::string b = Bytes(f);
  auto [header, data] = Split(b);
  // The tensor whose buffer is last.
  std::string last;
  uint64_t end = 0;
  for (const auto& [name, e] : header.items()) {
    if (name != "__metadata__" && e["data_offsets"][1].get<uint64_t>() > end) {
      end = e["data_offsets"][1].get<uint64_t>();
      last = name;
    }
  }
  WriteBytes(f, b.substr(0, b.size() - 16));
  auto r = ReplayExport(tmp.str());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("tensor '" + last + "'"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
  // A file cut inside its header.
  WriteBytes(f, b.substr(0, 20));
  r = ReplayExport(tmp.str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos) << r.status().message();
}

TEST(ExportTest, MislabelledDtypeIsLoadFailNamingTheTensor) {
  TempDir tmp;
  ASSERT_EQ(Export("GPT2LMHeadModel", tmp.path()), "");
  const fs::path f = tmp.path() / "model.safetensors";
  auto [header, data] = Split(Bytes(f));
  const std::string victim = "transformer.h.0.attn.c_attn.weight";
  ASSERT_TRUE(header.contains(victim));
  ASSERT_EQ(header[victim]["dtype"], "F32");
  header[victim]["dtype"] = "F16";
  WriteBytes(f, Join(header, data));
  auto r = ReplayExport(tmp.str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor '" + victim + "'"), std::string::npos)
      << r.status().message();
  EXPECT_NE(r.status().message().find("mislabelled"), std::string::npos);
  header[victim]["dtype"] = "F8_E9M9";
  WriteBytes(f, Join(header, data));
  r = ReplayExport(tmp.str());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor '" + victim + "': unsupported dtype"),
            std::string::npos)
      << r.status().message();
}

TEST(ExportTest, MissingOrMisshapedTensorNamesIt) {
  auto m = Tiny("LlamaForCausalLM");
  ASSERT_TRUE(m);
  TensorMap ckpt = m->InitWeights(1);
  ckpt["unused.extra"] = at::zeros({2});  // ignored
  ASSERT_TRUE(WeightsFromCheckpoint(*m, ckpt).ok());
  TensorMap missing = ckpt;
  missing.erase("model.norm.weight");
  auto r = WeightsFromCheckpoint(*m, missing);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor 'model.norm.weight': missing"), std::string::npos)
      << r.status().message();
  TensorMap shaped = ckpt;
  shaped["model.norm.weight"] = at::zeros({3});
  r = WeightsFromCheckpoint(*m, shaped);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("tensor 'model.norm.weight': shape [3]"), std::string::npos)
      << r.status().message();
}

TEST(ExportTest, ShardedIndexAndDtypeConversion) {
  TempDir tmp;
  auto m = Tiny("Qwen2ForCausalLM");
  ASSERT_TRUE(m);
  const WeightMap w = m->InitWeights(2);
  TensorMap a, b;
  nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", nlohmann::json::object()}};
  int i = 0;
  for (const auto& [k, v] : w) {
    const bool first = i++ % 2 == 0;
    (first ? a : b)[k] = v.to(at::kBFloat16);
    index["weight_map"][k] = first ? "model-00001-of-00002.safetensors"
                                   : "model-00002-of-00002.safetensors";
  }
  ASSERT_TRUE(WriteSafetensors((tmp.path() / "model-00001-of-00002.safetensors").string(), a).ok());
  ASSERT_TRUE(WriteSafetensors((tmp.path() / "model-00002-of-00002.safetensors").string(), b).ok());
  std::ofstream(tmp.path() / "model.safetensors.index.json") << index.dump();
  auto ckpt = ReadCheckpoint(tmp.str());
  ASSERT_TRUE(ckpt.ok()) << ckpt.status().ToString();
  EXPECT_EQ(ckpt->size(), w.size());
  auto loaded = WeightsFromCheckpoint(*m, *ckpt, at::kFloat);
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  for (const auto& [k, v] : w) {
    EXPECT_EQ(loaded->at(k).scalar_type(), at::kFloat);
    EXPECT_TRUE(at::equal(loaded->at(k), v.to(at::kBFloat16).to(at::kFloat))) << k;
  }
  // An index naming a tensor its shard lacks.
  index["weight_map"]["model.extra"] = "model-00001-of-00002.safetensors";
  std::ofstream(tmp.path() / "model.safetensors.index.json") << index.dump();
  auto bad = ReadCheckpoint(tmp.str());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("tensor 'model.extra'"), std::string::npos);
  // Hub-mirror layout: weights_dir/org/name.
  EXPECT_EQ(CheckpointDirFor(tmp.path().parent_path().string(), tmp.path().filename().string()),
            tmp.str());
  EXPECT_EQ(CheckpointDirFor(tmp.str(), "org/absent"), "");
}

}  // namespace
}  // namespace ts::zoo
