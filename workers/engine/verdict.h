// Verdicts: the per-mode statuses of DESIGN.md §4 and the per-model result record.
//
// Thread-safety: value types.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ts::engine {

// Ordered by pipeline stage: a regression is a move to a smaller value (an earlier stage).
enum class Verdict {
  kSkipped = 0,          // not run (mode not requested, or an earlier stage ended the model)
  kLoadFail,             // config could not be turned into a model
  kRefFail,              // the CPU reference itself failed or produced non-finite outputs
  kRefNondeterministic,  // two CPU reference runs differ
  kCrash,                // the process running the model died (set by the runner)
  kTimeout,              // the model exceeded its time limit (set by the runner)
  kUnsupportedDtype,     // the device refused a dtype
  kDeviceError,          // the device raised an error
  kOom,                  // device memory exhausted
  kCompileFail,          // tracing or the graph compiler failed
  kCompileTimeout,       // simulated compile cost over budget
  kFailAccuracy,         // ran, but numbers (outputs or loss curve) are wrong
  kPass,
};

const char* VerdictName(Verdict s);
std::optional<Verdict> VerdictFromName(const std::string& name);
// The statuses in stage order, for tables and tests.
const std::vector<Verdict>& AllVerdicts();

struct Accuracy {
  double rmse_device = 0;     // RMSE(device, fp64 golden)
  double rmse_reference = 0;  // RMSE(CPU at the declared numerics, fp64 golden)
  double rmse_ratio = 0;      // rmse_device / rmse_reference
  double rmse_vs_declared = 0;  // RMSE(device, CPU at the declared numerics)
  double max_abs_err = 0;     // vs CPU fp32
  double max_rel_err = 0;
  double cosine = 1;          // cosine similarity with CPU fp32
  bool allclose = false;      // allclose(device, cpu fp32) at the fp32 tolerance
  bool finite = true;
};

// An op over its tolerance in an op-by-op replay (README.md, "Suspects").
struct Suspect {
  std::string op;      // "aten::gelu"
  std::string shapes;  // tensor operand shapes of its worst call: "[2,8,64] [64]"
  std::string dtype;   // dtype of its first tensor operand: "float32"
  double ratio = 0;    // worst error / tolerance (> 1); kNonFiniteRatio for NaN/Inf or shape
  int64_t calls = 0;   // calls over tolerance
  int64_t total_calls = 0;  // calls of the op checked
};
// An op an op-by-op replay could not check: given the call's arguments, its CPU reference threw
// (the CPU has no kernel for it as called). Reported, so that a replay that checked nothing of
// an op says so instead of passing it over.
struct UncheckedOp {
  std::string op;      // "aten::_fused_op"
  int64_t calls = 0;   // calls left unchecked
  std::string error;   // the first one's exception: its first line, at most 200 characters
};
// The ratio of an output that is NaN/Inf where the reference is finite (a finite number, so the
// record stays valid JSON).
inline constexpr double kNonFiniteRatio = 1e300;

// An op's share of a mode's device time (ModePerf::top_ops).
struct OpTimeShare {
  std::string op;  // "aten::mm", or a pseudo-op: "[segment]", "[sync]", "[transfer]"
  double us = 0;
  double share = 0;  // us / device_us
};

// What the device clock measured for one mode (workers/simdevice/README.md, "Cost model"):
// eager forward, compiled forward, one training step. Set only when the mode passed.
struct ModePerf {
  double device_us = 0;
  double flops = 0;
  double bytes = 0;  // device memory traffic
  double mfu = 0;    // flops / (device time x the device's highest peak FLOP/s)
  int64_t launches = 0;
  double fallback_us = 0;
  double transfer_bytes = 0;  // over the host link
  int64_t peak_device_bytes = 0;
  std::vector<OpTimeShare> top_ops;  // the ops that take the time, largest first (kTopOps)
  // compile only, when eager has perf too: eager device_us / compiled device_us, and eager
  // peak_device_bytes / compiled peak_device_bytes.
  std::optional<double> speedup;
  std::optional<double> compression;
};
inline constexpr size_t kTopOps = 8;

struct ModeResult {
  Verdict status = Verdict::kSkipped;
  std::string error;  // empty on pass; otherwise what happened, naming the op or field
  double ms = 0;      // wall time of the mode
  std::optional<Accuracy> accuracy;
  // compile
  int graph_breaks = 0;
  std::vector<std::string> break_reasons;
  int device_segments = 0;
  int64_t graph_nodes = 0;
  double compile_ms = 0;       // simulated
  double compile_wall_ms = 0;  // real
  double first_run_ms = 0;
  // train
  std::vector<double> loss_reference;
  std::vector<double> loss_device;
  std::vector<double> loss_declared;  // reference training at the declared numerics
  std::vector<double> loss_band;      // allowed |device - reference| per step
  double max_loss_gap_ratio = 0;  // max over steps of gap / band
  // train: first-step gradients vs fp64, the worst parameter's rmse ratio and its name
  std::optional<double> grad_rmse_ratio;
  std::string grad_worst_param;
  // op-by-op replay (fail_accuracy, or an op audit): whether it ran, and what it found; the
  // first divergent op first, then by ratio. Never changes `status`.
  bool audited = false;
  std::vector<Suspect> suspects;
  std::vector<UncheckedOp> unchecked;  // ops of the replay with no CPU reference, by name
  // The device clock's figures; absent unless the mode passed (never zeros for a mode that
  // did not run).
  std::optional<ModePerf> perf;
};

struct OpCoverage {
  int distinct_ops = 0;  // distinct compute ops that reached the device in eager and training
  int native_ops = 0;    // of those, handled by a device kernel
  double ratio = 0;
  double call_ratio = 0;  // native calls / all calls
};

struct OpUse {
  int64_t calls = 0;
  double ms = 0;
};

// Where a run's references came from (README.md, "Reference bundles").
struct ReferenceUse {
  // "fresh": computed, kept nowhere; "computed": computed and stored (no bundle of this key, or
  // one refused); "stored": taken from a stored bundle; "completed": taken from a stored bundle
  // that lacked a first-step gradient this device needed, so train's references were computed
  // again and the bundle stored with it. Empty: the model never reached them.
  std::string source;
  std::string key_digest;      // the bundle key's SHA-256
  std::string content_digest;  // the bundle used or stored ("" for fresh)
  // Why a stored bundle was refused (damaged, truncated, another key inside, ...), or why a
  // computed one could not be stored; empty otherwise.
  std::string warning;
};

struct ModelResult {
  std::string arch, task, family;
  std::string config_hash;
  std::map<std::string, ModeResult> modes;  // "eager", "compile", "train"
  OpCoverage op_coverage;
  std::map<std::string, OpUse> fallback_ops;
  std::map<std::string, OpUse> native_ops;
  std::map<std::string, double> timings_ms;  // build, reference, eager, compile, train, total
  int64_t peak_device_bytes = 0;
  nlohmann::json tiny_config;
  ReferenceUse references;
};

nlohmann::json ToJson(const ModelResult& r);
// Human-readable multi-line summary.
std::string ToText(const ModelResult& r);

}  // namespace ts::engine
