// Which values cross the boundary of each device segment (COMPILER.md, "Device time"): inside a
// segment the compiler keeps intermediates on chip, so the segment's memory traffic is what it
// reads from outside (weights, inputs, values of CPU segments or earlier segments) and what it
// produces for later use.
#include <set>
#include <utility>
#include <vector>

#include "workers/engine/compiler_internal.h"

namespace ts::engine::compiler_internal {
namespace {

// The device segment each step belongs to (-1: none). Glue that runs on the device side before
// its segment's kEnterDevice (it does not switch modes) belongs to the segment about to start.
std::vector<int> SegmentOfSteps(const Plan& plan) {
  std::vector<int> seg(plan.steps.size(), -1);
  int current = -1, next = 0;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& step = plan.steps[i];
    if (step.kind == Step::Kind::kEnterDevice) current = next++;
    if (step.kind == Step::Kind::kLeaveDevice) current = -1;
    if (step.kind == Step::Kind::kNode && plan.sides[step.node] == Side::kDevice) {
      seg[i] = current >= 0 ? current : next;
    }
  }
  return seg;
}

// Whether input `k` of a node step holds tensors whose memory the node reads.
bool ReadsTensor(const Plan& plan, const Step& step, size_t k) {
  const torch::jit::Node* n = plan.nodes[step.node];
  return !IsMetadataOnly(n) && k < n->inputs().size() && ContainsTensor(n->inputs()[k]->type());
}

}  // namespace

void MarkSegmentBoundaries(Plan& plan) {
  const std::vector<int> seg = SegmentOfSteps(plan);
  const size_t num_slots = plan.initial.size();
  // Who produced each slot: its step, the index among that step's outputs, and its segment.
  std::vector<int32_t> producer(num_slots, -1), producer_out(num_slots, -1);
  std::vector<int> producer_seg(num_slots, -1);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const Step& step = plan.steps[i];
    for (size_t j = 0; j < step.out.size(); ++j) {
      producer[step.out[j]] = static_cast<int32_t>(i);
      producer_out[step.out[j]] = static_cast<int32_t>(j);
      producer_seg[step.out[j]] = step.kind == Step::Kind::kNode ? seg[i] : -1;
    }
  }
  std::set<std::pair<int, int32_t>> read;         // (segment, slot) already counted as read
  std::set<std::pair<int32_t, int32_t>> written;  // (step, output index) already marked
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    Step& step = plan.steps[i];
    const bool node = step.kind == Step::Kind::kNode;
    for (size_t k = 0; k < step.in.size(); ++k) {
      const int32_t slot = step.in[k];
      if (node && !ReadsTensor(plan, step, k)) continue;
      // A segment's read of a value produced outside it.
      if (node && seg[i] >= 0 && producer_seg[slot] != seg[i] &&
          read.insert({seg[i], slot}).second) {
        step.boundary_in.push_back(static_cast<int32_t>(k));
      }
      // A read, by anything outside the segment, of a value the segment produced.
      const int p = producer_seg[slot];
      if (p >= 0 && p != seg[i] && written.insert({producer[slot], producer_out[slot]}).second) {
        plan.steps[producer[slot]].boundary_out.push_back(producer_out[slot]);
      }
    }
  }
}

}  // namespace ts::engine::compiler_internal
