// fnet (modeling_fnet.py): BERT's embeddings (token types 4, pad 3) then embeddings.projection
// (H -> H, after the LayerNorm); each layer mixes tokens with no weights, the real part of
// torch.fft.fftn over (sequence, hidden), then fourier.output.LayerNorm(x + mix) and BERT's
// post-LN FFN (intermediate.dense, output.dense, output.LayerNorm). No attention, no heads field,
// no attention_mask: FNetModel.forward takes none and its tokenizer returns input_ids and
// token_type_ids only, so batches carry no padding. Every class holds the tanh pooler
// (fnet.pooler.dense); the heads are BERT's (cls.predictions with the tied decoder,
// cls.seq_relationship; classifier on the pooled output; token classifier; qa_outputs).
// use_tpu_fourier_optimizations computes the same DFT as matmuls with complex buffers
// (dft_mat_hidden / dft_mat_seq, and tpu_short_seq_length must equal the run's length): the tiny
// config turns it off, as its outputs are the FFT's.
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

json FnetExample() {  // google/fnet-base
  return json{{"model_type", "fnet"},
              {"bos_token_id", 1},
              {"eos_token_id", 2},
              {"hidden_act", "gelu_new"},
              {"hidden_dropout_prob", 0.1},
              {"hidden_size", 768},
              {"initializer_range", 0.02},
              {"intermediate_size", 3072},
              {"layer_norm_eps", 1e-12},
              {"max_position_embeddings", 512},
              {"num_hidden_layers", 12},
              {"pad_token_id", 3},
              {"tpu_short_seq_length", 512},
              {"type_vocab_size", 4},
              {"use_tpu_fourier_optimizations", true},
              {"vocab_size", 32000}};
}

}  // namespace

EncoderFamily Fnet() {
  return {
      .model_type = "fnet",
      .fields = {.heads = ""},
      .defaults = {.type_vocab = 4, .act = "gelu_new", .pad = 3},
      .structure = {.no_mask = true,
                    .layout = Layout::kFnet,
                    .projection = Projection::kFnet,
                    .base = "fnet."},
      .names = BertHeadNames(),
      .parse = [](const ConfigReader& r, const json&, Recipe&) -> Status {
        // Both paths compute fftn(x, dim=(1, 2)).real; the flag is read for its type only.
        TS_ASSIGN_OR_RETURN(bool tpu, r.Bool("use_tpu_fourier_optimizations", false));
        (void)tpu;
        return OkStatus();
      },
      .scale_extra = [](const Recipe&, json& tiny) {
        tiny["use_tpu_fourier_optimizations"] = false;
      },
      .classes = AllHeads("FNet", /*causal=*/false, /*nsp=*/true, /*qa=*/true,
                          /*pretraining=*/true),
      .example = FnetExample(),
  };
}

TS_ZOO_ENCODER_FAMILY(Fnet);

}  // namespace ts::zoo::internal::encoder
