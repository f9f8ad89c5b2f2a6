#include "workers/engine/compiler.h"

#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/ir/constants.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/common_subexpression_elimination.h>
#include <torch/csrc/jit/passes/constant_pooling.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/passes/peephole.h>
#include <torch/torch.h>

#include <chrono>
#include <optional>
#include <sstream>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "workers/simdevice/runtime.h"

namespace ts::engine {
namespace {

using c10::IValue;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Stack;
using torch::jit::Value;

enum class Side : uint8_t { kCpu, kDevice };

std::string ExceptionMessage(const std::exception& e) {
  if (const auto* ce = dynamic_cast<const c10::Error*>(&e)) return ce->what_without_backtrace();
  return e.what();
}

// "aten::add.Tensor" for schema'd nodes, the node kind ("prim::ListConstruct") otherwise.
std::string OpName(const Node* n) {
  if (const auto* schema = n->maybeSchema()) {
    if (schema->overload_name().empty()) return schema->name();
    return schema->name() + "." + schema->overload_name();
  }
  return n->kind().toQualString();
}

bool ContainsTensor(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::TensorType) return true;
  for (const auto& contained : type->containedTypes()) {
    if (ContainsTensor(contained)) return true;
  }
  return false;
}

// Nodes that only read tensor metadata: their tensor inputs never need a transfer.
bool IsMetadataOnly(const Node* n) {
  static const std::unordered_set<c10::Symbol> kMetadata = {
      c10::Symbol::fromQualString("aten::size"),  c10::Symbol::fromQualString("aten::dim"),
      c10::Symbol::fromQualString("aten::numel"), c10::Symbol::fromQualString("prim::device"),
      c10::Symbol::fromQualString("prim::dtype"), c10::Symbol::fromQualString("prim::shape"),
      c10::Symbol::fromQualString("aten::len"),
  };
  return kMetadata.count(n->kind()) > 0;
}

// Glue never starts or ends a segment; it runs on the side of its consumers.
bool IsGlue(const Node* n) {
  static const std::unordered_set<c10::Symbol> kGlue = {
      c10::Symbol::fromQualString("prim::Constant"),
      c10::Symbol::fromQualString("prim::ListConstruct"),
      c10::Symbol::fromQualString("prim::ListUnpack"),
      c10::Symbol::fromQualString("prim::TupleConstruct"),
      c10::Symbol::fromQualString("prim::TupleUnpack"),
      c10::Symbol::fromQualString("prim::TupleIndex"),
      c10::Symbol::fromQualString("prim::NumToTensor"),
      c10::Symbol::fromQualString("aten::Int"),
      c10::Symbol::fromQualString("aten::Float"),
      c10::Symbol::fromQualString("aten::Bool"),
      c10::Symbol::fromQualString("aten::ScalarImplicit"),
      c10::Symbol::fromQualString("aten::__getitem__"),
  };
  if (kGlue.count(n->kind()) > 0 || IsMetadataOnly(n)) return true;
  // Scalar arithmetic on sizes (aten::mul.int, aten::floordiv, ...): nothing tensor-valued.
  for (const Value* v : n->inputs()) {
    if (ContainsTensor(v->type())) return false;
  }
  for (const Value* v : n->outputs()) {
    if (ContainsTensor(v->type())) return false;
  }
  return true;
}

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

// The jit interpreter runs these as instructions, not registered operators, so getOperation has
// nothing for them; these mirror torch/csrc/jit/runtime/vararg_functions.cpp.
std::optional<torch::jit::Operation> StructuralOperation(const Node* n) {
  const size_t num_inputs = n->inputs().size();
  const size_t num_outputs = n->outputs().size();
  if (n->kind() == c10::prim::ListConstruct) {
    c10::TypePtr elem = n->output()->type()->expectRef<c10::ListType>().getElementType();
    return torch::jit::Operation([elem, num_inputs](Stack& stack) {
      c10::impl::GenericList list(elem);
      list.reserve(num_inputs);
      for (auto it = stack.end() - static_cast<std::ptrdiff_t>(num_inputs); it != stack.end();
           ++it) {
        list.push_back(std::move(*it));
      }
      stack.erase(stack.end() - static_cast<std::ptrdiff_t>(num_inputs), stack.end());
      stack.emplace_back(std::move(list));
    });
  }
  if (n->kind() == c10::prim::TupleConstruct) {
    return torch::jit::Operation([num_inputs](Stack& stack) {
      std::vector<IValue> elems(
          std::make_move_iterator(stack.end() - static_cast<std::ptrdiff_t>(num_inputs)),
          std::make_move_iterator(stack.end()));
      stack.erase(stack.end() - static_cast<std::ptrdiff_t>(num_inputs), stack.end());
      stack.emplace_back(c10::ivalue::Tuple::create(std::move(elems)));
    });
  }
  if (n->kind() == c10::prim::ListUnpack) {
    return torch::jit::Operation([num_outputs](Stack& stack) {
      c10::impl::GenericList list = stack.back().toList();
      stack.pop_back();
      TORCH_CHECK(list.size() == num_outputs, "prim::ListUnpack: expected ", num_outputs,
                  " elements, got ", list.size());
      for (const IValue& e : list) stack.push_back(e);
    });
  }
  if (n->kind() == c10::prim::TupleUnpack) {
    return torch::jit::Operation([num_outputs](Stack& stack) {
      c10::intrusive_ptr<c10::ivalue::Tuple> tuple = stack.back().toTuple();
      stack.pop_back();
      TORCH_CHECK(tuple->elements().size() == num_outputs, "prim::TupleUnpack: expected ",
                  num_outputs, " elements, got ", tuple->elements().size());
      for (const IValue& e : tuple->elements()) stack.push_back(e);
    });
  }
  if (n->kind() == c10::prim::TupleIndex) {
    return torch::jit::Operation([](Stack& stack) {
      int64_t index = stack.back().toInt();
      stack.pop_back();
      c10::intrusive_ptr<c10::ivalue::Tuple> tuple = stack.back().toTuple();
      stack.pop_back();
      const auto size = static_cast<int64_t>(tuple->elements().size());
      if (index < 0) index += size;
      TORCH_CHECK(index >= 0 && index < size, "prim::TupleIndex: index out of range");
      stack.push_back(tuple->elements()[index]);
    });
  }
  return std::nullopt;
}

IValue MoveTo(const IValue& v, c10::Device device) {
  if (v.isTensor()) return v.toTensor().to(device);
  if (v.isList()) {
    c10::impl::GenericList in = v.toList();
    c10::impl::GenericList out(in.elementType());
    out.reserve(in.size());
    for (const IValue& e : in) out.push_back(MoveTo(e, device));
    return out;
  }
  if (v.isTuple()) {
    std::vector<IValue> elems;
    for (const IValue& e : v.toTupleRef().elements()) elems.push_back(MoveTo(e, device));
    return c10::ivalue::Tuple::create(std::move(elems));
  }
  return v;
}

}  // namespace

namespace compiler_internal {
// One interpreter step. Slots index the per-run value table.
struct Step {
  enum class Kind : uint8_t { kNode, kToDevice, kToCpu, kEnterDevice, kLeaveDevice };
  Kind kind = Kind::kNode;
  int32_t node = -1;             // kNode: index into Plan::ops / Plan::nodes
  std::vector<int32_t> in;       // kNode: input slots; transfers: {src}
  std::vector<int32_t> out;      // kNode: output slots; transfers: {dst}
  std::vector<int32_t> release;  // slots dead after this step
};
}  // namespace compiler_internal
using compiler_internal::Step;

struct CompiledGraph::Plan {
  std::vector<const Node*> nodes;          // graph order
  std::vector<std::string> op_names;       // per node
  std::vector<torch::jit::Operation> ops;  // per node (empty for prim::Constant)
  std::vector<Side> sides;                 // per node
  std::vector<IValue> initial;             // slot table template: constants filled in
  std::vector<int32_t> input_slots;
  std::vector<int32_t> output_slots;
  std::vector<Step> steps;
};

namespace {

using Plan = CompiledGraph::Plan;

// Builds the steps of `plan` for plan.sides. With `device` false every node runs on CPU and
// nothing is rewritten (the shape run).
void BuildSteps(const Graph& graph, Plan& plan, bool device) {
  plan.initial.clear();
  plan.input_slots.clear();
  plan.output_slots.clear();
  plan.steps.clear();
  std::unordered_map<const Value*, int32_t> slot_of;
  std::vector<Side> loc;  // where a slot's tensors live
  auto new_slot = [&](Side side) {
    plan.initial.emplace_back();
    loc.push_back(side);
    return static_cast<int32_t>(plan.initial.size() - 1);
  };
  for (const Value* v : graph.inputs()) {
    int32_t s = new_slot(Side::kCpu);
    slot_of[v] = s;
    plan.input_slots.push_back(s);
  }
  int32_t device_slot = -1;
  std::map<std::pair<int32_t, Side>, int32_t> moved;  // (slot, side) -> moved slot
  auto transfer = [&](int32_t s, Side to) {
    auto it = moved.find({s, to});
    if (it != moved.end()) return it->second;
    int32_t d = new_slot(to);
    Step step;
    step.kind = to == Side::kDevice ? Step::Kind::kToDevice : Step::Kind::kToCpu;
    step.in = {s};
    step.out = {d};
    plan.steps.push_back(std::move(step));
    moved[{s, to}] = d;
    return d;
  };
  Side mode = Side::kCpu;
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    const Node* n = plan.nodes[i];
    if (n->kind() == c10::prim::Constant) {
      int32_t s = new_slot(Side::kCpu);
      plan.initial[s] = torch::jit::toIValue(n->output()).value();
      slot_of[n->output()] = s;
      continue;
    }
    const Side side = device ? plan.sides[i] : Side::kCpu;
    Step step;
    step.node = static_cast<int32_t>(i);
    const bool metadata_only = IsMetadataOnly(n);
    const auto* schema = n->maybeSchema();
    for (size_t k = 0; k < n->inputs().size(); ++k) {
      const Value* v = n->inputs()[k];
      int32_t s = slot_of.at(v);
      if (side == Side::kDevice && v->node()->kind() == c10::prim::Constant) {
        const bool is_device = v->type()->kind() == c10::TypeKind::DeviceObjType;
        const bool omitted_device = v->type()->kind() == c10::TypeKind::NoneType &&
                                    schema != nullptr && k < schema->arguments().size() &&
                                    schema->arguments()[k].name() == "device";
        if (is_device || omitted_device) {
          if (device_slot < 0) {
            device_slot = new_slot(Side::kCpu);
            plan.initial[device_slot] = IValue(simdevice::SimDevice());
          }
          s = device_slot;
        }
      }
      if (!metadata_only && loc[s] != side && ContainsTensor(v->type())) s = transfer(s, side);
      step.in.push_back(s);
    }
    if (!IsGlue(n) && side != mode) {
      Step switch_step;
      switch_step.kind =
          side == Side::kDevice ? Step::Kind::kEnterDevice : Step::Kind::kLeaveDevice;
      plan.steps.push_back(std::move(switch_step));
      mode = side;
    }
    // NumToTensor makes a CPU scalar tensor wherever it runs.
    const Side out_side = n->kind() == c10::prim::NumToTensor ? Side::kCpu : side;
    for (const Value* v : n->outputs()) {
      int32_t s = new_slot(out_side);
      slot_of[v] = s;
      step.out.push_back(s);
    }
    plan.steps.push_back(std::move(step));
  }
  if (mode == Side::kDevice) {
    Step switch_step;
    switch_step.kind = Step::Kind::kLeaveDevice;
    plan.steps.push_back(std::move(switch_step));
  }
  for (const Value* v : graph.outputs()) {
    int32_t s = slot_of.at(v);
    if (loc[s] != Side::kCpu) s = transfer(s, Side::kCpu);
    plan.output_slots.push_back(s);
  }
  // Free each slot after its last reader so intermediates do not pile up in device memory.
  const int32_t num_slots = static_cast<int32_t>(plan.initial.size());
  std::vector<int32_t> last(num_slots, -1);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    for (int32_t s : plan.steps[i].in) last[s] = static_cast<int32_t>(i);
    for (int32_t s : plan.steps[i].out) {
      if (last[s] < 0) last[s] = static_cast<int32_t>(i);  // written, maybe never read
    }
  }
  for (int32_t s : plan.output_slots) last[s] = -1;
  for (int32_t s = 0; s < num_slots; ++s) {
    if (last[s] >= 0) plan.steps[last[s]].release.push_back(s);
  }
}

using NodeHook = std::function<void(const Step&, const Stack& in, const Stack& out)>;

std::vector<IValue> Execute(Plan& plan, const std::vector<at::Tensor>& inputs,
                            const NodeHook* hook) {
  torch::NoGradGuard no_grad;
  std::vector<IValue> slots = plan.initial;
  for (size_t i = 0; i < plan.input_slots.size(); ++i) slots[plan.input_slots[i]] = inputs[i];
  const c10::Device device = simdevice::SimDevice();
  std::optional<simdevice::ScopedExecMode> compiled;
  Stack stack;
  Stack hook_in;
  for (const Step& step : plan.steps) {
    switch (step.kind) {
      case Step::Kind::kNode: {
        stack.clear();
        for (int32_t s : step.in) stack.push_back(slots[s]);
        if (hook != nullptr) hook_in = stack;
        plan.ops[step.node](stack);
        TORCH_CHECK(stack.size() == step.out.size(), "compiled graph: ", plan.op_names[step.node],
                    " returned ", stack.size(), " values, expected ", step.out.size());
        if (hook != nullptr) (*hook)(step, hook_in, stack);
        for (size_t j = 0; j < step.out.size(); ++j) slots[step.out[j]] = std::move(stack[j]);
        break;
      }
      case Step::Kind::kToDevice:
      case Step::Kind::kToCpu: {
        // Transfers are runtime plumbing, not part of the lowered segment.
        std::optional<simdevice::ScopedExecMode> eager;
        if (compiled) eager.emplace(simdevice::ExecMode::kEager);
        slots[step.out[0]] = MoveTo(
            slots[step.in[0]], step.kind == Step::Kind::kToDevice ? device : c10::Device("cpu"));
        break;
      }
      case Step::Kind::kEnterDevice:
        compiled.emplace(simdevice::ExecMode::kCompiled);
        break;
      case Step::Kind::kLeaveDevice:
        compiled.reset();
        break;
    }
    for (int32_t s : step.release) slots[s] = IValue();
  }
  std::vector<IValue> out;
  out.reserve(plan.output_slots.size());
  for (int32_t s : plan.output_slots) out.push_back(slots[s]);
  return out;
}

}  // namespace

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
  for (const Node* n : graph->nodes()) {
    if (!n->blocks().empty()) {
      return UnimplementedError("Compile: control flow node " + OpName(n) + " is not supported");
    }
    plan->nodes.push_back(n);
    plan->op_names.push_back(OpName(n));
    if (n->kind() == c10::prim::Constant) {
      plan->ops.emplace_back(nullptr);
      continue;
    }
    if (const auto* schema = n->maybeSchema(); schema != nullptr && schema->is_mutable()) {
      mutates = true;
    }
    if (auto structural = StructuralOperation(n)) {
      plan->ops.push_back(std::move(*structural));
      continue;
    }
    try {
      plan->ops.push_back(n->getOperation());
    } catch (const std::exception& e) {
      return UnimplementedError("Compile: no operator for " + plan->op_names.back() + ": " +
                                ExceptionMessage(e));
    }
  }
  const size_t num_nodes = plan->nodes.size();

  // Shape run on CPU: matmul-class flops per node and which nodes yield only 0-dim tensors.
  std::vector<double> flops(num_nodes, 0.0);
  std::vector<char> scalar_result(num_nodes, 0);
  plan->sides.assign(num_nodes, Side::kCpu);
  BuildSteps(*graph, *plan, /*device=*/false);
  {
    std::vector<at::Tensor> shape_inputs = example_inputs;
    if (mutates) {
      for (at::Tensor& t : shape_inputs) t = t.clone();
    }
    NodeHook hook = [&](const Step& step, const Stack& in, const Stack& out) {
      flops[step.node] = NodeFlops(plan->op_names[step.node], in, out);
      bool all_scalar = true;
      for (const IValue& v : out)
        all_scalar = all_scalar && v.isTensor() && v.toTensor().dim() == 0;
      scalar_result[step.node] = all_scalar ? 1 : 0;
    };
    try {
      Execute(*plan, shape_inputs, &hook);
    } catch (const std::exception& e) {
      return FailedPreconditionError("Compile: CPU shape run failed: " + ExceptionMessage(e));
    }
  }

  // Placement of compute nodes, in graph order, with the dynamic-shape taint.
  const simdevice::CompilerSpec& spec = profile.compiler;
  std::vector<std::string> reasons(num_nodes);
  std::vector<char> glue(num_nodes, 0);
  std::unordered_map<const Value*, std::string> dynamic_from;  // value -> data-dependent origin
  std::unordered_map<const Node*, size_t> index_of;
  CompileReport report;
  for (size_t i = 0; i < num_nodes; ++i) {
    const Node* n = plan->nodes[i];
    const std::string& op = plan->op_names[i];
    index_of[n] = i;
    std::string origin;
    for (const Value* v : n->inputs()) {
      auto it = dynamic_from.find(v);
      if (it != dynamic_from.end()) {
        origin = it->second;
        break;
      }
    }
    const bool data_dependent = simdevice::OpListMatches(spec.data_dependent_ops, op);
    glue[i] = !data_dependent && IsGlue(n) ? 1 : 0;
    bool taint_outputs = !origin.empty();
    if (data_dependent) {
      reasons[i] = "data-dependent op " + op;
      origin = op;
      taint_outputs = true;
    } else if (glue[i]) {
      // Placed after the compute nodes (it follows its consumers); it only carries the taint.
    } else if (!origin.empty()) {
      reasons[i] = "dynamic shape from " + origin;
      taint_outputs = scalar_result[i] == 0;  // a 0-dim result has a static shape
    } else if (simdevice::OpListMatches(spec.supported_ops, op)) {
      plan->sides[i] = Side::kDevice;
    } else {
      reasons[i] = "unsupported op " + op;
    }
    if (taint_outputs) {
      for (const Value* v : n->outputs()) dynamic_from[v] = origin;
    }
    if (glue[i]) continue;
    ++report.graph_nodes;
    if (plan->sides[i] == Side::kDevice) {
      ++report.device_nodes;
      report.mflops += flops[i] / 1e6;
    } else {
      ++report.cpu_nodes;
      if (!simdevice::OpListMatches(spec.supported_ops, op)) ++report.unsupported_ops[op];
    }
  }
  // Glue follows its consumers: device only if every consumer is a device node.
  for (size_t r = num_nodes; r-- > 0;) {
    if (!glue[r]) continue;
    bool any_use = false;
    bool all_device = true;
    for (const Value* v : plan->nodes[r]->outputs()) {
      for (const torch::jit::Use& use : v->uses()) {
        any_use = true;
        auto it = index_of.find(use.user);
        if (it == index_of.end() || plan->sides[it->second] != Side::kDevice) all_device = false;
      }
    }
    plan->sides[r] = any_use && all_device ? Side::kDevice : Side::kCpu;
  }

  // Segments over compute nodes in graph order.
  struct Segment {
    Side side;
    int64_t nodes;
    std::string first_reason;
  };
  std::vector<Segment> segments;
  for (size_t i = 0; i < num_nodes; ++i) {
    if (glue[i]) continue;
    if (segments.empty() || segments.back().side != plan->sides[i]) {
      segments.push_back({plan->sides[i], 0, reasons[i]});
    }
    ++segments.back().nodes;
  }
  int64_t largest_device_segment = 0;
  bool seen_device = false;
  for (size_t s = 0; s < segments.size(); ++s) {
    if (segments[s].side == Side::kDevice) {
      ++report.device_segments;
      largest_device_segment = std::max(largest_device_segment, segments[s].nodes);
      seen_device = true;
      continue;
    }
    if (seen_device && s + 1 < segments.size()) {  // next segment is a device one
      ++report.graph_breaks;
      report.break_reasons.push_back(segments[s].first_reason);
    }
  }
  report.simulated_compile_ms = spec.cost_ms_per_node * static_cast<double>(report.device_nodes) +
                                spec.cost_ms_per_mflop * report.mflops;

  auto finish = [&]() {
    report.wall_compile_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (report_out != nullptr) *report_out = report;
  };
  if (largest_device_segment > spec.max_nodes) {
    finish();
    return ResourceExhaustedError("compile_fail: a device segment has " +
                                  std::to_string(largest_device_segment) +
                                  " nodes, more than max_nodes " + std::to_string(spec.max_nodes));
  }
  if (report.simulated_compile_ms > spec.budget_ms) {
    finish();
    std::ostringstream msg;
    msg << "compile_timeout: simulated compile " << report.simulated_compile_ms
        << " ms exceeds the budget of " << spec.budget_ms << " ms (" << report.device_nodes
        << " device nodes, " << report.mflops << " MFLOP)";
    return Status(StatusCode::kDeadlineExceeded, msg.str());
  }

  BuildSteps(*graph, *plan, /*device=*/true);
  finish();
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
  std::vector<IValue> outs = Execute(*plan_, inputs, nullptr);
  std::vector<at::Tensor> tensors;
  tensors.reserve(outs.size());
  for (IValue& v : outs) tensors.push_back(std::move(v).toTensor());
  return tensors;
}

}  // namespace ts::engine
