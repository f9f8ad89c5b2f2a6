// The heads over the encoder-decoder trunk (trunks/encoder_decoder.h), as the families
// (families/t5.cc, bart.cc, whisper.cc, ...) build them. Each head holds its weights, output
// names, loss and batch; the batches are drawn by Seq2SeqBatch (seq2seq_batch.cc) in the order
// the family's recipe names (EncDecRecipe::Batch).
#pragma once

#include <memory>

#include "workers/zoo/model.h"
#include "workers/zoo/trunks/encoder_decoder.h"

namespace ts::zoo::internal {

enum class Seq2SeqHead {
  kConditionalGeneration,   // logits over the vocab from the decoder (seq2seq_lm.cc)
  kCausalLM,                // the decoder stack alone, causal LM (seq2seq_lm.cc)
  kModel,                   // decoder and encoder states (encoder_decoder_base.cc)
  kEncoderModel,            // encoder states (encoder_decoder_base.cc)
  kTokenClassification,     // classifier over the encoder (seq2seq_classification.cc)
  kSequenceClassification,  // decoder state at the last eos (seq2seq_classification.cc)
  kQuestionAnswering,       // start / end logits from the decoder (seq2seq_classification.cc)
  kAudioClassification,     // encoder, projector, mean, classifier (audio_classification.cc)
};

// seq2seq_lm.cc
std::unique_ptr<Model> MakeSeq2SeqLm(ModelSpec spec, EncDecRecipe recipe);
std::unique_ptr<Model> MakeDecoderCausalLm(ModelSpec spec, EncDecRecipe recipe);
// encoder_decoder_base.cc: kModel or kEncoderModel.
std::unique_ptr<Model> MakeSeq2SeqBase(ModelSpec spec, EncDecRecipe recipe, Seq2SeqHead head);
// seq2seq_classification.cc: kTokenClassification, kSequenceClassification or
// kQuestionAnswering.
std::unique_ptr<Model> MakeSeq2SeqClassification(ModelSpec spec, EncDecRecipe recipe,
                                                 Seq2SeqHead head);
// audio_classification.cc
std::unique_ptr<Model> MakeWhisperAudioClassification(ModelSpec spec, EncDecRecipe recipe);

// Decoder tokens of a Whisper batch (its tiny max_target_positions is twice this).
inline constexpr int64_t kWhisperDecoderLen = 16;

// The batch of `head` for the recipe's batch kind (seq2seq_batch.cc): encoder inputs
// (input_ids + attention_mask, or input_features), decoder_input_ids and labels as each family
// draws them (seq_len: the encoder's token length).
Batch Seq2SeqBatch(const EncDecRecipe& r, Seq2SeqHead head, uint64_t seed, int64_t batch_size,
                   int64_t seq_len);

}  // namespace ts::zoo::internal
