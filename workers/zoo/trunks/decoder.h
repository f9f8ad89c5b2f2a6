// The decoder trunk (README.md "Decoder trunk"): one decoder-only transformer driven by a
// Recipe. A family (families/<model_type>.cc) parses its HF config.json into a Recipe: sizes,
// norm / position / attention / MLP / block kinds, per-layer windows and rotary use, and the HF
// state_dict names; the trunk builds the weights and runs the layers, and a text head
// (heads/text_head.h) turns the final hidden states into the task's outputs. Private to the zoo.
//
// Thread-safety: a built model is immutable; Forward/Loss may run concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/heads/text_head.h"
#include "workers/zoo/model.h"

namespace ts::zoo::internal::decoder {

// kRmsNoWeight: x * rsqrt(mean(x^2) + eps) without a weight (Llama4TextL2Norm; nanochat).
enum class Norm {
  kRms,
  kGemmaRms,
  kLayerNorm,
  kLayerNormNoBias,
  kLayerNorm1P,
  kNonParam,
  kRmsNoWeight
};
// kPerHeadRmsNoWeight: per head, Norm::kRmsNoWeight (nanochat, after the rotary).
enum class QkNorm {
  kNone,
  kPerHeadRms,
  kPerHeadGemma,
  kPerHeadLayerNorm,
  kFullRms,
  kPerHeadRmsNoWeight
};
enum class Pos { kNone, kRotary, kLearned, kSinusoidal };
enum class Alibi { kNone, kBloom, kMpt, kFalcon };
enum class Qkv {
  kSeparate,
  kFused,        // [q | k | v] along the output (GPT-2 c_attn, Phi-3, MPT)
  kPerHead,      // view(B, S, heads, 3, hd)
  kGrouped,      // Falcon: view(B, S, kv, heads / kv + 2, hd)
  kCodeGen,      // mp_num = 4 blocks of [q | v | k]
  kPerHeadNarrow,  // view(B, S, heads, 3 * hd), narrowed (GPT-NeoX, GPTBigCode without MQA)
};
enum class Mlp { kGated, kFusedGateUp, kPlain };
// kPost: x + norm(f(x)) (olmo2); kPostLn: norm(x + f(x)) (OpenAI GPT's ln_1 / ln_2).
enum class Block { kPre, kParallel1, kParallel2, kPost, kSandwich, kPostLn };

// How a MoE layer routes (decoder_moe.cc).
enum class Router {
  kSoftmax,     // softmax, top-k, optional renormalisation (mixtral, qwen MoE, olmoe)
  kDeepseekV2,  // softmax (fp32), top-k (greedy or group-limited by group max), * scaling
  kDeepseekV3,  // sigmoid; + e_score_correction_bias for the choice (groups by their top-2
                // sum); weights the unbiased scores, renormalised (+1e-20), * scaling
  kErnie,       // softmax; + the correction bias for the choice; weights the unbiased
                // probabilities over max(their sum, norm_min) (Ernie4_5_MoeTopKRouter)
  kTopKSoftmax,  // top-k of the logits, softmax over those k (GptOssTopKRouter)
};

// Sparse MoE MLP on the layers marked in `sparse` (mixtral, qwen2_moe).
struct Moe {
  int64_t experts = 0, top_k = 0, inter = 0;  // experts 0: every layer dense
  int64_t shared_inter = 0;                   // > 0: a gated shared expert (qwen2_moe)
  bool norm_topk = false;
  bool mixtral = false;  // block_sparse_moe.experts.E.{w1, w2, w3}; else mlp.experts.E.*_proj
  std::vector<bool> sparse;  // per layer
  bool pattern = false;      // the real config mixes dense and sparse layers (tiny: two layers)
  Router router = Router::kSoftmax;
  int64_t n_group = 1, topk_group = 1;  // deepseek: expert groups, groups kept
  bool group_limited = false;           // deepseek_v2 topk_method "group_limited_greedy"
  double routed_scaling = 1.0;          // deepseek routed_scaling_factor
  // deepseek_v3's correction bias under the MoE block (minimax_m2: "e_score_correction_bias").
  std::string score_bias_name = "gate.e_score_correction_bias";
  bool score_bias_row = false;  // shaped [1, E] (ernie4_5_moe's moe_statics), else [E]
  double norm_min = 1e-12;      // kErnie's renormalisation floor (moe_norm_min)
  // deepseek: `mlp.shared_experts` (ungated, shared_inter wide); else qwen2_moe's gated
  // `mlp.shared_expert` + `shared_expert_gate`.
  bool deepseek_shared = false;
  // The deepseek-style shared MLP's module under the MoE block (hunyuan_v1_moe: "shared_mlp").
  std::string shared_name = "shared_experts";
  // granitemoeshared: `shared_mlp.input_linear` (gate | up fused, shared_inter wide) and
  // `shared_mlp.output_linear` under the layer, ungated, added to the routed output.
  bool granite_shared = false;
  // The names under the MoE block: transformers 5's router `gate.weight` and fused experts
  // `experts.gate_up_proj` [E, 2I, H] / `experts.down_proj` [E, H, I] (granitemoe's
  // GraniteMoeParallelExperts: `input_linear.weight` / `output_linear.weight`, its router
  // `router.layer.weight`).
  std::string router_name = "gate.weight", gate_up_name = "experts.gate_up_proj",
              down_name = "experts.down_proj";
  // gpt_oss: the router's bias (`router.bias` beside `router.weight`) and GptOssExperts: fused
  // `gate_up_proj` [E, H, 2I] with gate / up interleaved (even / odd columns) and
  // `gate_up_proj_bias` [E, 2I], `down_proj` [E, I, H] and `down_proj_bias` [E, H]; the
  // activation (up + 1) * gate * sigmoid(1.702 gate) with gate <= limit, |up| <= limit.
  bool router_bias = false;
  bool gpt_oss_experts = false;
  double swiglu_limit = 7.0;
};

// DeepSeek-V2 / V3 multi-head latent attention (active when kv_lora > 0; decoder_mla.cc):
// q = q_b(RMSNorm(q_a(x))) (or q_proj(x) when q_lora is 0), per head [nope | rope];
// kv_a_proj_with_mqa(x) = [latent (kv_lora) | k_rope (rope)]; kv_b(RMSNorm(latent)) per head
// [k_nope | v]; the rotary on q_rope and the one shared k_rope; scores over [nope | rope].
struct Mla {
  int64_t q_lora = 0, kv_lora = 0, nope = 0, rope = 0, v = 0;
  double ln_eps = 1e-6;  // q_a_layernorm / kv_a_layernorm
};

// Phi-3 longrope: per-frequency factors, short within the original context, long past it.
// transformers 5 (modeling_rope_utils.py _compute_longrope_parameters): `factor` is the dict's,
// else max_position_embeddings / original; `attention_factor` the dict's, else
// sqrt(1 + ln(factor) / ln(original)) when factor > 1, else 1.
struct LongRope {
  bool on = false;
  std::vector<double> short_factor, long_factor;
  int64_t original = 4096;
  std::optional<double> factor;            // rope_scaling.factor
  std::optional<double> attention_factor;  // rope_scaling.attention_factor
  // The cos/sin scale for a model whose max_position_embeddings is `max_pos`.
  double AttentionFactor(int64_t max_pos) const;
};

struct Act {
  Activation a = Activation::kSilu;
  bool relu2 = false;  // squared ReLU (HF "relu2")
  // xIELU (HF "xielu", XIELUActivation; apertus), on plain MLPs only: the learnable `alpha_p`,
  // `alpha_n` [1] under the MLP's `act_fn`; where(x > 0, softplus(alpha_p) x^2 + beta x,
  // (expm1(min(x, eps)) - x) (beta + softplus(alpha_n)) + beta x) with the constant buffers
  // beta 0.5 and eps -1e-6 (state_dict.cc writes them).
  bool xielu = false;
};

// HF state_dict names below the base prefix ("model." under a head, "" for the base model).
struct Names {
  std::string head_base = "model.", model_base = "";
  std::string embed = "embed_tokens", pos = "", emb_ln = "";
  std::string layers = "layers.";
  std::string ln1 = "input_layernorm", ln2 = "post_attention_layernorm";
  std::string post1 = "", post2 = "";  // sandwich / post norms
  std::string attn = "self_attn.";
  std::string q = "q_proj", k = "k_proj", v = "v_proj", qkv = "", o = "o_proj";
  std::string qn = "q_norm", kn = "k_norm";
  std::string mlp = "mlp.";
  std::string gate = "gate_proj", up = "up_proj", down = "down_proj";
  std::string final_norm = "norm";
  // BitNet's sub-norms ("" = none): an RMSNorm of the attention output before o_proj
  // (`attn_sub_norm`, under the attention) and of act(gate) * up before down_proj
  // (`ffn_sub_norm`, under the MLP).
  std::string attn_sub = "", ffn_sub = "";
  // Recipe::attn_out_gate's projection under the attention (AfmoeAttention `gate_proj`).
  std::string attn_gate = "gate_proj";
  std::string lm_head = "lm_head", seq_cls = "score", token_cls = "score";
};

struct Recipe {
  int64_t vocab = 0, hidden = 0, inter = 0, layers = 0, heads = 0, kv = 0, head_dim = 0;
  int64_t max_pos = 2048;
  Act act;
  double eps = 1e-5, init_range = 0.02;
  bool tie = false;
  std::optional<int64_t> pad;
  bool embed_padding_idx = true;  // nn.Embedding(padding_idx=pad): row zeroed at init
  Norm norm = Norm::kRms;
  QkNorm qk_norm = QkNorm::kNone;
  // The per-head q/k norm after the rotary, not before (HunYuanDenseV1Attention).
  bool qk_norm_after_rope = false;
  Pos pos = Pos::kRotary;
  RopeConfig rope, rope_local;  // rope_local: sliding layers (gemma3)
  bool interleaved = false;     // rotate_every_two (GPT-J, Cohere, GLM) vs rotate_half
  // NanoChat's rotate_half (x2, -x1), the negation of llama's (-x2, x1): the rotation by -theta.
  bool rotate_half_negated = false;
  // NanoChatModel: the final norm (weight-free) also applied to the embeddings before the layers.
  bool embed_norm = false;
  int64_t rotary_dim = 0;
  int64_t pos_offset = 0;      // learned / sinusoidal table offset (OPT, BioGPT, XGLM: 2)
  // Pos::kSinusoidal in CTRL's positional_encoding layout: angle pos / 10000^(2 (i // 2) / d),
  // the sines of the even dims then the cosines of the odd ones (else fairseq's, XGLM).
  bool sinusoid_halves = false;
  bool pos_from_mask = false;  // positions = cumsum(mask) * mask - 1
  Alibi alibi = Alibi::kNone;
  double alibi_bias_max = 8.0;
  double attn_scale = 0.0;  // 0: 1/sqrt(head_dim)
  // ministral3 (Ministral3Attention): q *= 1 + beta * log(1 + floor(pos / orig)) after the
  // rotary, positions arange(S); beta 0: none.
  double q_pos_scale_beta = 0.0;
  int64_t q_pos_scale_orig = 1;
  // GPT-2 scale_attn_by_inverse_layer_idx: layer i's scores also divided by i + 1 (classic
  // attention).
  bool attn_scale_by_layer = false;
  // DiffLlama's differential attention (DiffLlamaAttention): per layer the parameters
  // self_attn.lambda_{q1,k1,q2,k2} [head_dim]; the scores' softmax applied to the values of head
  // pairs concatenated ([B, H/2, S, 2hd], repeated to H heads), the two halves of the heads
  // combined as a1 - lambda * a2 with lambda = exp(q1 . k1) - exp(q2 . k2) + lambda_init(layer),
  // a weight-free RMSNorm over 2hd scaled by 1 - lambda_init; lambda_init(i) =
  // 0.8 - 0.6 exp(-0.3 i).
  bool diff_attn = false;
  // GPT-OSS attention sinks: per layer `self_attn.sinks` [heads], one extra logit per head and
  // query that takes part in the softmax (after the max is subtracted) and is then dropped.
  bool attn_sinks = false;
  // AFMoE's gated attention output: the heads' output times sigmoid(`<attn>attn_gate`(x))
  // [heads * head_dim, hidden] (no bias), x the attention's input, before o_proj.
  bool attn_out_gate = false;
  double clip_qkv = 0.0;
  bool q_bias = false, k_bias = false, v_bias = false, o_bias = false, mlp_bias = false;
  // GPTNeoXJapaneseAttention: the last layer's attention output gets the bias parameter
  // `<attn>dense_bias` [hidden] (use_bias = layer_number == num_hidden_layers - 1).
  bool o_bias_last_layer = false;
  // LFM2's short-convolution layers (Lfm2ShortConv; decoder_conv.cc) where conv_layers[i], in
  // place of the attention: `conv.in_proj` (hidden -> 3 hidden) into B, C, x, y = C * the causal
  // depthwise `conv.conv` (kernel conv_kernel) of B * x, `conv.out_proj`; biases with conv_bias.
  std::vector<bool> conv_layers;  // empty: every layer attends
  int64_t conv_kernel = 3;
  bool conv_bias = false;
  bool lm_head_bias = false, seq_cls_bias = false, token_cls_bias = true;
  Qkv qkv = Qkv::kSeparate;
  Mlp mlp = Mlp::kGated;
  Block block = Block::kPre;
  double embed_scale = 1.0, residual_mult = 1.0, logit_mult = 1.0;
  std::vector<std::optional<int64_t>> window;  // per layer
  std::vector<bool> rope_on, rope_local_on;    // per layer
  int64_t num_labels = 2;
  Names n;
  // A vision-language model's language model (trunks/vision_language.h): the token id whose
  // embeddings the input "image_embeds" [tokens, hidden] replace in order (transformers'
  // inputs_embeds.masked_scatter over input_ids == image_token_id).
  std::optional<int64_t> image_token;

  // ---- The llama-style lineage (llama, mistral, qwen2 and the families first written beside
  // them; README.md "Op-order options"). Each keeps an op order or convention those families
  // had, so that their traces, weights and numerics stay bit-identical.
  // `classic`: q, k, v reshaped and transposed in turn, q/k norms after the transpose, k and v
  // repeated before the scores (nn::Attention's order), partial rotary narrowed before rotating;
  // the positions' arange before the embedding scale; residual branches added unscaled; norm
  // weights initialised by name (Model::InitWeight); the batch not clamped to max_pos.
  bool classic = false;
  bool view_heads = false;  // classic, separate q/k/v: Linear(x).view().transpose() in turn
  bool conv1d = false;      // GPT-2 Conv1D: weights [in, out] (fan_in = rows), x @ W + b
  bool sandwich_post_first = false;  // weight order post1, ln2, post2 (gemma2)
  double attn_softcap = 0.0, final_softcap = 0.0;  // cap * tanh(x / cap) (gemma2)
  LongRope longrope;
  Moe moe;
  Mla mla;
  // Tiny-scaling metadata of the classic families' partial rotary.
  double partial_rotary = 1.0;  // fraction of head_dim rotated
  std::string partial_field;    // the config field carrying it ("" none)
  bool partial_is_dim = false;  // the field is an absolute rotary_dim (phi-msft)
  std::optional<int64_t> window_size;  // the configured window, when active on some layer
};

// The model for `head` over the recipe (spec.tiny_config is the config that was parsed).
StatusOr<std::unique_ptr<Model>> BuildDecoderModel(ModelSpec spec, Recipe recipe,
                                                   TextHeadKind head);

}  // namespace ts::zoo::internal::decoder
