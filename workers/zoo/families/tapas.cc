// tapas: TAPAS (modeling_tapas.py) as a family stack on the encoder trunk (encoder.h Stack):
// the trunk's BERT post-LN layers (Stack::BertLayers) under TapasEmbeddings: the word embeddings
// plus the position embeddings, then the seven token_type_embeddings_i over token_type_ids [B, S,
// 7] (segment, column, row, prev_labels, column_ranks, inv_column_ranks, numeric_relations;
// type_vocab_sizes), LayerNorm. With reset_position_index_per_cell (the default) a token's position
// restarts in its table cell: min(max_position_embeddings - 1, position - the first position of the
// tokens that share its (column, row) in the row of the batch), transformers' reduce_min / gather
// over the ProductIndexMap written as a per-row masked min. Heads: TapasModel's tanh pooler,
// TapasForSequenceClassification's classifier on it, TapasForMaskedLM's BERT cls.predictions
// (decoder tied, no pooler). The batches carry token_type_ids [B, S, 7]: the first quarter a
// question (all zeros), then table cells of two tokens in row-major order over three columns,
// ranks and relations drawn within their tables (Stack::AddInputs). TapasForQuestionAnswering is
// not registered (its cell-selection and aggregation losses are not written). type_vocab_sizes of
// another length than 7 and relative position_embedding_type are refused naming the field.
// google/tapas-base.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"
#include "workers/zoo/nn.h"
#include "workers/zoo/scaling.h"

namespace ts::zoo::internal::encoder {
namespace {

// TapasConfig's default type_vocab_sizes (its token type columns and their table sizes).
const std::vector<int64_t> kTypeVocabs = {3, 256, 256, 2, 256, 256, 10};
// Tokens per table cell and columns in the batches' tables.
constexpr int64_t kCellTokens = 2, kColumns = 3;

class TapasStack : public Stack {
 public:
  TapasStack(const Recipe& r, std::vector<int64_t> vocabs, bool reset)
      : r_(r), vocabs_(std::move(vocabs)), reset_(reset) {}

  void AddWeights(const std::string& p, const AddFn& add) override {
    const int64_t h = r_.hidden;
    word_ = add(p + "embeddings.word_embeddings.weight", {r_.vocab, h});
    pos_ = add(p + "embeddings.position_embeddings.weight", {r_.max_pos, h});
    for (size_t i = 0; i < vocabs_.size(); ++i) {
      types_.push_back(add(p + "embeddings.token_type_embeddings_" + std::to_string(i) + ".weight",
                           {vocabs_[i], h}));
    }
    emb_norm_ = p + "embeddings.LayerNorm";
    add(emb_norm_ + ".weight", {h});
    add(emb_norm_ + ".bias", {h});
  }

  std::string WordEmbedding() const override { return word_; }
  bool BertLayers() const override { return true; }

  Embedded Embed(const WeightMap& w, const at::Tensor& ids, const at::Tensor&,
                 const at::Tensor& types, const TensorMap&) const override {
    const int64_t n = ids.size(0), s = ids.size(1), k = static_cast<int64_t>(vocabs_.size());
    const at::Tensor ty = types.defined() ? types : at::zeros({n, s, k}, ids.options());
    TORCH_CHECK(ty.dim() == 3 && ty.size(2) == k, "TAPAS needs token_type_ids [B, S, ", k, "]");
    at::Tensor x = nn::Embedding(GetWeight(w, word_), ids, r_.pad.value_or(-1)) +
                   nn::Embedding(GetWeight(w, pos_), Positions(ty, s));
    for (int64_t i = 0; i < k; ++i) x = x + nn::Embedding(GetWeight(w, types_[i]), ty.select(2, i));
    return {nn::LayerNorm(x, GetWeight(w, emb_norm_ + ".weight"), GetWeight(w, emb_norm_ + ".bias"),
                          r_.eps),
            at::Tensor()};
  }

  // token_type_ids [N, S, 7] for tables of kColumns columns after a question of S / 4 tokens.
  void AddInputs(Head, at::Generator& gen, at::Tensor& ids, const at::Tensor& mask,
                 TensorMap& inputs) const override {
    const int64_t n = ids.size(0), s = ids.size(1), q = s / 4;
    const auto lopts = at::TensorOptions().dtype(at::kLong);
    at::Tensor t = at::zeros({n, s, static_cast<int64_t>(vocabs_.size())}, lopts);
    const at::Tensor cell = (at::arange(s, lopts) - q).clamp_min(0) / kCellTokens;
    const at::Tensor table = at::arange(s, lopts).ge(q).to(at::kLong);
    const at::Tensor col = (cell % kColumns + 1) * table, row = (cell / kColumns + 1) * table;
    t.select(2, 0).copy_(table.expand({n, s}));
    t.select(2, 1).copy_(col.clamp_max(vocabs_[1] - 1).expand({n, s}));
    t.select(2, 2).copy_(row.clamp_max(vocabs_[2] - 1).expand({n, s}));
    for (size_t i = 3; i < vocabs_.size(); ++i) {
      t.select(2, static_cast<int64_t>(i))
          .copy_(at::randint(0, vocabs_[i], {n, s}, gen, lopts) * table);
    }
    inputs["token_type_ids"] = t.masked_fill(mask.eq(0).unsqueeze(-1), 0);
  }

 private:
  // arange(S), or with reset_position_index_per_cell each token's offset from its cell's first
  // token (the cell: same column and row ids in the same batch row), capped at max_pos - 1.
  at::Tensor Positions(const at::Tensor& ty, int64_t s) const {
    const at::Tensor pos = at::arange(s, ty.options());
    if (!reset_) return pos.unsqueeze(0).expand({ty.size(0), s});
    const at::Tensor cell = ty.select(2, 1) * vocabs_[2] + ty.select(2, 2);  // ProductIndexMap
    const at::Tensor same = cell.unsqueeze(2).eq(cell.unsqueeze(1));         // [N, S, S]
    const at::Tensor first = at::where(same, pos.view({1, 1, s}), s).amin(-1);
    return at::clamp_max(pos.unsqueeze(0) - first, r_.max_pos - 1);
  }

  Recipe r_;
  std::vector<int64_t> vocabs_;
  bool reset_ = true;
  std::string word_, pos_, emb_norm_;
  std::vector<std::string> types_;
};

Status ParseTapas(const ConfigReader& r, const json& config, Recipe& c) {
  std::vector<int64_t> vocabs = kTypeVocabs;
  auto it = config.find("type_vocab_sizes");
  if (it != config.end()) {
    if (!it->is_array() || it->size() != kTypeVocabs.size())
      return r.Error("type_vocab_sizes", "expected a list of 7 sizes");
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_number_integer() || (*it)[i].get<int64_t>() <= 0)
        return r.Error("type_vocab_sizes", "expected positive integers");
      vocabs[i] = (*it)[i].get<int64_t>();
    }
  }
  TS_ASSIGN_OR_RETURN(bool reset, r.Bool("reset_position_index_per_cell", true));
  c.stack = [vocabs, reset](const Recipe& rec) {
    return std::make_unique<TapasStack>(rec, vocabs, reset);
  };
  return OkStatus();
}

}  // namespace

EncoderFamily Tapas() {
  json example = BertExample();
  example["model_type"] = "tapas";
  example["max_position_embeddings"] = 1024;
  example.erase("type_vocab_size");
  example["type_vocab_sizes"] = kTypeVocabs;
  example["reset_position_index_per_cell"] = true;
  return {
      .model_type = "tapas",
      .defaults = {.type_vocab = -1},
      .structure = {.base = "tapas."},
      .names = BertHeadNames(),
      .absolute_positions = true,
      .parse = ParseTapas,
      .classes = {.base = "TapasModel",
                  .seq_cls = "TapasForSequenceClassification",
                  .masked_lm = "TapasForMaskedLM"},
      .example = example,
  };
}

TS_ZOO_ENCODER_FAMILY(Tapas);

}  // namespace ts::zoo::internal::encoder
