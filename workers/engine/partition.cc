// Partitioning of a traced graph into device and CPU segments (COMPILER.md, "Partitioning rule").
#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "workers/engine/compiler_internal.h"
#include "workers/simdevice/profile.h"

namespace ts::engine::compiler_internal {

using torch::jit::Node;
using torch::jit::Value;

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

bool IsMetadataOnly(const Node* n) {
  static const std::unordered_set<c10::Symbol> kMetadata = {
      c10::Symbol::fromQualString("aten::size"),  c10::Symbol::fromQualString("aten::dim"),
      c10::Symbol::fromQualString("aten::numel"), c10::Symbol::fromQualString("prim::device"),
      c10::Symbol::fromQualString("prim::dtype"), c10::Symbol::fromQualString("prim::shape"),
      c10::Symbol::fromQualString("aten::len"),
  };
  return kMetadata.count(n->kind()) > 0;
}

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

namespace {

// Per node: glue or compute, and why a compute node is on CPU.
struct Placement {
  std::vector<char> glue;
  std::vector<std::string> reasons;
};

// The first data-dependent origin among the node's inputs ("" if none).
std::string DynamicOrigin(const Node* n,
                          const std::unordered_map<const Value*, std::string>& dynamic_from) {
  for (const Value* v : n->inputs()) {
    auto it = dynamic_from.find(v);
    if (it != dynamic_from.end()) return it->second;
  }
  return "";
}

// Places compute nodes, in graph order, with the dynamic-shape taint; counts them in `report`.
Placement PlaceComputeNodes(Plan& plan, const simdevice::CompilerSpec& spec,
                            const NodeShapes& shapes, CompileReport& report) {
  const size_t num_nodes = plan.nodes.size();
  Placement p{std::vector<char>(num_nodes, 0), std::vector<std::string>(num_nodes)};
  std::unordered_map<const Value*, std::string> dynamic_from;  // value -> data-dependent origin
  for (size_t i = 0; i < num_nodes; ++i) {
    const Node* n = plan.nodes[i];
    const std::string& op = plan.op_names[i];
    std::string origin = DynamicOrigin(n, dynamic_from);
    const bool data_dependent = simdevice::OpListMatches(spec.data_dependent_ops, op);
    p.glue[i] = !data_dependent && IsGlue(n) ? 1 : 0;
    bool taint_outputs = !origin.empty();
    if (data_dependent) {
      p.reasons[i] = "data-dependent op " + op;
      origin = op;
      taint_outputs = true;
    } else if (p.glue[i]) {
      // Placed after the compute nodes (it follows its consumers); it only carries the taint.
    } else if (!origin.empty()) {
      p.reasons[i] = "dynamic shape from " + origin;
      taint_outputs = shapes.scalar_result[i] == 0;  // a 0-dim result has a static shape
    } else if (simdevice::OpListMatches(spec.supported_ops, op)) {
      plan.sides[i] = Side::kDevice;
    } else {
      p.reasons[i] = "unsupported op " + op;
    }
    if (taint_outputs) {
      for (const Value* v : n->outputs()) dynamic_from[v] = origin;
    }
    if (p.glue[i]) continue;
    ++report.graph_nodes;
    if (plan.sides[i] == Side::kDevice) {
      ++report.device_nodes;
      report.mflops += shapes.flops[i] / 1e6;
    } else {
      ++report.cpu_nodes;
      if (!simdevice::OpListMatches(spec.supported_ops, op)) ++report.unsupported_ops[op];
    }
  }
  return p;
}

// Glue follows its consumers: device only if every consumer is a device node.
void PlaceGlue(Plan& plan, const std::vector<char>& glue) {
  std::unordered_map<const Node*, size_t> index_of;
  for (size_t i = 0; i < plan.nodes.size(); ++i) index_of[plan.nodes[i]] = i;
  for (size_t r = plan.nodes.size(); r-- > 0;) {
    if (!glue[r]) continue;
    bool any_use = false;
    bool all_device = true;
    for (const Value* v : plan.nodes[r]->outputs()) {
      for (const torch::jit::Use& use : v->uses()) {
        any_use = true;
        auto it = index_of.find(use.user);
        if (it == index_of.end() || plan.sides[it->second] != Side::kDevice) all_device = false;
      }
    }
    plan.sides[r] = any_use && all_device ? Side::kDevice : Side::kCpu;
  }
}

// Segments over compute nodes in graph order: device segments, and every CPU segment between two
// device segments as a graph break named by its first node's reason. Returns the largest device
// segment's node count.
int64_t CountSegments(const Plan& plan, const Placement& p, CompileReport& report) {
  struct Segment {
    Side side;
    int64_t nodes;
    std::string first_reason;
  };
  std::vector<Segment> segments;
  for (size_t i = 0; i < plan.nodes.size(); ++i) {
    if (p.glue[i]) continue;
    if (segments.empty() || segments.back().side != plan.sides[i]) {
      segments.push_back({plan.sides[i], 0, p.reasons[i]});
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
  return largest_device_segment;
}

}  // namespace

int64_t Partition(Plan& plan, const simdevice::CompilerSpec& spec, const NodeShapes& shapes,
                  CompileReport& report) {
  plan.sides.assign(plan.nodes.size(), Side::kCpu);
  const Placement placement = PlaceComputeNodes(plan, spec, shapes, report);
  PlaceGlue(plan, placement.glue);
  return CountSegments(plan, placement, report);
}

}  // namespace ts::engine::compiler_internal
