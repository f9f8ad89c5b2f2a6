// `touchstone zoo export` (README.md, "Checkpoints"): one class's tiny model as files any tool
// can reproduce a run from: config.json (the tiny config, built at that size), model.safetensors
// (its transformers state_dict: the seeded weights by their HF names, tied copies and buffers,
// state_dict.h), inputs.safetensors (the seeded batch's inputs) and
// outputs.safetensors (Forward's outputs, CPU fp32). clients/python/hf_crosscheck.py runs the
// same files through transformers.
//
// Thread-safety: pure functions (files only).
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "workers/base/status.h"
#include "workers/zoo/model.h"

namespace ts::zoo {

struct ExportOptions {
  std::string arch;  // empty: config["architectures"][0]
  uint64_t seed = 0;
  // Small files for shipping every class at once (scripts/hf_export_all): each float weight is
  // rounded to at most 31 levels k * 2^e (|k| <= 15, 2^e the power of two just above
  // max|w| / 15), exact in F16, and stored F16; Forward runs on the rounded weights, so the
  // files stay consistent (and compress well). Off: the seeded weights as they are, F32.
  bool compact = false;
};

// Writes the four files into `out_dir` (created). Errors name the field or the file.
Status ExportModel(const nlohmann::json& config, const ExportOptions& opts,
                   const std::string& out_dir);

// Loads an exported folder back (config.json at its own size, weights from model.safetensors by
// name), runs inputs.safetensors and returns the largest |difference| from outputs.safetensors
// over every output; an error names the tensor that is missing, mis-shaped or unreadable.
StatusOr<double> ReplayExport(const std::string& dir);

}  // namespace ts::zoo
