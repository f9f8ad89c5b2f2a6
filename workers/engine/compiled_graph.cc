// CompiledGraph: operators per node, the CPU shape run, the simulated compile cost and limits
// (COMPILER.md, "Cost model"), and the accessors over the execution plan.
#include "workers/engine/compiler.h"

#include <chrono>
#include <sstream>
#include <utility>

#include <torch/torch.h>

#include "workers/engine/compiler_internal.h"
#include "workers/simdevice/profile.h"

namespace ts::engine {

using c10::IValue;
using compiler_internal::ExceptionMessage;
using compiler_internal::NodeShapes;
using compiler_internal::OpName;
using compiler_internal::Plan;
using compiler_internal::Side;
using compiler_internal::Step;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Stack;

namespace {

// Matmul-class work of one node from the IValues it ran with; 0 for other ops.
double NodeFlops(const std::string& op, const Stack& inputs, const Stack& outputs) {
  if (outputs.empty() || !outputs[0].isTensor()) return 0;
  const at::Tensor& out = outputs[0].toTensor();
  auto tensor_at = [&](size_t i) -> const at::Tensor* {
    if (i >= inputs.size() || !inputs[i].isTensor()) return nullptr;
    return &inputs[i].toTensor();
  };
  const std::string base = simdevice::StripOverload(op);
  int64_t k = 0;
  if (base == "aten::linear" || base == "aten::matmul" || base == "aten::mm" ||
      base == "aten::bmm") {
    const at::Tensor* a = tensor_at(0);
    if (a != nullptr && a->dim() >= 1) k = a->size(-1);
  } else if (base == "aten::addmm" || base == "aten::baddbmm") {
    const at::Tensor* a = tensor_at(1);
    if (a != nullptr && a->dim() >= 1) k = a->size(-1);
  } else if (base == "aten::_convolution" || base == "aten::convolution" ||
             base == "aten::conv1d" || base == "aten::conv2d" || base == "aten::conv3d") {
    const at::Tensor* w = tensor_at(1);
    if (w != nullptr && w->dim() >= 1 && w->size(0) > 0) k = w->numel() / w->size(0);
  } else if (base == "aten::conv_transpose1d" || base == "aten::conv_transpose2d" ||
             base == "aten::conv_transpose3d") {
    const at::Tensor* x = tensor_at(0);
    const at::Tensor* w = tensor_at(1);
    if (x == nullptr || w == nullptr || w->dim() < 1 || w->size(0) == 0) return 0;
    return 2.0 * static_cast<double>(x->numel()) * static_cast<double>(w->numel() / w->size(0));
  }
  return 2.0 * static_cast<double>(out.numel()) * static_cast<double>(k);
}

// One Operation per node of `graph`, in graph order, into `plan`; sets `*mutates` when a node's
// schema mutates its inputs. UNIMPLEMENTED for control flow and nodes without an operator.
Status BindOperations(const Graph& graph, Plan& plan, bool* mutates) {
  for (const Node* n : graph.nodes()) {
    if (!n->blocks().empty()) {
      return UnimplementedError("Compile: control flow node " + OpName(n) + " is not supported");
    }
    plan.nodes.push_back(n);
    plan.op_names.push_back(OpName(n));
    if (n->kind() == c10::prim::Constant) {
      plan.ops.emplace_back(nullptr);
      continue;
    }
    if (const auto* schema = n->maybeSchema(); schema != nullptr && schema->is_mutable()) {
      *mutates = true;
    }
    if (auto structural = compiler_internal::StructuralOperation(n)) {
      plan.ops.push_back(std::move(*structural));
      continue;
    }
    try {
      plan.ops.push_back(n->getOperation());
    } catch (const std::exception& e) {
      return UnimplementedError("Compile: no operator for " + plan.op_names.back() + ": " +
                                ExceptionMessage(e));
    }
  }
  return OkStatus();
}

// Runs the graph once on CPU on the example inputs (cloned first when it mutates in place):
// matmul-class flops per node and which nodes yield only 0-dim tensors.
StatusOr<NodeShapes> ShapeRun(const Graph& graph, Plan& plan,
                              const std::vector<at::Tensor>& example_inputs, bool mutates) {
  const size_t num_nodes = plan.nodes.size();
  NodeShapes shapes{std::vector<double>(num_nodes, 0.0), std::vector<char>(num_nodes, 0)};
  plan.sides.assign(num_nodes, Side::kCpu);
  compiler_internal::BuildSteps(graph, plan, /*device=*/false);
  std::vector<at::Tensor> shape_inputs = example_inputs;
  if (mutates) {
    for (at::Tensor& t : shape_inputs) t = t.clone();
  }
  compiler_internal::NodeHook hook = [&](const Step& step, const Stack& in, const Stack& out) {
    shapes.flops[step.node] = NodeFlops(plan.op_names[step.node], in, out);
    bool all_scalar = true;
    for (const IValue& v : out) all_scalar = all_scalar && v.isTensor() && v.toTensor().dim() == 0;
    shapes.scalar_result[step.node] = all_scalar ? 1 : 0;
  };
  try {
    compiler_internal::Execute(plan, shape_inputs, &hook);
  } catch (const std::exception& e) {
    return FailedPreconditionError("Compile: CPU shape run failed: " + ExceptionMessage(e));
  }
  return shapes;
}

// The compiler's limits, in order: segment size (compile_fail), then cost (compile_timeout).
Status CheckLimits(const simdevice::CompilerSpec& spec, const CompileReport& report,
                   int64_t largest_device_segment) {
  if (largest_device_segment > spec.max_nodes) {
    return ResourceExhaustedError("compile_fail: a device segment has " +
                                  std::to_string(largest_device_segment) +
                                  " nodes, more than max_nodes " + std::to_string(spec.max_nodes));
  }
  if (report.simulated_compile_ms > spec.budget_ms) {
    std::ostringstream msg;
    msg << "compile_timeout: simulated compile " << report.simulated_compile_ms
        << " ms exceeds the budget of " << spec.budget_ms << " ms (" << report.device_nodes
        << " device nodes, " << report.mflops << " MFLOP)";
    return Status(StatusCode::kDeadlineExceeded, msg.str());
  }
  return OkStatus();
}

}  // namespace

CompiledGraph::~CompiledGraph() = default;

StatusOr<std::unique_ptr<CompiledGraph>> CompiledGraph::Compile(
    std::shared_ptr<torch::jit::Graph> graph, const simdevice::ProfileInfo& profile,
    const std::vector<at::Tensor>& example_inputs, CompileReport* report_out) {
  const auto start = std::chrono::steady_clock::now();
  if (graph == nullptr) return InvalidArgumentError("Compile: null graph");
  if (graph->inputs().size() != example_inputs.size()) {
    return InvalidArgumentError("Compile: graph has " + std::to_string(graph->inputs().size()) +
                                " inputs, got " + std::to_string(example_inputs.size()) +
                                " example inputs");
  }
  auto plan = std::make_unique<Plan>();
  bool mutates = false;
  TS_RETURN_IF_ERROR(BindOperations(*graph, *plan, &mutates));
  TS_ASSIGN_OR_RETURN(NodeShapes shapes, ShapeRun(*graph, *plan, example_inputs, mutates));

  const simdevice::CompilerSpec& spec = profile.compiler;
  CompileReport report;
  const int64_t largest_device_segment = compiler_internal::Partition(*plan, spec, shapes, report);
  report.simulated_compile_ms = spec.cost_ms_per_node * static_cast<double>(report.device_nodes) +
                                spec.cost_ms_per_mflop * report.mflops;
  const Status limits = CheckLimits(spec, report, largest_device_segment);
  if (limits.ok()) compiler_internal::BuildSteps(*graph, *plan, /*device=*/true);
  report.wall_compile_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (report_out != nullptr) *report_out = report;
  if (!limits.ok()) return limits;

  auto compiled = std::unique_ptr<CompiledGraph>(new CompiledGraph());
  compiled->graph_ = std::move(graph);
  compiled->plan_ = std::move(plan);
  compiled->report_ = std::move(report);
  return compiled;
}

std::string CompiledGraph::DebugString() const {
  std::ostringstream os;
  for (size_t i = 0; i < plan_->nodes.size(); ++i) {
    const Node* n = plan_->nodes[i];
    if (n->kind() == c10::prim::Constant) continue;
    os << (plan_->sides[i] == Side::kDevice ? "[device] " : "[cpu]    ") << *n;
  }
  return os.str();
}

int64_t CompiledGraph::TransfersToDevice() const {
  int64_t n = 0;
  for (const Step& step : plan_->steps) n += step.kind == Step::Kind::kToDevice ? 1 : 0;
  return n;
}

int64_t CompiledGraph::TransfersToCpu() const {
  int64_t n = 0;
  for (const Step& step : plan_->steps) n += step.kind == Step::Kind::kToCpu ? 1 : 0;
  return n;
}

std::vector<at::Tensor> CompiledGraph::Run(const std::vector<at::Tensor>& inputs) const {
  TORCH_CHECK(inputs.size() == plan_->input_slots.size(), "compiled graph expects ",
              plan_->input_slots.size(), " inputs, got ", inputs.size());
  std::vector<IValue> outs = compiler_internal::Execute(*plan_, inputs, nullptr);
  std::vector<at::Tensor> tensors;
  tensors.reserve(outs.size());
  for (IValue& v : outs) tensors.push_back(std::move(v).toTensor());
  return tensors;
}

}  // namespace ts::engine
