// The pieces an encoder family shares with the families derived from it (the BERT, RoBERTa,
// DeBERTa and XLM lineages), grouped by the family file that defines them. An encoder family is
// one file, families/<model_type>.cc, that defines its EncoderFamily and registers it
// (TS_ZOO_ENCODER_FAMILY, trunks/encoder_family.h); adding one takes that file and its line in
// CMakeLists.txt. Private to the zoo.
#pragma once

#include <cstdint>
#include <string>

#include "workers/zoo/trunks/encoder_family.h"

namespace ts::zoo::internal::encoder {

// families/bert.cc: BERT's head names (pooler.dense, cls.predictions.*) and example
// (bert-base-uncased).
HeadNames BertHeadNames();
json BertExample();

// families/roberta.cc: a RoBERTa-lineage family (positions after the pad id, lm_head.*,
// classifier.dense + out_proj) named `model_type`, classes `prefix`*, base model `base`.
EncoderFamily RobertaLineage(const std::string& model_type, const std::string& prefix,
                             const std::string& base, json example);
// The RoBERTa lineage's head names: pooler.dense, classifier.dense / tanh / out_proj,
// lm_head.dense / GELU / layer_norm over the hidden width (mpnet's too).
HeadNames RobertaHeadNames();
// roberta-base / xlm-roberta-base / camembert-base shapes.
json RobertaExample(const char* model_type, int64_t vocab, int64_t bos, int64_t eos);

// families/deberta_v2.cc, shared with deberta (v1): pos_att_type ("c2p|p2c" or a list) into
// c2p / p2c; the ContextPooler's size and activation; the head names (pooler.dense before the
// classifiers, the legacy cls.predictions LM head); the tiny scaling of max_relative_positions
// and position_buckets.
Status ParsePosAttType(const ConfigReader& r, const json& config, Recipe& c);
Status ParseDebertaPooler(const ConfigReader& r, Recipe& c);
HeadNames DebertaHeadNames();
void ScaleDeberta(const Recipe& real, json& t);

// families/xlm.cc, shared with flaubert: the XLM structure named `model_type`, classes
// `prefix`* (flaubert: pre_norm and layerdrop read), and the fields their checkpoints share.
EncoderFamily XlmLineage(const std::string& model_type, const std::string& prefix, bool flaubert,
                         json example);
json XlmExample(const char* model_type, int64_t dim, int64_t heads, int64_t vocab, double eps);

}  // namespace ts::zoo::internal::encoder
