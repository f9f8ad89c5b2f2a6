#include "services/query/compare.h"

#include <algorithm>
#include <tuple>

#include "proto/names.h"

namespace ts::query {

namespace {

using RowMap = std::map<std::string, const pb::ResultRow*>;

RowMap ByModel(const std::vector<pb::ResultRow>& rows, const pb::ResultFilter& filter) {
  RowMap out;
  for (const auto& r : rows) {
    if (FilterMatches(filter, {r.task(), r.family(), r.arch()})) out[r.model_id()] = &r;
  }
  return out;
}

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
  const RowMap base = ByModel(*in.base, in.filter);
  const RowMap head = ByModel(*in.head, in.filter);
  pb::CompareSweepsResponse out;
  SummaryBuilder bsum(in.group_by, in.base_modes), hsum(in.group_by, in.head_modes);
  std::vector<pb::ModelChange> changes;
  for (const auto& [id, b] : base) {
    auto h = head.find(id);
    if (h == head.end()) {
      changes.push_back(Change(*b, pb::ModelChange::KIND_DISAPPEARED));
      continue;
    }
    out.set_common_models(out.common_models() + 1);
    bsum.Add(*b);
    hsum.Add(*h->second);
    Flips(*b, *h->second, in.confirmations, &changes);
  }
  for (const auto& [id, h] : head) {
    if (!base.count(id)) changes.push_back(Change(*h, pb::ModelChange::KIND_APPEARED));
  }
  std::sort(changes.begin(), changes.end(), [](const pb::ModelChange& a, const pb::ModelChange& b) {
    return std::make_tuple(a.model_id(), static_cast<int>(a.kind()), static_cast<int>(a.mode())) <
           std::make_tuple(b.model_id(), static_cast<int>(b.kind()), static_cast<int>(b.mode()));
  });
  for (auto& c : changes) {
    if (c.kind() == pb::ModelChange::KIND_REGRESSED) out.set_regressed(out.regressed() + 1);
    if (c.kind() == pb::ModelChange::KIND_FIXED) out.set_fixed(out.fixed() + 1);
    if (c.kind() == pb::ModelChange::KIND_APPEARED) out.set_appeared(out.appeared() + 1);
    if (c.kind() == pb::ModelChange::KIND_DISAPPEARED) out.set_disappeared(out.disappeared() + 1);
    *out.add_changes() = std::move(c);
  }
  for (auto& d : Deltas(bsum.Build(), hsum.Build())) *out.add_groups() = std::move(d);
  return out;
}

}  // namespace ts::query
