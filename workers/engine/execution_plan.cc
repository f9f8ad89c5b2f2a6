// The execution plan of a CompiledGraph: a flat step list over a slot table, and the interpreter
// that runs it (COMPILER.md, "Execution").
#include <torch/csrc/jit/ir/constants.h>
#include <torch/torch.h>

#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "workers/engine/compiler_internal.h"
#include "workers/simdevice/device_clock.h"
#include "workers/simdevice/runtime.h"

namespace ts::engine::compiler_internal {

using c10::IValue;
using torch::jit::Graph;
using torch::jit::Node;
using torch::jit::Stack;
using torch::jit::Value;

// These mirror torch/csrc/jit/runtime/vararg_functions.cpp.
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

namespace {

// Bytes of the tensors a value holds (a tensor, or a list or tuple of them).
double ValueBytes(const IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? static_cast<double>(t.numel()) * static_cast<double>(t.element_size())
                       : 0.0;
  }
  double bytes = 0;
  if (v.isList()) {
    for (const IValue& e : v.toListRef()) bytes += ValueBytes(e);
  } else if (v.isTuple()) {
    for (const IValue& e : v.toTupleRef().elements()) bytes += ValueBytes(e);
  }
  return bytes;
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


namespace {

// Builds Plan::steps and the slot table for one placement (BuildSteps).
class StepBuilder {
 public:
  StepBuilder(Plan& plan, bool device) : plan_(plan), device_(device) {}

  void Build(const Graph& graph) {
    plan_.initial.clear();
    plan_.input_slots.clear();
    plan_.output_slots.clear();
    plan_.steps.clear();
    for (const Value* v : graph.inputs()) {
      int32_t s = NewSlot(Side::kCpu);
      staged_[s] = true;
      slot_of_[v] = s;
      plan_.input_slots.push_back(s);
    }
    for (size_t i = 0; i < plan_.nodes.size(); ++i) AddNode(i);
    if (mode_ == Side::kDevice) {
      Step switch_step;
      switch_step.kind = Step::Kind::kLeaveDevice;
      plan_.steps.push_back(std::move(switch_step));
    }
    for (const Value* v : graph.outputs()) {
      int32_t s = slot_of_.at(v);
      if (loc_[s] != Side::kCpu) s = Transfer(s, Side::kCpu, /*staging=*/true);
      plan_.output_slots.push_back(s);
    }
  }

 private:
  int32_t NewSlot(Side side) {
    plan_.initial.emplace_back();
    loc_.push_back(side);
    staged_.push_back(false);
    return static_cast<int32_t>(plan_.initial.size() - 1);
  }

  // The slot holding slot `s`'s value on side `to`: a transfer step, at most one per direction.
  // Moving a graph input or a constant onto the device is staging (the weights and inputs
  // arrive before the step, as in eager), and so is bringing the outputs back.
  int32_t Transfer(int32_t s, Side to, bool staging = false) {
    auto it = moved_.find({s, to});
    if (it != moved_.end()) return it->second;
    int32_t d = NewSlot(to);
    Step step;
    step.kind = to == Side::kDevice ? Step::Kind::kToDevice : Step::Kind::kToCpu;
    step.staging = staging || staged_[s];
    step.in = {s};
    step.out = {d};
    plan_.steps.push_back(std::move(step));
    moved_[{s, to}] = d;
    return d;
  }

  // The slot node `n` reads as its input `k` when it runs on `side`: device constants (and an
  // omitted `device=` argument) bound to the device, tensors moved to `side`.
  int32_t InputSlot(const Node* n, size_t k, Side side) {
    const Value* v = n->inputs()[k];
    int32_t s = slot_of_.at(v);
    if (side == Side::kDevice && v->node()->kind() == c10::prim::Constant) {
      const auto* schema = n->maybeSchema();
      const bool is_device = v->type()->kind() == c10::TypeKind::DeviceObjType;
      const bool omitted_device = v->type()->kind() == c10::TypeKind::NoneType &&
                                  schema != nullptr && k < schema->arguments().size() &&
                                  schema->arguments()[k].name() == "device";
      if (is_device || omitted_device) {
        if (device_slot_ < 0) {
          device_slot_ = NewSlot(Side::kCpu);
          plan_.initial[device_slot_] = IValue(simdevice::SimDevice());
        }
        s = device_slot_;
      }
    }
    if (!IsMetadataOnly(n) && loc_[s] != side && ContainsTensor(v->type())) s = Transfer(s, side);
    return s;
  }

  void AddNode(size_t i) {
    const Node* n = plan_.nodes[i];
    if (n->kind() == c10::prim::Constant) {
      int32_t s = NewSlot(Side::kCpu);
      plan_.initial[s] = torch::jit::toIValue(n->output()).value();
      staged_[s] = true;
      slot_of_[n->output()] = s;
      return;
    }
    const Side side = device_ ? plan_.sides[i] : Side::kCpu;
    Step step;
    step.node = static_cast<int32_t>(i);
    step.host_op = device_ && side == Side::kCpu && !IsGlue(n);
    for (size_t k = 0; k < n->inputs().size(); ++k) step.in.push_back(InputSlot(n, k, side));
    if (!IsGlue(n) && side != mode_) {
      Step switch_step;
      switch_step.kind =
          side == Side::kDevice ? Step::Kind::kEnterDevice : Step::Kind::kLeaveDevice;
      plan_.steps.push_back(std::move(switch_step));
      mode_ = side;
    }
    // NumToTensor makes a CPU scalar tensor wherever it runs.
    const Side out_side = n->kind() == c10::prim::NumToTensor ? Side::kCpu : side;
    for (const Value* v : n->outputs()) {
      int32_t s = NewSlot(out_side);
      slot_of_[v] = s;
      step.out.push_back(s);
    }
    plan_.steps.push_back(std::move(step));
  }

  Plan& plan_;
  const bool device_;
  std::unordered_map<const Value*, int32_t> slot_of_;
  std::vector<Side> loc_;  // where a slot's tensors live
  std::vector<bool> staged_;  // graph inputs and constants: moving them is staging
  int32_t device_slot_ = -1;
  std::map<std::pair<int32_t, Side>, int32_t> moved_;  // (slot, side) -> moved slot
  Side mode_ = Side::kCpu;
};

// Frees each slot after its last reader so intermediates do not pile up in device memory.
void AddReleases(Plan& plan) {
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

}  // namespace

void BuildSteps(const Graph& graph, Plan& plan, bool device) {
  StepBuilder(plan, device).Build(graph);
  AddReleases(plan);
  plan.timed = device;
  if (device) MarkSegmentBoundaries(plan);
}

std::vector<IValue> Execute(Plan& plan, const std::vector<at::Tensor>& inputs,
                            const NodeHook* hook) {
  torch::NoGradGuard no_grad;
  std::vector<IValue> slots = plan.initial;
  for (size_t i = 0; i < plan.input_slots.size(); ++i) slots[plan.input_slots[i]] = inputs[i];
  const c10::Device device = simdevice::SimDevice();
  simdevice::DeviceClock& clock = simdevice::ActiveClock();
  std::optional<simdevice::ScopedExecMode> compiled;
  Stack stack;
  Stack hook_in;
  double boundary_bytes = 0;  // of the device segment running (COMPILER.md, "Device time")
  int segments_entered = 0;
  for (const Step& step : plan.steps) {
    switch (step.kind) {
      case Step::Kind::kNode: {
        stack.clear();
        for (int32_t s : step.in) stack.push_back(slots[s]);
        for (int32_t k : step.boundary_in) boundary_bytes += ValueBytes(stack[k]);
        if (hook != nullptr || step.host_op) hook_in = stack;
        plan.ops[step.node](stack);
        TORCH_CHECK(stack.size() == step.out.size(), "compiled graph: ", plan.op_names[step.node],
                    " returned ", stack.size(), " values, expected ", step.out.size());
        if (hook != nullptr) (*hook)(step, hook_in, stack);
        if (step.host_op) clock.HostOp(plan.op_names[step.node], hook_in, stack);
        for (int32_t j : step.boundary_out) boundary_bytes += ValueBytes(stack[j]);
        for (size_t j = 0; j < step.out.size(); ++j) slots[step.out[j]] = std::move(stack[j]);
        break;
      }
      case Step::Kind::kToDevice:
      case Step::Kind::kToCpu: {
        // Transfers are runtime plumbing, not part of the lowered segment.
        std::optional<simdevice::ScopedExecMode> eager;
        if (compiled) eager.emplace(simdevice::ExecMode::kEager);
        std::optional<simdevice::ScopedClockPause> untimed;
        if (step.staging) untimed.emplace();
        slots[step.out[0]] = MoveTo(
            slots[step.in[0]], step.kind == Step::Kind::kToDevice ? device : c10::Device("cpu"));
        break;
      }
      case Step::Kind::kEnterDevice:
        // Back on the device after a CPU segment: the graph break made the host wait.
        if (plan.timed && segments_entered++ > 0) clock.GraphBreakSync();
        compiled.emplace(simdevice::ExecMode::kCompiled);
        break;
      case Step::Kind::kLeaveDevice:
        compiled.reset();
        if (plan.timed) clock.EndSegment(boundary_bytes);
        boundary_bytes = 0;
        break;
    }
    for (int32_t s : step.release) slots[s] = IValue();
  }
  std::vector<IValue> out;
  out.reserve(plan.output_slots.size());
  for (int32_t s : plan.output_slots) out.push_back(slots[s]);
  return out;
}

}  // namespace ts::engine::compiler_internal
