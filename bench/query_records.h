// Realistic result records for the query benchmark (bench/query_fill, bench/query_bench):
// generated, not swept, deterministically from (seed, model, sweep, run), so that a filled
// database and a later ingest agree and a rerun fills the same rows.
//
// What the records look like (rates over the catalog, per mode on the primary run):
//   - statuses: eager passes ~80%, compile ~70%, train ~75%, with a per-class shift (some
//     classes are much worse than others); fail_accuracy is the most common failure, then
//     compile_fail (compile) or device_error, then oom / unsupported_dtype; crash and timeout are
//     rare; ~0.5% of models fail to load or in the CPU reference (every mode).
//   - drift: in each sweep a few hundred (model, mode) pairs flip for good and about as many flip
//     for that sweep only (they revert in the next), so consecutive sweeps differ. A confirmation
//     rerun (run 2 or 3) of a flip repeats it, except for ~20% flaky ones that rerun as before.
//   - ops: each class uses 25-60 ops of a ~150-name aten vocabulary, 0-3 of them through the
//     CPU fallback (popular fallback ops are shared by many classes); ~10% of a class's
//     fallback ops get a kernel from some sweep on. Calls scale with the model's depth.
//   - compile: graph breaks with the engine's reasons ("unsupported op aten::cumsum",
//     "data-dependent op aten::nonzero", "dynamic shape from aten::nonzero"), segments, nodes,
//     compile ms. train: 5-step loss curves (reference, device, declared, band).
//   - errors name an op; timings per stage.
//
// Thread-safety: a RecordGenerator is immutable after construction; Make may be called from
// many threads.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "touchstone/v1/result.pb.h"
#include "touchstone/v1/scheduler.pb.h"

namespace ts::bench {

namespace pb = ::touchstone::v1;

// One catalog row (`touchstone catalog generate` JSONL: id, task, arch, family, config_hash,
// config, tiny_config).
struct CatalogEntry {
  pb::CatalogModel model;        // what UpsertModels takes
  std::string tiny_config_json;  // what a worker reports as the config it built
  uint64_t key = 0;              // hash of the model id
  int layers = 1;                // num_hidden_layers (or n_layers...) of the full config
};

// Reads the JSONL catalog. INVALID_ARGUMENT naming the line and field for a malformed row;
// NOT_FOUND when the file cannot be opened.
absl::StatusOr<std::vector<CatalogEntry>> LoadCatalog(const std::string& path);

class RecordGenerator {
 public:
  // Class profiles (op sets, fallback ops, difficulty) are drawn from `seed` and the class
  // name, once per class of the catalog.
  RecordGenerator(const std::vector<CatalogEntry>& catalog, uint64_t seed);

  // The record a worker would report for `e` in sweep `sweep` (any positive number; the fill
  // uses the sweep id), run `run` (1: primary; 2, 3: confirmation reruns). job_id is left 0.
  pb::ModelResult Make(const CatalogEntry& e, int64_t sweep, int run) const;

  // nullptr for an id not in the catalog.
  const CatalogEntry* Find(const std::string& model_id) const;

  // The verdict of one mode on the primary run (what Make puts in the record).
  pb::Verdict Status(const CatalogEntry& e, pb::Mode mode, int64_t sweep) const;

  struct ClassProfile {
    std::vector<int> ops;             // vocabulary indices, native ones and fallback ones
    std::vector<int> fallback;        // the ops this class runs through the CPU fallback
    std::vector<int64_t> fixed_from;  // per fallback op: the sweep it turns native (0: never)
    double shift = 0;                 // added to each mode's pass rate
  };

 private:
  const ClassProfile& Profile(const std::string& arch) const;

  uint64_t seed_;
  std::unordered_map<std::string, ClassProfile> classes_;
  std::unordered_map<std::string, const CatalogEntry*> by_id_;
};

}  // namespace ts::bench
