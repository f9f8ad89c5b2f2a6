// Classification heads over the encoder-decoder trunk (encoder_decoder_heads.h):
//   T5/MT5ForTokenClassification: a T5EncoderModel (`transformer.`) and `classifier` per token;
//     cross entropy over the labels (ignore -100).
//   Bart/MBartForSequenceClassification: the decoder state at the last eos of input_ids, then
//     classification_head dense, tanh, out_proj; cross entropy (MSE when num_labels == 1).
//   Bart/MBartForQuestionAnswering: `qa_outputs` per decoder token -> start_logits, end_logits;
//     the mean of the two cross entropies.
// They could later share the decoder heads' sequence classification and QA code.
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/encoder_decoder_heads.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal {
namespace {

at::Tensor HeadLinear(const WeightMap& w, const std::string& p, const at::Tensor& x) {
  return nn::Linear(x, GetWeight(w, p + ".weight"), GetWeight(w, p + ".bias"));
}

class Seq2SeqClassification : public EncoderDecoderModel {
 public:
  Seq2SeqClassification(ModelSpec spec, EncDecRecipe recipe, Seq2SeqHead head)
      : EncoderDecoderModel(
            std::move(spec), std::move(recipe),
            head == Seq2SeqHead::kTokenClassification ? Stacks::kEncoder : Stacks::kBoth),
        head_(head) {
    const int64_t d = r_.d_model;
    switch (head_) {
      case Seq2SeqHead::kTokenClassification:
        AddLinear("classifier", r_.num_labels, d);
        break;
      case Seq2SeqHead::kSequenceClassification:
        AddLinear("classification_head.dense", d, d);
        AddLinear("classification_head.out_proj", r_.num_labels, d);
        break;
      default:
        AddLinear("qa_outputs", 2, d);
        break;
    }
  }

  std::vector<std::string> OutputNames() const override {
    if (head_ == Seq2SeqHead::kQuestionAnswering) return {"start_logits", "end_logits"};
    return {"logits"};
  }

  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override {
    at::Tensor enc_blocked;
    at::Tensor enc = Encode(w, inputs, &enc_blocked);
    if (head_ == Seq2SeqHead::kTokenClassification) return {HeadLinear(w, "classifier", enc)};
    at::Tensor y = Decode(w, inputs, enc, enc_blocked);
    if (head_ == Seq2SeqHead::kQuestionAnswering) {
      at::Tensor logits = HeadLinear(w, "qa_outputs", y);
      return {logits.select(-1, 0), logits.select(-1, 1)};
    }
    // HF pools the decoder state at the last eos token of input_ids.
    const at::Tensor& ids = GetInput(inputs, "input_ids");
    const int64_t b = ids.size(0), s = ids.size(1);
    at::Tensor idx = at::arange(s, at::TensorOptions().dtype(at::kLong).device(ids.device()));
    at::Tensor last = (idx * ids.eq(r_.eos).to(at::kLong)).argmax(-1);
    at::Tensor pooled = y.gather(1, last.view({b, 1, 1}).expand({b, 1, r_.d_model})).squeeze(1);
    at::Tensor hdn = at::tanh(HeadLinear(w, "classification_head.dense", pooled));
    return {HeadLinear(w, "classification_head.out_proj", hdn)};
  }

  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override {
    std::vector<at::Tensor> out = Forward(w, batch.inputs);
    if (head_ == Seq2SeqHead::kQuestionAnswering) {
      return (CrossEntropy(out[0], GetInput(batch.labels, "start_positions")) +
              CrossEntropy(out[1], GetInput(batch.labels, "end_positions"))) /
             2;
    }
    const at::Tensor& labels = GetInput(batch.labels, "labels");
    if (head_ == Seq2SeqHead::kTokenClassification) {
      return CrossEntropy(out[0].reshape({-1, r_.num_labels}), labels.reshape({-1}));
    }
    if (r_.num_labels == 1) {
      return at::mse_loss(out[0].squeeze(-1), labels.to(out[0].scalar_type()));
    }
    return CrossEntropy(out[0], labels);
  }

  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override {
    if (batch_size <= 0) batch_size = RunBatchSize(spec().tiny_config);
    return Seq2SeqBatch(r_, head_, seed, batch_size, seq_len());
  }

 private:
  Seq2SeqHead head_;
};

}  // namespace

std::unique_ptr<Model> MakeSeq2SeqClassification(ModelSpec spec, EncDecRecipe recipe,
                                                 Seq2SeqHead head) {
  return std::make_unique<Seq2SeqClassification>(std::move(spec), std::move(recipe), head);
}

}  // namespace ts::zoo::internal
