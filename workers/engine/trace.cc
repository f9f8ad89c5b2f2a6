#include "workers/engine/compiler.h"

#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/constant_pooling.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/torch.h>

#include <utility>

#include "workers/engine/compiler_internal.h"

namespace ts::engine {

namespace compiler_internal {

std::string ExceptionMessage(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

}  // namespace compiler_internal

using c10::IValue;
using compiler_internal::ExceptionMessage;
using torch::jit::Graph;
using torch::jit::Stack;
using torch::jit::Value;

StatusOr<std::shared_ptr<torch::jit::Graph>> TraceToGraph(
    const TraceFn& fn, const std::vector<at::Tensor>& example_inputs) {
  torch::NoGradGuard no_grad;
  Stack inputs(example_inputs.begin(), example_inputs.end());
  auto traced = [&fn](Stack in) -> Stack {
    std::vector<at::Tensor> tensors;
    tensors.reserve(in.size());
    for (const IValue& v : in) tensors.push_back(v.toTensor());
    std::vector<at::Tensor> outs = fn(tensors);
    return Stack(outs.begin(), outs.end());
  };
  std::shared_ptr<Graph> graph;
  try {
    auto result = torch::jit::tracer::trace(
        std::move(inputs), traced, [](const at::Tensor&) { return std::string(); },
        /*strict=*/false, /*force_outplace=*/false);
    graph = result.first->graph;
  } catch (const std::exception& e) {
    return FailedPreconditionError("trace failed: " + ExceptionMessage(e));
  }
  if (graph == nullptr || graph->outputs().empty()) {
    return InternalError("trace produced a graph without outputs");
  }
  for (const Value* v : graph->outputs()) {
    if (v->type()->kind() != c10::TypeKind::TensorType) {
      return InternalError("traced output %" + v->debugName() + " is " + v->type()->str() +
                           ", not a Tensor");
    }
  }
  try {
    torch::jit::Inline(*graph);
    torch::jit::EliminateDeadCode(graph);
    // Immutable types only: folding tensor-producing nodes (arange, zeros) would move their
    // work to compile time on the CPU and out of the device segment.
    torch::jit::ConstantPropagationImmutableTypes(graph);
    torch::jit::EliminateCommonSubexpression(graph);
    torch::jit::ConstantPooling(graph);
    torch::jit::PeepholeOptimize(graph, /*disable_shape_peepholes=*/true);
    torch::jit::EliminateDeadCode(graph);
  } catch (const std::exception& e) {
    return InternalError("graph passes failed: " + ExceptionMessage(e));
  }
  return graph;
}

}  // namespace ts::engine
