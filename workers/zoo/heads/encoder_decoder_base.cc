// Base heads over the encoder-decoder trunk (encoder_decoder_heads.h), which transformers gives
// no loss:
//   T5Model, MT5Model, BartModel, MBartModel, WhisperModel: outputs last_hidden_state (decoder),
//     encoder_last_hidden_state; loss the MSE of the decoder states onto a random target
//     (`labels`; Whisper's batch names it `target`).
//   T5EncoderModel, MT5EncoderModel: the encoder alone; last_hidden_state, MSE onto `labels`.
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/encoder_decoder_heads.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

class Seq2SeqBase : public EncoderDecoderModel {
 public:
  Seq2SeqBase(ModelSpec spec, EncDecRecipe recipe, Seq2SeqHead head)
      : EncoderDecoderModel(std::move(spec), std::move(recipe),
                            head == Seq2SeqHead::kEncoderModel ? Stacks::kEncoder : Stacks::kBoth),
        head_(head) {}

  std::vector<std::string> OutputNames() const override {
    if (head_ == Seq2SeqHead::kEncoderModel) return {"last_hidden_state"};
    return {"last_hidden_state", "encoder_last_hidden_state"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor enc_blocked;
    at::Tensor enc = Encode(w, inputs, &enc_blocked);
    if (head_ == Seq2SeqHead::kEncoderModel) return {enc};
    return {Decode(w, inputs, enc, enc_blocked), enc};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    at::Tensor out = Forward(w, batch.inputs)[0];
    const char* target = r_.batch == EncDecRecipe::Batch::kWhisper ? "target" : "labels";
    return at::mse_loss(out, GetInput(batch.labels, target).to(out.scalar_type()));
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    return Seq2SeqBatch(r_, head_, seed, batch_size, seq_len());
  }

 private:
  Seq2SeqHead head_;
};

}  // namespace

std::unique_ptr<Model> MakeSeq2SeqBase(ModelSpec spec, EncDecRecipe recipe, Seq2SeqHead head) {
  return std::make_unique<Seq2SeqBase>(std::move(spec), std::move(recipe), head);
}

}  // namespace ts::zoo::internal
