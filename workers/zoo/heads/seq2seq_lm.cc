// Language-model heads over the encoder-decoder trunk (encoder_decoder_heads.h).
//   *ForConditionalGeneration (t5, mt5, bart, mbart, whisper): logits over the vocab from the
//     decoder; tied to the decoder's token table (T5 scales the decoder output by
//     d_model**-0.5 first) or an own `lm_head.weight`; BART adds `final_logits_bias`. Outputs
//     logits, encoder_last_hidden_state; loss cross entropy (ignore -100).
//   Bart/MBartForCausalLM: the decoder stack alone (BartDecoderWrapper, its own embed_tokens; its
//     layers' encoder_attn is never called without encoder states and is not built), causal and
//     padding-masked; loss the shifted cross entropy.
//   WhisperForCausalLM: the same over WhisperDecoder (`model.decoder`, proj_out tied to its
//     embed_tokens); its loss is CrossEntropyLoss over every position, unshifted.
#include <cmath>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/encoder_decoder_heads.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

class Seq2SeqLm : public EncoderDecoderModel {
 public:
  Seq2SeqLm(ModelSpec spec, EncDecRecipe recipe)
      : EncoderDecoderModel(std::move(spec), std::move(recipe), Stacks::kBoth) {
    if (r_.final_logits_bias) Add("final_logits_bias", {1, r_.vocab});
    if (!r_.tie) Add("lm_head.weight", {r_.vocab, r_.d_model});
  }

  std::vector<std::string> OutputNames() const override {
    return {"logits", "encoder_last_hidden_state"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor enc_blocked;
    at::Tensor enc = Encode(w, inputs, &enc_blocked);
    at::Tensor y = Decode(w, inputs, enc, enc_blocked);
    if (r_.tie && r_.lm_scale_tied) {
      return {nn::Linear(y * std::pow(static_cast<double>(r_.d_model), -0.5), DecoderTable(w)),
              enc};
    }
    at::Tensor logits = nn::Linear(y, r_.tie ? DecoderTable(w) : GetWeight(w, "lm_head.weight"));
    if (r_.final_logits_bias) logits = logits + GetWeight(w, "final_logits_bias");
    return {logits, enc};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    return CrossEntropy(out[0].reshape({-1, r_.vocab}),
                        GetInput(batch.labels, "labels").reshape({-1}));
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    return Seq2SeqBatch(r_, Seq2SeqHead::kConditionalGeneration, seed, batch_size, seq_len());
  }
};

class DecoderCausalLm : public EncoderDecoderModel {
 public:
  DecoderCausalLm(ModelSpec spec, EncDecRecipe recipe)
      : EncoderDecoderModel(std::move(spec), std::move(recipe), Stacks::kDecoder) {
    if (!r_.tie) Add("lm_head.weight", {r_.vocab, r_.d_model});
  }

  std::vector<std::string> OutputNames() const override { return {"logits"}; }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    const at::Tensor& ids = GetInput(inputs, "input_ids");
    at::Tensor mask = GetOptionalInput(inputs, "attention_mask");
    const at::Tensor& embed = DecoderTable(w);
    at::Tensor blocked;
    at::Tensor y = RunStack(w, r_.decoder, embed, ids, mask, at::Tensor(), at::Tensor(), &blocked);
    return {nn::Linear(y, r_.tie ? embed : GetWeight(w, "lm_head.weight"))};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (!r_.causal_loss_shifted) {
      return CrossEntropy(out[0].reshape({-1, r_.vocab}), labels.reshape({-1}));
    }
    const int64_t s = out[0].size(1);
    return CrossEntropy(out[0].narrow(1, 0, s - 1).reshape({-1, r_.vocab}),
                        labels.narrow(1, 1, s - 1).reshape({-1}));
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    return Seq2SeqBatch(r_, Seq2SeqHead::kCausalLM, seed, batch_size, seq_len());
  }
};

}  // namespace

std::unique_ptr<Model> MakeSeq2SeqLm(ModelSpec spec, EncDecRecipe recipe) {
  return std::make_unique<Seq2SeqLm>(std::move(spec), std::move(recipe));
}

std::unique_ptr<Model> MakeDecoderCausalLm(ModelSpec spec, EncDecRecipe recipe) {
  return std::make_unique<DecoderCausalLm>(std::move(spec), std::move(recipe));
}

}  // namespace ts::zoo::internal
