#include "services/query/compare.h"

#include <algorithm>
#include <utility>

#include "proto/names.h"

namespace ts::query {

namespace {

using Rows = std::vector<const pb::ResultRow*>;

// The rows the filter keeps, by model_id (already sorted when they come from the store: the
// sort is then a check).
Rows Sorted(const std::vector<pb::ResultRow>& rows, const pb::ResultFilter& filter) {
  Rows out;
  out.reserve(rows.size());
  for (const auto& r : rows) {
    if (FilterMatches(filter, {r.task(), r.family(), r.arch()})) out.push_back(&r);
  }
  const auto by_id = [](const pb::ResultRow* a, const pb::ResultRow* b) {
    return a->model_id() < b->model_id();
  };
  if (!std::is_sorted(out.begin(), out.end(), by_id)) std::sort(out.begin(), out.end(), by_id);
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
  const Rows base = Sorted(*in.base, in.filter);
  const Rows head = Sorted(*in.head, in.filter);
  pb::CompareSweepsResponse out;
  SummaryBuilder bsum(in.group_by, in.base_modes), hsum(in.group_by, in.head_modes);
  std::vector<pb::ModelChange> changes;
  // A merge of the two sorted lists: both, base only (disappeared), head only (appeared).
  size_t i = 0, j = 0;
  while (i < base.size() || j < head.size()) {
    const int cmp = i == base.size()   ? 1
                    : j == head.size() ? -1
                                       : base[i]->model_id().compare(head[j]->model_id());
    if (cmp < 0) {
      changes.push_back(Change(*base[i++], pb::ModelChange::KIND_DISAPPEARED));
    } else if (cmp > 0) {
      changes.push_back(Change(*head[j++], pb::ModelChange::KIND_APPEARED));
    } else {
      out.set_common_models(out.common_models() + 1);
      bsum.Add(*base[i]);
      hsum.Add(*head[j]);
      Flips(*base[i++], *head[j++], in.confirmations, &changes);
    }
  }
  // Already by model_id (the merge); within a model by kind, then mode.
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
  for (auto& d : Deltas(bsum.Build(), hsum.Build())) *out.add_groups() = std::move(d);
  return out;
}

}  // namespace ts::query
