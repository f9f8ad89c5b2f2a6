// Batches of the encoder-decoder heads (encoder_decoder_heads.h): each family's draws, in its
// order, so that a seed gives the batch it always gave.
#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/encoder_decoder_heads.h"

namespace ts::zoo::internal {
namespace {

const auto kLong = at::TensorOptions().dtype(at::kLong);
const auto kFloat = at::TensorOptions().dtype(at::kFloat);

// Shift right: [start, labels[:, :-1]] with -100 replaced by pad (HF _shift_right).
at::Tensor ShiftRight(const at::Tensor& labels, int64_t start, int64_t pad) {
  at::Tensor first = at::full({labels.size(0), 1}, start, labels.options());
  at::Tensor out = at::cat({first, labels.narrow(1, 0, labels.size(1) - 1)}, 1);
  return out.masked_fill(out.eq(-100), pad);
}

at::Tensor BartTokens(const EncDecRecipe& r, at::Generator& gen, int64_t rows, int64_t len);
at::Tensor WithEos(const EncDecRecipe& r, at::Tensor v, const at::Tensor& mask);
void ClassificationLabels(const EncDecRecipe& r, Seq2SeqHead head, at::Generator& gen,
                          int64_t batch_size, int64_t s, Batch& batch);

// T5: uniform tokens; labels padded with -100; decoder_input_ids = labels shifted right.
// T5ForSequenceClassification / ForQuestionAnswering: decoder_input_ids = _shift_right(input_ids)
// (HF's default without decoder inputs); the classifier pools the decoder state at the last eos
// of input_ids, so each row ends with eos and holds no other.
Batch T5Batch(const EncDecRecipe& r, Seq2SeqHead head, at::Generator& gen, int64_t batch_size,
              int64_t s) {
  const int64_t t = std::max<int64_t>(2, s / 2);
  if (head == Seq2SeqHead::kSequenceClassification || head == Seq2SeqHead::kQuestionAnswering) {
    at::Tensor mask = MakeAttentionMask(batch_size, s);
    at::Tensor ids = WithEos(r, BartTokens(r, gen, batch_size, s), mask);
    Batch batch;
    batch.inputs["input_ids"] = ids;
    batch.inputs["attention_mask"] = mask;
    batch.inputs["decoder_input_ids"] = ShiftRight(ids, r.start, r.pad);
    ClassificationLabels(r, head, gen, batch_size, s, batch);
    return batch;
  }
  at::Tensor ids = at::randint(0, r.vocab, {batch_size, s}, gen, kLong);
  at::Tensor mask = MakeAttentionMask(batch_size, s);
  ids = ids.masked_fill(mask.eq(0), r.pad);
  Batch batch;
  batch.inputs["input_ids"] = ids;
  batch.inputs["attention_mask"] = mask;
  at::Tensor labels = at::randint(0, r.vocab, {batch_size, t}, gen, kLong);
  labels = labels.masked_fill(MakeAttentionMask(batch_size, t).eq(0), -100);
  if (head == Seq2SeqHead::kTokenClassification) {
    batch.labels["labels"] =
        at::randint(0, r.num_labels, {batch_size, s}, gen, kLong).masked_fill(mask.eq(0), -100);
    return batch;
  }
  if (head != Seq2SeqHead::kEncoderModel) {
    batch.inputs["decoder_input_ids"] = ShiftRight(labels, r.start, r.pad);
  }
  if (head == Seq2SeqHead::kConditionalGeneration) {
    batch.labels["labels"] = labels;
  } else {
    const int64_t len = head == Seq2SeqHead::kModel ? t : s;
    batch.labels["labels"] = at::randn({batch_size, len, r.d_model}, gen, kFloat);
  }
  return batch;
}

// bart: [start, x[:, :-1]]; mbart: the row's last non-pad token (language id / eos) wraps to the
// front (HF mbart shift_tokens_right).
at::Tensor BartShift(const EncDecRecipe& r, const at::Tensor& x) {
  at::Tensor first = at::full({x.size(0), 1}, r.start, x.options());
  if (r.batch == EncDecRecipe::Batch::kMbart) first = x.gather(1, (x.ne(r.pad).sum(-1, true) - 1));
  at::Tensor out = at::cat({first, x.narrow(1, 0, x.size(1) - 1)}, 1);
  return out.masked_fill(out.eq(-100), r.pad);
}

// Ordinary tokens avoid pad / eos / start; each row ends (before its padding) with eos.
at::Tensor BartTokens(const EncDecRecipe& r, at::Generator& gen, int64_t rows, int64_t len) {
  at::Tensor v = at::randint(0, r.vocab, {rows, len}, gen, kLong);
  at::Tensor special = v.eq(r.pad) | v.eq(r.eos) | v.eq(r.start);
  return v.masked_fill(special, (std::max({r.pad, r.eos, r.start}) + 1) % r.vocab);
}

at::Tensor WithEos(const EncDecRecipe& r, at::Tensor v, const at::Tensor& mask) {
  at::Tensor last = mask.sum(-1) - 1;
  v.scatter_(1, last.unsqueeze(1), r.eos);
  return v.masked_fill(mask.eq(0), r.pad);
}

// The classification and QA heads' labels: one class per row, or start / end positions.
void ClassificationLabels(const EncDecRecipe& r, Seq2SeqHead head, at::Generator& gen,
                          int64_t batch_size, int64_t s, Batch& batch) {
  if (head == Seq2SeqHead::kSequenceClassification) {
    batch.labels["labels"] = r.num_labels == 1
                                 ? at::randn({batch_size}, gen, kFloat)
                                 : at::randint(0, r.num_labels, {batch_size}, gen, kLong);
    return;
  }
  batch.labels["start_positions"] = at::randint(0, s / 2, {batch_size}, gen, kLong);
  batch.labels["end_positions"] = at::randint(s / 2, s - s / 4, {batch_size}, gen, kLong);
}

Batch BartBatch(const EncDecRecipe& r, Seq2SeqHead head, at::Generator& gen, int64_t batch_size,
                int64_t s) {
  const int64_t t = std::max<int64_t>(2, s / 2);
  at::Tensor mask = MakeAttentionMask(batch_size, s);
  at::Tensor ids = WithEos(r, BartTokens(r, gen, batch_size, s), mask);
  Batch batch;
  batch.inputs["input_ids"] = ids;
  batch.inputs["attention_mask"] = mask;
  if (head == Seq2SeqHead::kCausalLM) {
    batch.labels["labels"] = ids.masked_fill(mask.eq(0), -100);
    return batch;
  }
  if (head == Seq2SeqHead::kSequenceClassification || head == Seq2SeqHead::kQuestionAnswering) {
    // decoder_input_ids default to input_ids shifted right (HF).
    batch.inputs["decoder_input_ids"] = BartShift(r, batch.inputs.at("input_ids"));
    ClassificationLabels(r, head, gen, batch_size, s, batch);
    return batch;
  }
  at::Tensor dmask = MakeAttentionMask(batch_size, t);
  at::Tensor labels = WithEos(r, BartTokens(r, gen, batch_size, t), dmask);
  batch.inputs["decoder_input_ids"] = BartShift(r, labels);
  if (head == Seq2SeqHead::kConditionalGeneration) {
    batch.labels["labels"] = labels.masked_fill(dmask.eq(0), -100);
  } else {
    batch.labels["labels"] = at::randn({batch_size, t, r.d_model}, gen, kFloat);
  }
  return batch;
}

// Whisper: log-mel features for max_source * 2 frames (the stem halves them).
Batch WhisperBatch(const EncDecRecipe& r, Seq2SeqHead head, at::Generator& gen,
                   int64_t batch_size) {
  const int64_t s = std::min(kWhisperDecoderLen, r.decoder.positions);
  Batch batch;
  if (head == Seq2SeqHead::kCausalLM) {  // WhisperForCausalLM: decoder tokens only
    at::Tensor mask = MakeAttentionMask(batch_size, s);
    at::Tensor ids = at::randint(0, r.vocab, {batch_size, s}, gen, kLong);
    ids = ids.masked_fill(mask.eq(0), r.pad);
    batch.inputs["input_ids"] = ids;
    batch.inputs["attention_mask"] = mask;
    batch.labels["labels"] = ids.masked_fill(mask.eq(0), -100);
    return batch;
  }
  batch.inputs["input_features"] = at::randn({batch_size, r.mel, 2 * r.max_source}, gen, kFloat);
  if (head == Seq2SeqHead::kAudioClassification) {
    batch.labels["labels"] = r.num_labels == 1
                                 ? at::randn({batch_size}, gen, kFloat)
                                 : at::randint(0, r.num_labels, {batch_size}, gen, kLong);
    return batch;
  }
  at::Tensor labels = at::randint(0, r.vocab, {batch_size, s}, gen, kLong);
  // decoder_input_ids = labels shifted right behind decoder_start_token_id (HF).
  at::Tensor dec =
      at::cat({at::full({batch_size, 1}, r.start, kLong), labels.narrow(1, 0, s - 1)}, 1);
  batch.inputs["decoder_input_ids"] = dec;
  batch.labels["labels"] = labels;
  if (head == Seq2SeqHead::kModel) {
    batch.labels["target"] = at::randn({batch_size, s, r.d_model}, gen, kFloat);
  }
  return batch;
}

}  // namespace

Batch Seq2SeqBatch(const EncDecRecipe& r, Seq2SeqHead head, uint64_t seed, int64_t batch_size,
                   int64_t seq_len) {
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  switch (r.batch) {
    case EncDecRecipe::Batch::kT5:
      return T5Batch(r, head, gen, batch_size, seq_len);
    case EncDecRecipe::Batch::kWhisper:
      return WhisperBatch(r, head, gen, batch_size);
    default:
      return BartBatch(r, head, gen, batch_size, seq_len);
  }
}

}  // namespace ts::zoo::internal
