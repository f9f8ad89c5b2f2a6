// Config field readers shared by the encoder-decoder and audio family files; errors name the
// field as ConfigReader's do ("decoder_start_token_id: must be in [0, vocab_size) (got 9)").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "workers/zoo/config.h"

namespace ts::zoo::internal {

// A token id in [0, vocab), `def` when absent.
inline StatusOr<int64_t> TokenIdField(const ConfigReader& r, const std::string& f, int64_t def,
                                      int64_t vocab) {
  TS_ASSIGN_OR_RETURN(int64_t v, r.Int(f, def));
  if (v < 0 || v >= vocab) {
    return r.Error(f, "must be in [0, vocab_size) (got " + std::to_string(v) + ")");
  }
  return v;
}

// A positive integer ("must be positive, got 0"); required unless `def` is given.
inline StatusOr<int64_t> PositiveField(const ConfigReader& r, const std::string& field,
                                       std::optional<int64_t> def = std::nullopt) {
  StatusOr<int64_t> v = def ? r.Int(field, *def) : r.Int(field);
  if (!v.ok()) return v.status();
  if (*v <= 0) return r.Error(field, "must be positive, got " + std::to_string(*v));
  return *v;
}

// The seq2seq special tokens of `c` (T5Cfg, BartCfg: fields vocab, tie, pad, eos, start):
// tie_word_embeddings (default true), then pad_token_id, eos_token_id and decoder_start_token_id
// (default: eos when `start_is_eos`, else pad), each in [0, vocab).
template <typename Seq2SeqConfig>
Status ReadSeq2SeqTokens(const ConfigReader& r, int64_t pad_def, int64_t eos_def,
                         bool start_is_eos, Seq2SeqConfig& c) {
  TS_ASSIGN_OR_RETURN(c.tie, r.Bool("tie_word_embeddings", true));
  TS_ASSIGN_OR_RETURN(c.pad, TokenIdField(r, "pad_token_id", pad_def, c.vocab));
  TS_ASSIGN_OR_RETURN(c.eos, TokenIdField(r, "eos_token_id", eos_def, c.vocab));
  const int64_t start_def = start_is_eos ? c.eos : c.pad;
  TS_ASSIGN_OR_RETURN(c.start, TokenIdField(r, "decoder_start_token_id", start_def, c.vocab));
  return OkStatus();
}

}  // namespace ts::zoo::internal
