// The Mamba lineage (families/mamba.cc): MambaModel / MambaForCausalLM and, with the weight-free
// RMS norms on the selective scan's dt, B and C, FalconMamba's; and the language-model skeleton
// that Mamba2 (families/mamba2.cc) shares with them, as modeling_mamba2.py copies it from
// modeling_mamba.py. Private to the zoo.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "workers/zoo/config.h"
#include "workers/zoo/families_internal.h"
#include "workers/zoo/heads/text_head.h"

namespace ts::zoo::internal::mamba {

// `<prefix>ForCausalLM` and `<prefix>Model` of family `model_type` from `example` (a real-shaped
// config.json); `falcon`: FalconMambaMixer's rms_forward on time_step, B and C (mixer_rms_eps).
std::vector<ArchEntry> MambaArchs(const std::string& model_type, const std::string& prefix,
                                  bool falcon, const nlohmann::json& example);

// ---- The skeleton MambaModel and Mamba2Model share.

// The config fields both read (MambaConfig's and Mamba2Config's names).
struct SsmLmConfig {
  int64_t vocab = 0, hidden = 0, layers = 0, state = 0, kernel = 4;
  double eps = 1e-5;  // layer_norm_epsilon
  bool use_bias = false, conv_bias = true, tie = true;
  Activation act = Activation::kSilu;
  std::optional<int64_t> pad;
  // The time step's initialisation: dt = exp(U(log time_step_min, log time_step_max)) clamped to
  // time_step_floor.
  double dt_min = 0.001, dt_max = 0.1, dt_floor = 1e-4;
};

// Reads them, refusing a bad value naming its field; the fields whose defaults differ between
// the config classes default to `defaults`.
struct SsmLmDefaults {
  int64_t vocab = 0, hidden = 0, layers = 0, state = 0;
};
StatusOr<SsmLmConfig> ReadSsmLmConfig(const ConfigReader& r, const SsmLmDefaults& defaults);

// The tiny scaling both share, into `t`: hidden 64, at most 16 state channels, one layer (every
// layer is alike), vocab 512 with the token ids mapped into it.
void ScaleSsmLm(const SsmLmConfig& c, nlohmann::json& t);

// MambaModel / Mamba2Model (`embeddings`, `layers.N`, `norm_f`) and their ForCausalLM
// (`backbone.` + `lm_head`, tied to the embeddings unless tie_word_embeddings is false): per layer
// x + mixer(norm(x)) with the RMS norm `norm`, then norm_f and the head. Batches: input_ids and
// attention_mask, the padded ids set to pad_token_id. A derived model lists its mixer's weights
// and runs it.
class SsmLm : public Model {
 public:
  WeightShapeList WeightShapes() const override { return shapes_; }
  std::vector<std::string> OutputNames() const override { return head_->OutputNames(); }
  std::vector<at::Tensor> Forward(const WeightMap& w, const TensorMap& inputs) const override;
  at::Tensor Loss(const WeightMap& w, const Batch& batch) const override;
  Batch MakeBatch(uint64_t seed, int64_t batch_size) const override;

 protected:
  // `dt_bias`: the ending of the weight that holds the time step's bias (InitWeight).
  SsmLm(ModelSpec spec, SsmLmConfig c, std::string dt_bias);

  // Lists the weights, in the order the init RNG follows: the embeddings, per layer its `norm`
  // then add_mixer("<layer>.mixer.") (which appends layer's mixer weights through Add), norm_f,
  // the head's. The derived constructor calls it once.
  void AddWeights(TextHeadKind head, const std::function<void(const std::string&)>& add_mixer);
  std::string Add(const std::string& name, std::vector<int64_t> shape);

  // Layer `layer`'s mixer on the normed x [B, S, H] -> [B, S, H]; `mask` the batch's
  // attention_mask (may be undefined).
  virtual at::Tensor Mixer(const WeightMap& w, size_t layer, const at::Tensor& x,
                           const at::Tensor& mask) const = 0;

  // As transformers initialises the mixers: A_log = log(1..n) along its last dimension, D = 1,
  // the time step's bias the inverse softplus of dt (SsmLmConfig). The rest as every zoo model
  // (biases seeded so that they matter).
  void InitWeight(const std::string& name, at::Tensor& t, at::Generator& gen) const override;
  static bool EndsWith(const std::string& name, const std::string& suffix);

 private:
  SsmLmConfig lm_;
  std::string dt_bias_;
  std::unique_ptr<TextHead> head_;
  WeightShapeList shapes_;
  std::vector<std::string> norms_;
  std::string embed_, norm_f_;
  int64_t seq_len_ = 32;
};

using BuildSsmLm = std::function<StatusOr<std::unique_ptr<Model>>(ModelSpec, TextHeadKind)>;

// `<prefix>ForCausalLM` (text-generation) and `<prefix>Model` (feature-extraction) of family
// `model_type`, both on `example`.
std::vector<ArchEntry> SsmLmArchs(const std::string& model_type, const std::string& prefix,
                                  const nlohmann::json& example, decltype(ArchEntry::scale) scale,
                                  const BuildSsmLm& build);

}  // namespace ts::zoo::internal::mamba
