// The encoder families (one file each, families/<model_type>.cc) and the pieces the BERT and
// RoBERTa lineages share. Private to the zoo.
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

EncoderFamily Bert();
EncoderFamily Roberta();
EncoderFamily XlmRoberta();
EncoderFamily Camembert();
EncoderFamily Data2VecText();
EncoderFamily RobertaPreLayerNorm();
EncoderFamily XlmRobertaXl();
EncoderFamily DistilBert();
EncoderFamily Albert();
EncoderFamily Electra();
EncoderFamily DebertaV2();
EncoderFamily Ernie();
EncoderFamily MegatronBert();
EncoderFamily BigBird();
EncoderFamily BertGeneration();
EncoderFamily RemBert();
EncoderFamily RoFormer();
EncoderFamily Mpnet();
EncoderFamily Deberta();
EncoderFamily Fnet();
EncoderFamily LayoutLm();
EncoderFamily Xlm();
EncoderFamily Flaubert();
EncoderFamily Dpr();

}  // namespace ts::zoo::internal::encoder
