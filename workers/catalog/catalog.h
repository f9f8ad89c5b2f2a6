// The model catalog (DESIGN.md §5): one row per model to sweep, each with a real-shaped config
// and the tiny config the engine builds.
//
// Generate: deterministic from (seed, count) and the real reference data in ../shared/data:
// every architecture class the zoo builds gets a share of the catalog by its Hub popularity
// (real model ids per class from ptm_naming_model_types.json, LLM class shares), inside a task
// mix close to the Hub's; real model ids are used where the data has them, fine-tune style ids
// otherwise; configs vary the class's example config the way real checkpoints of a family
// differ (depth, width with the same head size, GQA ratio, vocab, rope theta, labels).
//
// Rows are JSON lines with keys in this order: id, task, arch, family, config_hash, config,
// tiny_config. Same seed and count: byte-identical output.
//
// Thread-safety: pure functions over their arguments.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workers/base/status.h"

namespace ts::catalog {

struct Row {
  std::string id;
  std::string task;
  std::string arch;
  std::string family;
  nlohmann::json config;
  nlohmann::json tiny_config;  // null when the zoo cannot build the class
  std::string config_hash;
  // The row's own checkpoint folder (model.safetensors or its sharded index), absolute or
  // relative to the run's --weights-dir; empty: weights_dir/<id> when that holds one, else
  // seeded weights.
  std::string checkpoint;
};

// One JSON line (no newline). Keys in the documented order.
std::string ToJsonLine(const Row& row);
// Parses one catalog line; INVALID_ARGUMENT naming the field.
StatusOr<Row> ParseJsonLine(const std::string& line);
// Parses only id, task, arch, family, config_hash (configs left null): cheap for sampling.
StatusOr<Row> ParseKeys(const std::string& line);

struct GenerateOptions {
  uint64_t seed = 0;
  int64_t count = 104909;
  std::string data_dir;  // ../shared/data
};
struct GenerateStats {
  int64_t rows = 0;
  int64_t real_ids = 0;
  std::map<std::string, int64_t> per_task;
  std::map<std::string, int64_t> per_arch;
};
// Writes `count` lines to `out`.
StatusOr<GenerateStats> Generate(const GenerateOptions& opts, std::ostream& out);

// The target task mix (pipeline tag -> share) before restricting to the zoo's tasks.
const std::map<std::string, double>& TargetTaskMix();

struct ImportStats {
  int64_t imported = 0;
  int64_t unsupported = 0;  // imported, but the zoo does not build the class (tiny_config null)
  std::vector<std::string> errors;  // "line 7: pipeline_tag: missing", one per skipped line
};
// Reads Hub metadata lines ({"id", "pipeline_tag", "architectures", optional "config"}) and
// writes catalog rows. A bad line is reported in errors with its line number and skipped.
ImportStats Import(std::istream& in, std::ostream& out);

// Stratified sample: `n` rows spread over tasks in proportion to their catalog share (each
// task present gets at least one) and, within a task, over classes round-robin, seeded.
std::vector<Row> StratifiedSample(const std::vector<Row>& rows, int64_t n, uint64_t seed);

}  // namespace ts::catalog
