#include "services/query/summary_builder.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "proto/names.h"

namespace ts::query {

namespace {

bool InList(const google::protobuf::RepeatedPtrField<std::string>& list, const std::string& v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

const std::string& GroupOf(pb::GroupBy by, const GroupKey& key) {
  if (by == pb::GROUP_BY_FAMILY) return key.family;
  if (by == pb::GROUP_BY_ARCH) return key.arch;
  return key.task;
}

double Pct(int64_t part, int64_t whole) {
  return whole == 0 ? 0.0 : 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The row's perf figures; each absent where no model has one (never 0).
void SetPerf(pb::SummaryRow* row, const PerfTally& p) {
  row->set_perf_models(p.models);
  if (p.models > 0) row->set_geomean_speedup(std::exp(p.log_speedup_sum / p.models));
  if (!p.mfus.empty()) row->set_median_mfu(Median(p.mfus));
  if (p.compression_n > 0) row->set_mean_compression(p.compression_sum / p.compression_n);
}

void SetPct(pb::SummaryRow* row, pb::Mode mode, double pct) {
  if (mode == pb::MODE_EAGER) row->set_eager_pct(pct);
  if (mode == pb::MODE_COMPILE) row->set_compile_pct(pct);
  if (mode == pb::MODE_TRAIN) row->set_train_pct(pct);
}

}  // namespace

PerfTally PerfOfRow(const pb::ResultRow& row) {
  PerfTally t;
  auto it = row.perf().find("compile");
  if (it == row.perf().end()) return t;
  const pb::Perf& p = it->second;
  if (!(std::isfinite(p.speedup()) && p.speedup() > 0)) return t;
  t.models = 1;
  t.log_speedup_sum = OnSumGrid(std::log(p.speedup()));
  if (std::isfinite(p.compression()) && p.compression() > 0) {
    t.compression_n = 1;
    t.compression_sum = OnSumGrid(p.compression());
  }
  if (std::isfinite(p.mfu())) t.mfus.push_back(p.mfu());
  return t;
}

int64_t VerdictCount(const std::vector<GroupTally>& groups, const std::string& status) {
  int64_t n = 0;
  for (const GroupTally& g : groups) {
    for (const auto& st : g.statuses) n += st.status == status ? st.models : 0;
  }
  return n;
}

bool FilterMatches(const pb::ResultFilter& f, const GroupKey& key) {
  return InList(f.tasks(), key.task) && InList(f.families(), key.family) &&
         InList(f.archs(), key.arch);
}

SummaryBuilder::SummaryBuilder(pb::GroupBy group_by, std::vector<std::string> modes,
                               pb::ResultFilter filter)
    : group_by_(group_by), modes_(std::move(modes)), filter_(std::move(filter)) {}

std::array<SummaryBuilder::Acc*, 3> SummaryBuilder::Targets(const GroupKey& key) {
  seen_tasks_.insert(key.task);
  seen_families_.insert(key.family);
  seen_archs_.insert(key.arch);
  if (!FilterMatches(filter_, key)) return {nullptr, nullptr, nullptr};
  if (group_by_ == pb::GROUP_BY_ARCH) {
    auto& names = arch_names_[key.arch];
    names.first.insert(key.task);
    names.second.insert(key.family);
  }
  return {&rows_[GroupOf(group_by_, key)], &classes_[key.arch], &total_};
}

void SummaryBuilder::Add(const pb::ResultRow& row) {
  const GroupKey key{row.task(), row.family(), row.arch()};
  AddGroup(key, 1, OnSumGrid(row.opcov_ratio()));
  for (const auto& [mode, status] : row.status()) AddStatus(key, mode, status, 1);
  AddPerf(key, PerfOfRow(row));
}

void SummaryBuilder::AddTally(const GroupTally& g) {
  const GroupKey key{g.task, g.family, g.arch};
  AddGroup(key, g.models, g.opcov_sum);
  for (const auto& st : g.statuses) AddStatus(key, st.mode, st.status, st.models);
  AddPerf(key, g.perf);
}

void SummaryBuilder::Remove(const pb::ResultRow& row) {
  const GroupKey key{row.task(), row.family(), row.arch()};
  AddGroup(key, -1, -OnSumGrid(row.opcov_ratio()));
  for (const auto& [mode, status] : row.status()) AddStatus(key, mode, status, -1);
  AddPerf(key, PerfOfRow(row), -1);
}

void SummaryBuilder::AddPerf(const GroupKey& key, const PerfTally& perf, int sign) {
  if (perf.models == 0 && perf.mfus.empty()) return;
  for (Acc* a : Targets(key)) {
    if (!a) continue;
    a->perf.models += sign * perf.models;
    a->perf.log_speedup_sum += sign * perf.log_speedup_sum;
    a->perf.compression_n += sign * perf.compression_n;
    a->perf.compression_sum += sign * perf.compression_sum;
    for (double m : perf.mfus) {
      if (sign > 0) {
        a->perf.mfus.push_back(m);
        continue;
      }
      auto it = std::find(a->perf.mfus.begin(), a->perf.mfus.end(), m);
      if (it != a->perf.mfus.end()) a->perf.mfus.erase(it);
    }
  }
}

void SummaryBuilder::AddGroup(const GroupKey& key, int64_t models, double opcov_sum) {
  for (Acc* a : Targets(key)) {
    if (!a) continue;
    a->models += models;
    a->opcov_sum += opcov_sum;
  }
}

void SummaryBuilder::AddStatus(const GroupKey& key, const std::string& mode,
                               const std::string& status, int64_t models) {
  const auto m = proto::ModeFromName(mode);
  const auto v = proto::VerdictFromName(status);
  if (!m || !v) return;  // the store writes only known names (StoredVerdict)
  for (Acc* a : Targets(key)) {
    if (a) a->counts[*m - 1][*v] += models;
  }
}

absl::Status SummaryBuilder::CheckFilterMatched(int64_t sweep_id) const {
  struct List {
    const char* field;
    const char* what;
    const google::protobuf::RepeatedPtrField<std::string>* values;
    const std::set<std::string>* seen;
  };
  const List lists[] = {{"tasks", "task", &filter_.tasks(), &seen_tasks_},
                        {"families", "family", &filter_.families(), &seen_families_},
                        {"archs", "arch", &filter_.archs(), &seen_archs_}};
  for (const List& l : lists) {
    for (int i = 0; i < l.values->size(); ++i) {
      if (l.seen->count(l.values->Get(i))) continue;
      return absl::InvalidArgumentError(
          std::string("filter.") + l.field + "[" + std::to_string(i) + "]: no model of sweep " +
          std::to_string(sweep_id) + " has " + l.what + " '" + l.values->Get(i) + "'");
    }
  }
  return absl::OkStatus();
}

int64_t SummaryBuilder::Measured(const Acc& a) const {
  // `lost` is recorded in every mode of the model at once: the most any mode holds.
  int64_t lost = 0;
  for (const auto& counts : a.counts) lost = std::max(lost, counts[pb::VERDICT_LOST]);
  return a.models - lost;
}

pb::SummaryRow SummaryBuilder::Row(const std::string& group, const Acc& a) const {
  pb::SummaryRow row;
  row.set_group(group);
  row.set_models(a.models);
  const int64_t measured = Measured(a);
  row.set_opcov_pct(measured == 0 ? 0.0 : 100.0 * a.opcov_sum / static_cast<double>(measured));
  for (const std::string& name : modes_) {
    const auto mode = proto::ModeFromName(name);
    if (!mode) continue;
    const auto& counts = a.counts[*mode - 1];
    SetPct(&row, *mode, Pct(counts[pb::VERDICT_PASS], measured));
    pb::ModeCounts* mc = row.add_modes();
    mc->set_mode(*mode);
    for (pb::Verdict v : proto::AllVerdicts()) {
      if (v == pb::VERDICT_SKIPPED || counts[v] == 0) continue;
      pb::StatusCount* sc = mc->add_statuses();
      sc->set_status(proto::VerdictName(v));
      sc->set_models(counts[v]);
    }
  }
  SetPerf(&row, a.perf);
  return row;
}

pb::Summary SummaryBuilder::Build() const {
  pb::Summary out;
  out.set_group_by(group_by_ == pb::GROUP_BY_UNSPECIFIED ? pb::GROUP_BY_TASK : group_by_);
  for (const auto& m : modes_) out.add_modes(m);
  for (const auto& [group, acc] : rows_) {
    if (acc.models == 0) continue;
    pb::SummaryRow* row = out.add_rows();
    *row = Row(group, acc);
    if (auto names = arch_names_.find(group); names != arch_names_.end()) {
      for (const auto& t : names->second.first) row->add_tasks(t);
      for (const auto& f : names->second.second) row->add_families(f);
    }
  }
  *out.mutable_total() = Row("Total", total_);
  pb::SummaryRow* cw = out.mutable_class_weighted();
  cw->set_group("Class-weighted");
  cw->set_models(total_.models);
  int64_t classes = 0, measured = 0;
  for (const auto& [arch, acc] : classes_) {
    classes += acc.models != 0;
    measured += Measured(acc) != 0;
  }
  out.set_classes(classes);
  SetClassWeightedPerf(cw);
  if (measured == 0) return out;
  for (const auto& [arch, acc] : classes_) {
    if (Measured(acc) == 0) continue;  // every model of the class lost: no rate to weigh
    const pb::SummaryRow c = Row(arch, acc);
    cw->set_eager_pct(cw->eager_pct() + c.eager_pct());
    cw->set_opcov_pct(cw->opcov_pct() + c.opcov_pct());
    cw->set_compile_pct(cw->compile_pct() + c.compile_pct());
    cw->set_train_pct(cw->train_pct() + c.train_pct());
  }
  const double k = static_cast<double>(measured);
  cw->set_eager_pct(cw->eager_pct() / k);
  cw->set_opcov_pct(cw->opcov_pct() / k);
  cw->set_compile_pct(cw->compile_pct() / k);
  cw->set_train_pct(cw->train_pct() / k);
  return out;
}

void SummaryBuilder::SetClassWeightedPerf(pb::SummaryRow* cw) const {
  // Each class with a perf model counts once: its geomean, median and mean.
  PerfTally classes;
  std::vector<double> medians;
  for (const auto& [arch, acc] : classes_) {
    if (acc.perf.models <= 0) continue;
    classes.models += 1;
    classes.log_speedup_sum += acc.perf.log_speedup_sum / acc.perf.models;
    if (!acc.perf.mfus.empty()) classes.mfus.push_back(Median(acc.perf.mfus));
    if (acc.perf.compression_n > 0) {
      classes.compression_n += 1;
      classes.compression_sum += acc.perf.compression_sum / acc.perf.compression_n;
    }
  }
  SetPerf(cw, classes);
  cw->set_perf_models(total_.perf.models);
}

namespace {

pb::GroupDelta Delta(const std::string& group, const pb::SummaryRow& base,
                     const pb::SummaryRow& head) {
  pb::GroupDelta d;
  d.set_group(group);
  *d.mutable_base() = base;
  *d.mutable_head() = head;
  d.set_eager_delta(head.eager_pct() - base.eager_pct());
  d.set_opcov_delta(head.opcov_pct() - base.opcov_pct());
  d.set_compile_delta(head.compile_pct() - base.compile_pct());
  d.set_train_delta(head.train_pct() - base.train_pct());
  return d;
}

}  // namespace

std::vector<pb::GroupDelta> Deltas(const pb::Summary& base, const pb::Summary& head) {
  std::map<std::string, std::pair<pb::SummaryRow, pb::SummaryRow>> by_group;
  for (const auto& r : base.rows()) by_group[r.group()].first = r;
  for (const auto& r : head.rows()) by_group[r.group()].second = r;
  std::vector<pb::GroupDelta> out;
  for (auto& [group, pair] : by_group) {
    pair.first.set_group(group);
    pair.second.set_group(group);
    out.push_back(Delta(group, pair.first, pair.second));
  }
  out.push_back(Delta("Total", base.total(), head.total()));
  out.push_back(Delta("Class-weighted", base.class_weighted(), head.class_weighted()));
  return out;
}

}  // namespace ts::query
