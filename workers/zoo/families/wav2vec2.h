// The wav2vec2 lineage (wav2vec2.cc; hubert.cc, unispeech.cc and unispeech_sat.cc derive from
// it): the registry entry of one class on the audio trunk and the base example config. Private to
// the zoo.
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/audio_heads.h"

namespace ts::zoo::internal {

using Wav2Vec2MakeFn = std::unique_ptr<Model> (*)(ModelSpec, Wav2Vec2Recipe);

// What a family of the lineage changes in wav2vec2's config reading and structure.
struct Wav2Vec2Family {
  std::string model_type = "wav2vec2";
  std::string base = "wav2vec2.";  // the heads' base-model prefix
  // The base model's extract_features output (Wav2Vec2BaseModelOutput; HubertModel returns
  // BaseModelOutput without it).
  bool extract_features_output = true;
  // HubertFeatureProjection: its layer norm only with feat_proj_layer_norm; conv_pos_batch_norm
  // true is refused.
  bool hubert_projection = false;
  std::string ctc_reduction = "sum";  // the config class's ctc_loss_reduction default
  // data2vec-audio: every feature conv layer-normed (no feat_extract_norm field), the stacked
  // positional convs (num_conv_pos_embeddings of conv_pos_kernel_size).
  bool stacked_pos_conv = false;
  // WavLM: the gated relative position bias (num_buckets, max_bucket_distance).
  bool wavlm = false;
  // masked_spec_embed in the state_dict whatever the masking probabilities (UniSpeechSatModel).
  bool always_masked_spec_embed = false;
  // SEW: squeeze_factor read, SEWModel's feature layer_norm / optional feature_projection and
  // SEWEncoder (trunks/audio.h Wav2Vec2Recipe::squeeze); do_stable_layer_norm not read.
  bool sew = false;
  // wav2vec2-conformer: conformer blocks (Wav2Vec2Recipe::conformer), position_embeddings_type,
  // rotary_embedding_base and conv_depthwise_kernel_size read; the unused positional conv and the
  // rotary inv_freq buffer are state_dict entries.
  bool conformer = false;
  // wav2vec2-bert (with `conformer`): input_features through Wav2Vec2BertFeatureProjection, no
  // conv feature encoder and no positional conv; relative_key positions (the default).
  bool bert = false;
  // SEW-D (with `sew`): DeBERTa-v2's encoder between the squeeze and the upsampling
  // (Wav2Vec2Recipe::sew_d); relative_attention, share_att_key, pos_att_type, norm_rel_ebd,
  // position_buckets, max_relative_positions and feature_layer_norm_eps read.
  bool sew_d = false;
};

// The entry of `arch` of `family` serving `task`, built by `make` from the config's
// Wav2Vec2Recipe.
ArchEntry Wav2Vec2Entry(const Wav2Vec2Family& family, const std::string& arch, const char* task,
                        Wav2Vec2MakeFn make, nlohmann::json example);
// The wav2vec2 family itself.
const Wav2Vec2Family& Wav2Vec2Lineage();

nlohmann::json Wav2Vec2Example();  // facebook/wav2vec2-base-960h
// `example` as an x-vector checkpoint writes it (anton-l/wav2vec2-base-superb-sv: the TDNN and
// x-vector sizes at the config class defaults, 1,251 VoxCeleb1 speakers).
nlohmann::json XVectorExample(nlohmann::json example);

}  // namespace ts::zoo::internal
