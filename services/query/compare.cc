#include "services/query/compare.h"

#include <algorithm>
#include <utility>

#include "proto/names.h"

namespace ts::query {

namespace {

pb::ModelChange Change(const pb::ResultRow& r, pb::ModelChange::Kind kind) {
  pb::ModelChange c;
  c.set_model_id(r.model_id());
  c.set_kind(kind);
  c.set_task(r.task());
  c.set_arch(r.arch());
  c.set_family(r.family());
  return c;
}

// The flips of one model recorded in both sweeps, in mode order.
void Flips(const pb::ResultRow& base, const pb::ResultRow& head, const Confirmations& conf,
           std::vector<pb::ModelChange>* out) {
  for (pb::Mode mode : proto::AllModes()) {
    const std::string& name = proto::ModeName(mode);
    auto b = base.status().find(name);
    auto h = head.status().find(name);
    if (b == base.status().end() || h == head.status().end()) continue;
    // A model the infrastructure lost on either side has no verdict to compare.
    if (b->second == "lost" || h->second == "lost") continue;
    const bool bp = b->second == "pass", hp = h->second == "pass";
    if (bp == hp) continue;
    pb::ModelChange c =
        Change(head, bp ? pb::ModelChange::KIND_REGRESSED : pb::ModelChange::KIND_FIXED);
    c.set_mode(mode);
    c.set_base_status(b->second);
    c.set_head_status(h->second);
    if (bp) {
      auto it = conf.find({head.model_id(), name});
      if (it != conf.end()) c.set_confirmation(it->second);
    }
    out->push_back(std::move(c));
  }
}

}  // namespace

pb::CompareSweepsResponse Compare(const CompareInput& in) {
  pb::CompareSweepsResponse out;
  // Each sweep's tallies, less its models the other lacks: the groups of the common models.
  SummaryBuilder bsum(in.group_by, in.base_modes, in.filter),
      hsum(in.group_by, in.head_modes, in.filter);
  for (const auto& g : *in.base_groups) bsum.AddTally(g);
  for (const auto& g : *in.head_groups) hsum.AddTally(g);
  std::vector<pb::ModelChange> changes;
  for (const ModelPair& p : *in.differing) {
    const pb::ResultRow& any = p.Any();
    if (!FilterMatches(in.filter, {any.task(), any.family(), any.arch()})) continue;
    if (!p.head) {
      changes.push_back(Change(*p.base, pb::ModelChange::KIND_DISAPPEARED));
      bsum.Remove(*p.base);
    } else if (!p.base) {
      changes.push_back(Change(*p.head, pb::ModelChange::KIND_APPEARED));
      hsum.Remove(*p.head);
    } else {
      Flips(*p.base, *p.head, in.confirmations, &changes);
    }
  }
  // By model_id; within a model by kind, then mode.
  std::sort(changes.begin(), changes.end(), [](const pb::ModelChange& a, const pb::ModelChange& b) {
    if (const int c = a.model_id().compare(b.model_id()); c != 0) return c < 0;
    return std::make_pair(static_cast<int>(a.kind()), static_cast<int>(a.mode())) <
           std::make_pair(static_cast<int>(b.kind()), static_cast<int>(b.mode()));
  });
  for (auto& c : changes) {
    if (c.kind() == pb::ModelChange::KIND_REGRESSED) out.set_regressed(out.regressed() + 1);
    if (c.kind() == pb::ModelChange::KIND_FIXED) out.set_fixed(out.fixed() + 1);
    if (c.kind() == pb::ModelChange::KIND_APPEARED) out.set_appeared(out.appeared() + 1);
    if (c.kind() == pb::ModelChange::KIND_DISAPPEARED) out.set_disappeared(out.disappeared() + 1);
    *out.add_changes() = std::move(c);
  }
  const pb::Summary base = bsum.Build(), head = hsum.Build();
  out.set_common_models(base.total().models());
  for (auto& d : Deltas(base, head)) *out.add_groups() = std::move(d);
  return out;
}

}  // namespace ts::query
