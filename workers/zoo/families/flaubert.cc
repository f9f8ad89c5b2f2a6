// flaubert (modeling_flaubert.py): XLM's structure (xlm.cc) with Flaubert's pre_norm (x +
// attn(LN1(x)), x + ffn(LN2(x)), no final norm) and layerdrop (random layer skipping in training
// only, like the dropouts the zoo leaves out).
#include "workers/zoo/families/encoder_lineages.h"

namespace ts::zoo::internal::encoder {

EncoderFamily Flaubert() {  // flaubert/flaubert_base_cased
  json example = XlmExample("flaubert", 768, 12, 68729, 1e-6);
  example["lang_id"] = 0;
  example["layerdrop"] = 0.0;
  example["pre_norm"] = false;
  return XlmLineage("flaubert", "Flaubert", /*flaubert=*/true, std::move(example));
}

TS_ZOO_ENCODER_FAMILY(Flaubert);

}  // namespace ts::zoo::internal::encoder
