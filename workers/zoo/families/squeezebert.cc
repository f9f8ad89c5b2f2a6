// squeezebert: SqueezeBERT (modeling_squeezebert.py), BERT's post-LN layer with every projection
// a grouped 1x1 Conv1d (q_groups, k_groups, v_groups, post_attention_groups, intermediate_groups,
// output_groups; Layout::kSqueezeBert), the embeddings at embedding_size == hidden_size (its
// encoder asserts it), BERT's heads under transformer. (pooler.dense, cls.predictions). Every
// class holds SqueezeBertModel with its pooler, which only the sequence-classification and
// multiple-choice heads call: the others' state_dict has it as an unused entry (seeded).
// squeezebert/squeezebert-uncased.
#include <tuple>
#include <vector>

#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {
namespace {

Status ParseSqueezeBert(const ConfigReader& r, const json&, Recipe& c) {
  TS_ASSIGN_OR_RETURN(int64_t e, r.Int("embedding_size", 768));
  if (e != c.hidden)
    return r.Error("embedding_size", "must equal hidden_size (SqueezeBertEncoder)");
  Recipe::ConvGroups& g = c.conv_groups;
  const std::vector<std::tuple<const char*, int64_t*, int64_t, int64_t>> fields = {
      {"q_groups", &g.q, c.hidden, c.hidden},
      {"k_groups", &g.k, c.hidden, c.hidden},
      {"v_groups", &g.v, c.hidden, c.hidden},
      {"post_attention_groups", &g.o, c.hidden, c.hidden},
      {"intermediate_groups", &g.fi, c.hidden, c.inter},
      {"output_groups", &g.fo, c.inter, c.hidden}};
  for (const auto& [name, dst, in, out] : fields) {
    TS_ASSIGN_OR_RETURN(*dst, r.Int(name, 1));
    TS_RETURN_IF_ERROR(Positive(r, name, *dst));
    if (in % *dst != 0 || out % *dst != 0)
      return r.Error(name, "must divide the layer's input and output channels");
  }
  return OkStatus();
}

void AddUnusedPooler(StateDictBuilder& sd) {
  const std::string words = "transformer.embeddings.word_embeddings.weight";
  if (!sd.HasWeight(words)) return;  // SqueezeBertModel builds its pooler as a weight
  const int64_t h = sd.weights().at(words)[1];
  sd.AddUnused("transformer.pooler.dense.weight", {h, h});
  sd.AddUnused("transformer.pooler.dense.bias", {h});
}

}  // namespace

EncoderFamily SqueezeBert() {
  json example = BertExample();
  example["model_type"] = "squeezebert";
  example["vocab_size"] = 30528;
  example["embedding_size"] = 768;
  example["q_groups"] = 4;
  example["k_groups"] = 4;
  example["v_groups"] = 4;
  example["post_attention_groups"] = 1;
  example["intermediate_groups"] = 4;
  example["output_groups"] = 1;
  return {
      .model_type = "squeezebert",
      .structure = {.layout = Layout::kSqueezeBert, .base = "transformer."},
      .names = BertHeadNames(),
      .parse = ParseSqueezeBert,
      // The tiny embedding_size follows the tiny hidden_size.
      .scale_extra = [](const Recipe&, json& t) { t["embedding_size"] = t["hidden_size"]; },
      .classes = AllHeads("SqueezeBert", /*causal=*/false),
      .example = example,
      .state_dict = {.extra = AddUnusedPooler},
  };
}

TS_ZOO_ENCODER_FAMILY(SqueezeBert);

}  // namespace ts::zoo::internal::encoder
