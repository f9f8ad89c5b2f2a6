// Compiled mode of the engine (DESIGN.md §4, stage 4): trace a model function to a TorchScript
// graph, partition it into device segments by the profile's compiler spec, charge a simulated
// compile cost against the budget, and execute the partitioned graph with a small interpreter.
//
// The partitioning reads only the public ProfileInfo.compiler (supported_ops, data_dependent_ops,
// costs and limits); it never sees the simulator's defect list. See COMPILER.md ("Compiled mode").
//
// Thread-safety: TraceToGraph uses the process-global tracer state and must not run concurrently
// with another trace. A CompiledGraph is immutable after Compile; Run may be called from one
// thread at a time (the stored jit Operations are not documented as reentrant).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "workers/base/status.h"
#include "workers/simdevice/profile.h"

namespace torch::jit {
struct Graph;
}  // namespace torch::jit

namespace ts::engine {

using TraceFn = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

// Traces `fn` on `example_inputs` (CPU tensors) into a TorchScript graph whose inputs are exactly
// the flat input list (one graph input per tensor, in order) and whose outputs are the returned
// tensors, in order. Then runs the standard passes: Inline, dead code elimination, constant
// propagation on immutable (non-tensor) values only, CSE, constant pooling and a shape-free
// peephole pass. Tracing runs under NoGradGuard (inference graphs).
// Errors: FAILED_PRECONDITION with the tracer's (or fn's) message when tracing throws;
// INTERNAL when the traced graph is malformed (no outputs, non-tensor outputs).
StatusOr<std::shared_ptr<torch::jit::Graph>> TraceToGraph(
    const TraceFn& fn, const std::vector<at::Tensor>& example_inputs);

struct CompileReport {
  int64_t graph_nodes = 0;  // compute nodes (excluding prim::Constant/ListConstruct/... glue)
  int64_t device_nodes = 0;
  int64_t cpu_nodes = 0;
  int device_segments = 0;
  int graph_breaks = 0;  // CPU segments that sit between two device segments
  // One per break, the reason of the first compute node of that CPU segment:
  // "unsupported op aten::cumsum", "data-dependent op aten::nonzero",
  // "dynamic shape from aten::nonzero".
  std::vector<std::string> break_reasons;
  std::map<std::string, int> unsupported_ops;  // op -> node count placed on CPU (not supported)
  double mflops = 0;                // matmul-class work in device segments, from example shapes
  double simulated_compile_ms = 0;  // cost_ms_per_node * device_nodes + cost_ms_per_mflop * mflops
  double wall_compile_ms = 0;
};

class CompiledGraph {
 public:
  // Partitions `graph` by profile.compiler and prepares its execution plan.
  //
  // A compute node is a device node iff its op (schema name with overload, "aten::linear",
  // "aten::add.Tensor"; matched by simdevice::OpListMatches) is in supported_ops, it is not in
  // data_dependent_ops, and none of its inputs has a dynamic shape (a value downstream of a
  // data-dependent op; a 0-dim tensor result ends the taint). Glue nodes (prim::Constant,
  // prim::ListConstruct/ListUnpack/TupleConstruct/TupleUnpack, aten::size, aten::Int,
  // prim::NumToTensor, aten::ScalarImplicit, scalar arithmetic, ...) never break a segment:
  // they run on the side of their consumers. Consecutive device nodes in graph order form
  // device segments.
  //
  // Compile runs the graph once on CPU on `example_inputs` (inputs are cloned first when the
  // graph mutates in place) to learn shapes, which give the matmul-class MFLOPs.
  //
  // Errors (the report, when `report_out` is not null, is filled on every path that got as far
  // as partitioning):
  //   RESOURCE_EXHAUSTED  a device segment has more than max_nodes compute nodes (compile_fail);
  //   DEADLINE_EXCEEDED   simulated_compile_ms > budget_ms (compile_timeout);
  //   UNIMPLEMENTED       a node the interpreter cannot run (control flow, no operator);
  //   FAILED_PRECONDITION the CPU shape run on the example inputs threw (message included);
  //   INVALID_ARGUMENT    example_inputs does not match the graph's inputs.
  static StatusOr<std::unique_ptr<CompiledGraph>> Compile(
      std::shared_ptr<torch::jit::Graph> graph, const simdevice::ProfileInfo& profile,
      const std::vector<at::Tensor>& example_inputs, CompileReport* report_out = nullptr);

  ~CompiledGraph();
  CompiledGraph(const CompiledGraph&) = delete;
  CompiledGraph& operator=(const CompiledGraph&) = delete;

  const CompileReport& report() const { return report_; }
  // The partitioned graph in text form, each compute node tagged [device] or [cpu] (debugging).
  std::string DebugString() const;
  // Tensor-valued transfers one Run performs (each value at most once per direction).
  int64_t TransfersToDevice() const;
  int64_t TransfersToCpu() const;

  // Executes the partitioned graph. `inputs` are CPU tensors in trace order. Device segments run
  // on simdevice::SimDevice() under ScopedExecMode(kCompiled); CPU segments run on CPU. Tensors
  // move only at segment boundaries, each at most once per run per direction. Device constants
  // (and omitted `device=` arguments of factory ops) consumed by a device node are rewritten to
  // the device. Outputs are on CPU. Device faults propagate as c10::Error, unclassified.
  std::vector<at::Tensor> Run(const std::vector<at::Tensor>& inputs) const;

  struct Plan;  // execution plan (compiler_internal.h)

 private:
  CompiledGraph() = default;

  std::shared_ptr<torch::jit::Graph> graph_;
  std::unique_ptr<Plan> plan_;
  CompileReport report_;
};

}  // namespace ts::engine
