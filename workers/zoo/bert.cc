// BERT encoders: BertModel, BertForSequenceClassification, BertForMaskedLM.
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

struct BertLayerNames {
  std::string q, qb, k, kb, v, vb, ao, aob, aln, alnb, inter, interb, out, outb, oln, olnb;
};

class BertModelImpl : public Model {
 public:
  BertModelImpl(ModelSpec spec, BertConfig c, BertHead head)
      : Model(std::move(spec)), c_(std::move(c)), head_(head) {
    const int64_t h = c_.hidden_size, im = c_.intermediate_size;
    auto add = [this](const std::string& name, std::vector<int64_t> shape) {
      shapes_.emplace_back(name, std::move(shape));
      return name;
    };
    // BertModel's own state_dict has no "bert." prefix.
    const std::string p = head_ == BertHead::kBase ? "" : "bert.";
    word_ = add(p + "embeddings.word_embeddings.weight", {c_.vocab_size, h});
    pos_ = add(p + "embeddings.position_embeddings.weight", {c_.max_position_embeddings, h});
    type_ = add(p + "embeddings.token_type_embeddings.weight", {c_.type_vocab_size, h});
    emb_ln_ = add(p + "embeddings.LayerNorm.weight", {h});
    emb_lnb_ = add(p + "embeddings.LayerNorm.bias", {h});
    for (int64_t i = 0; i < c_.num_hidden_layers; ++i) {
      const std::string lp = p + "encoder.layer." + std::to_string(i) + ".";
      BertLayerNames l;
      l.q = add(lp + "attention.self.query.weight", {h, h});
      l.qb = add(lp + "attention.self.query.bias", {h});
      l.k = add(lp + "attention.self.key.weight", {h, h});
      l.kb = add(lp + "attention.self.key.bias", {h});
      l.v = add(lp + "attention.self.value.weight", {h, h});
      l.vb = add(lp + "attention.self.value.bias", {h});
      l.ao = add(lp + "attention.output.dense.weight", {h, h});
      l.aob = add(lp + "attention.output.dense.bias", {h});
      l.aln = add(lp + "attention.output.LayerNorm.weight", {h});
      l.alnb = add(lp + "attention.output.LayerNorm.bias", {h});
      l.inter = add(lp + "intermediate.dense.weight", {im, h});
      l.interb = add(lp + "intermediate.dense.bias", {im});
      l.out = add(lp + "output.dense.weight", {h, im});
      l.outb = add(lp + "output.dense.bias", {h});
      l.oln = add(lp + "output.LayerNorm.weight", {h});
      l.olnb = add(lp + "output.LayerNorm.bias", {h});
      layers_.push_back(std::move(l));
    }
    if (head_ != BertHead::kMaskedLM) {  // BertForMaskedLM has add_pooling_layer=False
      pool_ = add(p + "pooler.dense.weight", {h, h});
      poolb_ = add(p + "pooler.dense.bias", {h});
    }
    if (head_ == BertHead::kSequenceClassification) {
      cls_ = add("classifier.weight", {c_.num_labels, h});
      clsb_ = add("classifier.bias", {c_.num_labels});
    }
    if (head_ == BertHead::kMaskedLM) {
      // cls.predictions.decoder.{weight,bias} are tied to the word embeddings and to
      // cls.predictions.bias, so they do not appear on their own.
      tr_ = add("cls.predictions.transform.dense.weight", {h, h});
      trb_ = add("cls.predictions.transform.dense.bias", {h});
      trln_ = add("cls.predictions.transform.LayerNorm.weight", {h});
      trlnb_ = add("cls.predictions.transform.LayerNorm.bias", {h});
      mlmb_ = add("cls.predictions.bias", {c_.vocab_size});
    }
    seq_len_ = std::min(RunSeqLen(this->spec().tiny_config), c_.max_position_embeddings);
  }

  std::vector<std::pair<std::string, std::vector<int64_t>>> WeightShapes() const override {
    return shapes_;
  }
  std::vector<std::string> OutputNames() const override {
    if (head_ == BertHead::kBase) return {"last_hidden_state", "pooler_output"};
    return {"logits"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& ids = GetInput(inputs, "input_ids");
    at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
    at::Tensor types = GetOptionalInput(inputs, "token_type_ids");
    const int64_t b = ids.size(0), s = ids.size(1);
    const int64_t nh = c_.num_attention_heads, hd = c_.hidden_size / nh, hid = c_.hidden_size;
    const at::Device dev = ids.device();
    at::Tensor pos = at::arange(s, at::TensorOptions().dtype(at::kLong).device(dev));
    if (!types.defined()) types = at::zeros_like(ids);
    at::Tensor h = nn::Embedding(GetWeight(w, word_), ids, c_.pad_token_id.value_or(-1)) +
                   nn::Embedding(GetWeight(w, pos_), pos) +
                   nn::Embedding(GetWeight(w, type_), types);
    h = nn::LayerNorm(h, GetWeight(w, emb_ln_), GetWeight(w, emb_lnb_), c_.layer_norm_eps);
    at::Tensor blocked = nn::BlockedKeys(mask, s, /*causal=*/false, std::nullopt, dev);
    const double scale = 1.0 / std::sqrt(static_cast<double>(hd));
    auto heads = [&](const at::Tensor& t) { return t.view({b, s, nh, hd}).transpose(1, 2); };
    for (const BertLayerNames& l : layers_) {
      at::Tensor q = heads(nn::Linear(h, GetWeight(w, l.q), GetWeight(w, l.qb)));
      at::Tensor k = heads(nn::Linear(h, GetWeight(w, l.k), GetWeight(w, l.kb)));
      at::Tensor v = heads(nn::Linear(h, GetWeight(w, l.v), GetWeight(w, l.vb)));
      at::Tensor ctx = nn::Attention(q, k, v, blocked, scale).transpose(1, 2).reshape({b, s, hid});
      h = nn::LayerNorm(nn::Linear(ctx, GetWeight(w, l.ao), GetWeight(w, l.aob)) + h,
                        GetWeight(w, l.aln), GetWeight(w, l.alnb), c_.layer_norm_eps);
      at::Tensor i =
          nn::Activate(nn::Linear(h, GetWeight(w, l.inter), GetWeight(w, l.interb)), c_.hidden_act);
      h = nn::LayerNorm(nn::Linear(i, GetWeight(w, l.out), GetWeight(w, l.outb)) + h,
                        GetWeight(w, l.oln), GetWeight(w, l.olnb), c_.layer_norm_eps);
    }
    if (head_ == BertHead::kMaskedLM) {
      at::Tensor t =
          nn::Activate(nn::Linear(h, GetWeight(w, tr_), GetWeight(w, trb_)), c_.hidden_act);
      t = nn::LayerNorm(t, GetWeight(w, trln_), GetWeight(w, trlnb_), c_.layer_norm_eps);
      return {nn::Linear(t, GetWeight(w, word_), GetWeight(w, mlmb_))};
    }
    at::Tensor pooled =
        at::tanh(nn::Linear(h.select(1, 0), GetWeight(w, pool_), GetWeight(w, poolb_)));
    if (head_ == BertHead::kBase) return {h, pooled};
    return {nn::Linear(pooled, GetWeight(w, cls_), GetWeight(w, clsb_))};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    switch (head_) {
      case BertHead::kBase:
        // No task loss in HF: regress both outputs onto a fixed random target (the pooler
        // onto the target's first position) so that every weight trains.
        return at::mse_loss(out[0], labels.to(out[0].scalar_type())) +
               at::mse_loss(out[1], labels.select(1, 0).to(out[1].scalar_type()));
      case BertHead::kSequenceClassification:
        if (c_.num_labels == 1)
          return at::mse_loss(out[0].squeeze(-1), labels.to(out[0].scalar_type()));
        return CrossEntropy(out[0], labels);
      case BertHead::kMaskedLM:
        return CrossEntropy(out[0].reshape({-1, c_.vocab_size}), labels.reshape({-1}));
    }
    return out[0].sum();
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    const auto fopts = at::TensorOptions().dtype(at::kFloat);
    const int64_t s = seq_len_;
    at::Tensor ids = at::randint(0, c_.vocab_size, {batch_size, s}, gen, lopts);
    at::Tensor mask = MakeAttentionMask(batch_size, s);
    if (c_.pad_token_id) ids = ids.masked_fill(mask.eq(0), *c_.pad_token_id);
    at::Tensor types = at::zeros({batch_size, s}, lopts);
    if (c_.type_vocab_size >= 2) types.narrow(1, s / 2, s - s / 2).fill_(1);
    Batch batch;
    batch.inputs["input_ids"] = ids;
    batch.inputs["attention_mask"] = mask;
    batch.inputs["token_type_ids"] = types;
    switch (head_) {
      case BertHead::kBase:
        batch.labels["labels"] = at::randn({batch_size, s, c_.hidden_size}, gen, fopts);
        break;
      case BertHead::kSequenceClassification:
        batch.labels["labels"] = c_.num_labels == 1
                                     ? at::randn({batch_size}, gen, fopts)
                                     : at::randint(0, c_.num_labels, {batch_size}, gen, lopts);
        break;
      case BertHead::kMaskedLM: {
        // ~15% of attended positions (position 1 always) carry a label.
        at::Tensor pick = at::rand({batch_size, s}, gen, fopts).lt(0.15);
        pick.narrow(1, std::min<int64_t>(1, s - 1), 1).fill_(true);
        pick = at::logical_and(pick, mask.ne(0));
        batch.labels["labels"] = ids.masked_fill(pick.logical_not(), -100);
        break;
      }
    }
    return batch;
  }

 protected:
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override {
    Model::InitWeight(name, t, gen);
    if (name == word_ && c_.pad_token_id) t[*c_.pad_token_id].zero_();
  }

 private:
  BertConfig c_;
  BertHead head_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes_;
  std::vector<BertLayerNames> layers_;
  std::string word_, pos_, type_, emb_ln_, emb_lnb_, pool_, poolb_, cls_, clsb_, tr_, trb_, trln_,
      trlnb_, mlmb_;
  int64_t seq_len_ = 32;
};

}  // namespace

StatusOr<std::unique_ptr<Model>> BuildBert(ModelSpec spec, BertHead head) {
  TS_ASSIGN_OR_RETURN(BertConfig c, ParseBertConfig(spec.tiny_config));
  return std::unique_ptr<Model>(
      std::make_unique<BertModelImpl>(std::move(spec), std::move(c), head));
}

}  // namespace ts::zoo::internal

namespace ts::zoo::internal {

std::vector<ArchEntry> BertArchs() {
  auto scale = [](const nlohmann::json& c) { return ScaleToTiny(c, "bert"); };
  // Example modelled on bert-base-uncased.
  auto example = [](const char* arch) {
    return nlohmann::json{{"architectures", {arch}}, {"model_type", "bert"},
                          {"hidden_size", 768}, {"intermediate_size", 3072},
                          {"num_attention_heads", 12}, {"num_hidden_layers", 12},
                          {"vocab_size", 30522}, {"max_position_embeddings", 512},
                          {"type_vocab_size", 2}, {"hidden_act", "gelu"},
                          {"layer_norm_eps", 1e-12}, {"pad_token_id", 0}};
  };
  auto head = [](BertHead h) {
    return [h](ModelSpec spec) { return BuildBert(std::move(spec), h); };
  };
  return {
      {{"BertModel", "bert", "feature-extraction"}, example("BertModel"), scale,
       head(BertHead::kBase)},
      {{"BertForSequenceClassification", "bert", "text-classification"},
       example("BertForSequenceClassification"), scale, head(BertHead::kSequenceClassification)},
      {{"BertForMaskedLM", "bert", "fill-mask"}, example("BertForMaskedLM"), scale,
       head(BertHead::kMaskedLM)},
  };
}

}  // namespace ts::zoo::internal
