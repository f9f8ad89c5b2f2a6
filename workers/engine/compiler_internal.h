// Internals of compiled mode (compiler.h), shared by its files; private to the engine:
//   trace.cc           TraceToGraph: tracing and the standard graph passes;
//   partition.cc       node classes (glue, metadata) and the partition into device and CPU
//                      segments, with graph breaks and their reasons;
//   compiled_graph.cc  CompiledGraph::Compile (operators, CPU shape run, MFLOPs, cost and
//                      limits) and the CompiledGraph accessors;
//   execution_plan.cc  the step list over a slot table and the interpreter that runs it.
// COMPILER.md describes the rules.
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/runtime/operator.h>

#include "workers/engine/compiler.h"
#include "workers/simdevice/profile.h"

namespace ts::engine {
namespace compiler_internal {

enum class Side : uint8_t { kCpu, kDevice };

// One interpreter step. Slots index the per-run value table.
struct Step {
  enum class Kind : uint8_t { kNode, kToDevice, kToCpu, kEnterDevice, kLeaveDevice };
  Kind kind = Kind::kNode;
  int32_t node = -1;             // kNode: index into Plan::ops / Plan::nodes
  std::vector<int32_t> in;       // kNode: input slots; transfers: {src}
  std::vector<int32_t> out;      // kNode: output slots; transfers: {dst}
  std::vector<int32_t> release;  // slots dead after this step
  // The device clock (simdevice/device_clock.h; COMPILER.md, "Device time"):
  bool staging = false;  // a transfer of a graph input, constant or output: not the step's time
  bool host_op = false;  // kNode: a compute node of a CPU segment, charged as host work
  std::vector<int32_t> boundary_in;   // kNode: indices into `in` its segment reads from memory
  std::vector<int32_t> boundary_out;  // kNode: indices into `out` read after its segment
};

// The message of a c10::Error without its backtrace; what() otherwise.
std::string ExceptionMessage(const std::exception& e);

// ---- partition.cc

// "aten::add.Tensor" for schema'd nodes, the node kind ("prim::ListConstruct") otherwise.
std::string OpName(const torch::jit::Node* n);
bool ContainsTensor(const c10::TypePtr& type);
// Nodes that only read tensor metadata: their tensor inputs never need a transfer.
bool IsMetadataOnly(const torch::jit::Node* n);
// Glue never starts or ends a segment; it runs on the side of its consumers.
bool IsGlue(const torch::jit::Node* n);

}  // namespace compiler_internal

struct CompiledGraph::Plan {
  using Side = compiler_internal::Side;
  using Step = compiler_internal::Step;
  std::vector<const torch::jit::Node*> nodes;  // graph order
  std::vector<std::string> op_names;           // per node
  std::vector<torch::jit::Operation> ops;      // per node (empty for prim::Constant)
  std::vector<Side> sides;                     // per node
  std::vector<c10::IValue> initial;            // slot table template: constants filled in
  std::vector<int32_t> input_slots;
  std::vector<int32_t> output_slots;
  std::vector<Step> steps;
  bool timed = false;  // the device placement (not the CPU shape run): Execute reports to the clock
};

namespace compiler_internal {

using Plan = CompiledGraph::Plan;

// What the CPU shape run learnt, per node of Plan::nodes.
struct NodeShapes {
  std::vector<double> flops;         // matmul-class work
  std::vector<char> scalar_result;   // 1 if every result is a 0-dim tensor
};

// Places every node of `plan` (plan.sides) by `spec`, and fills the report's node counts,
// unsupported_ops, mflops (device nodes only), device_segments, graph_breaks and
// break_reasons. Returns the number of compute nodes of the largest device segment.
int64_t Partition(Plan& plan, const simdevice::CompilerSpec& spec, const NodeShapes& shapes,
                  CompileReport& report);

// ---- execution_plan.cc

// The jit interpreter runs list and tuple nodes as instructions, not registered operators, so
// getOperation has nothing for them: their Operation, or nullopt for any other node.
std::optional<torch::jit::Operation> StructuralOperation(const torch::jit::Node* n);

// Builds the steps of `plan` for plan.sides. With `device` false every node runs on CPU and
// nothing is rewritten (the shape run).
void BuildSteps(const torch::jit::Graph& graph, Plan& plan, bool device);

// ---- segment_boundaries.cc

// Marks, for the device placement's steps, which values each device segment reads from device
// memory and which it writes for later use (Step::boundary_in / boundary_out): COMPILER.md,
// "Device time".
void MarkSegmentBoundaries(Plan& plan);

// Called after each node step with the values it read and returned.
using NodeHook =
    std::function<void(const Step&, const torch::jit::Stack& in, const torch::jit::Stack& out)>;

// Runs the steps of `plan` on `inputs` (CPU, trace order); returns the graph's outputs.
std::vector<c10::IValue> Execute(Plan& plan, const std::vector<at::Tensor>& inputs,
                                 const NodeHook* hook);

}  // namespace compiler_internal
}  // namespace ts::engine
