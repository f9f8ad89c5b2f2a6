// Device profiles: what the simulated accelerator supports, its declared numerics and its
// compiler limits. A profile is JSON (see profiles/sim-2.0.json and README.md); ParseProfile
// validates every field and names the offending one in the error.
//
// The profile's `defects` list is deliberately NOT part of ProfileInfo: nothing outside
// workers/simdevice may read it (DESIGN.md §3). Verdicts come from numbers only.
//
// Thread-safety: ProfileInfo is a value type.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "workers/base/status.h"

namespace ts::simdevice {

// How matmul-class ops (mm, addmm, bmm, baddbmm, convolution) compute.
enum class MatmulNumerics {
  kFp32,            // "fp32": exact fp32 inputs, fp32 accumulation
  kBf16InFp32Acc,   // "bf16_in_fp32_acc": inputs rounded to bf16, fp32 accumulation and output
  kBf16,            // "bf16": inputs and output rounded to bf16, fp32 accumulation
};
// Precision of the results of a class of ops (elementwise, reductions).
enum class Precision {
  kFp32,  // "fp32"
  kBf16,  // "bf16": each op's float result is rounded to bf16 (in eager; fused in compiled)
};

struct Numerics {
  MatmulNumerics matmul = MatmulNumerics::kFp32;
  Precision reductions = Precision::kFp32;
  Precision elementwise = Precision::kFp32;
};

struct CompilerSpec {
  std::set<std::string> supported_ops;       // ops the graph compiler lowers to the device
  std::set<std::string> data_dependent_ops;  // ops that always force a graph break
  double cost_ms_per_node = 1.0;             // simulated compile cost per graph node
  double cost_ms_per_mflop = 0.0;            // ... per MFLOP of matmul-class work
  double budget_ms = 60000;                  // compile budget; over it -> compile_timeout
  int64_t max_nodes = 4000;                  // a device segment larger than this fails
};

// A kernel whose efficiency or fixed overhead differs from the device's (profile
// `performance.kernels`); a field not given keeps the device-wide value.
struct KernelPerf {
  double efficiency = 0;  // 0: the device's `efficiency`
  double launch_us = -1;  // < 0: the device's `launch_us`
};

// The device's performance (profile `performance`; README.md, "Cost model"): what the simulated
// clock charges each op. Peaks are per dtype name ("bfloat16", "float32"); a dtype an engine does
// not list runs at that engine's lowest listed peak. The defaults are sim-2.0's numbers.
struct PerformanceSpec {
  std::string source;  // where the numbers come from (free text)
  std::map<std::string, double> matrix_tflops = {{"bfloat16", 667}, {"float32", 181}};
  std::map<std::string, double> vector_tflops = {{"bfloat16", 36.8}, {"float32", 18.4}};
  double hbm_gbps = 2900;           // device memory bandwidth, GB/s
  double efficiency = 0.75;         // achievable fraction of a peak FLOP/s, in (0, 1]
  double launch_us = 5;             // fixed cost of one kernel launch (or one compiled segment)
  double host_link_gbps = 64;       // host <-> device link (PCIe Gen5 x16), GB/s
  double host_link_latency_us = 8;  // per transfer
  double host_gflops = 50;          // the host core that runs CPU fallbacks, GFLOP/s
  double host_gbps = 15;            // ... and its memory bandwidth, GB/s
  double graph_break_us = 40;       // a graph break: the host waits for the device (sync)
  std::map<std::string, KernelPerf> kernels;  // op ("aten::_softmax", any overload) -> override
};

struct ProfileInfo {
  std::string name;
  std::string sdk_version;
  int64_t memory_bytes = 0;
  std::set<std::string> unsupported_dtypes;  // "float64", "complex64", "complex128", ...
  Numerics numerics;
  std::set<std::string> native_ops;  // "aten::mm", "aten::add.Tensor", "aten::add" (any overload)
  CompilerSpec compiler;
  PerformanceSpec performance;
  int num_defects = 0;  // count only; what they are is private to the simulator
};

// Parses and validates a profile document (including its defects, which are then dropped from
// the returned value). Errors are INVALID_ARGUMENT and start with the JSON path of the field:
// "numerics.matmul: unknown value 'int8' (expected fp32, bf16_in_fp32_acc, bf16)".
StatusOr<ProfileInfo> ParseProfile(const std::string& json_text);
// Reads a file and parses it; NOT_FOUND if it cannot be read.
StatusOr<ProfileInfo> ParseProfileFile(const std::string& path);

// True when `op` ("aten::add.Tensor") is named by `list`, either exactly or by its overload-less
// name ("aten::add").
bool OpListMatches(const std::set<std::string>& list, const std::string& op);
// "aten::add.Tensor" -> "aten::add".
std::string StripOverload(const std::string& op);

// Names used in profiles: "float32", "bfloat16", "float64", "int64", ...
const std::set<std::string>& KnownDtypeNames();

}  // namespace ts::simdevice
