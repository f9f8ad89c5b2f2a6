// An independent recount of what a sweep's pages and tables claim, for the end-to-end tests
// (query_e2e_test.cc, dashboard_e2e_test.cc): the conformance table recounted from the sweep's
// ListResults rows, op demand and graph breaks from each model's own record (GetModel), and the
// deterministic regressions the alerts must cover. Plain counting written apart from
// services/query and services/store, so that an error there cannot pass by being compared with
// itself.
//
// Thread-safety: free functions and values.
#pragma once

#include <cstdint>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "services/query/summary_builder.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::testing {

namespace rpb = ::touchstone::v1;

// One row of the table, counted: models, those recorded `lost` (no verdict of their own), the
// passes per mode, the sum of opcov_ratio over the measured models.
struct RecountRow {
  int64_t models = 0, lost = 0;
  std::map<std::string, int64_t> pass;
  double opcov_sum = 0;

  int64_t measured() const { return models - lost; }
  double Pct(const std::string& mode) const {
    auto it = pass.find(mode);
    if (measured() == 0 || it == pass.end()) return 0;
    return 100.0 * static_cast<double>(it->second) / static_cast<double>(measured());
  }
  double OpcovPct() const {
    return measured() == 0 ? 0 : 100.0 * opcov_sum / static_cast<double>(measured());
  }
  // "eagerPct" / "compilePct" / "trainPct" / "opcovPct" / "models": the API's field names.
  double Field(const std::string& field) const {
    if (field == "models") return static_cast<double>(models);
    if (field == "opcovPct") return OpcovPct();
    return Pct(field.substr(0, field.size() - 3));
  }
};

struct TableRecount {
  std::map<std::string, RecountRow> tasks, archs;
  RecountRow total;
  // The mean of the per-class values over the classes with a measured model.
  double ClassWeighted(const std::string& field) const {
    double sum = 0;
    int n = 0;
    for (const auto& [arch, row] : archs) {
      if (row.measured() == 0) continue;
      sum += row.Field(field);
      ++n;
    }
    return n == 0 ? 0 : sum / n;
  }
};

inline std::unique_ptr<grpc::ClientContext> ReaderContext(const std::string& token) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->AddMetadata("authorization", "Bearer " + token);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
  return ctx;
}

// Every primary row of the sweep (Scheduler.ListResults, streamed in pages).
inline std::vector<rpb::ResultRow> ListAllResults(const std::shared_ptr<grpc::Channel>& channel,
                                                  const std::string& token, int64_t sweep) {
  auto stub = rpb::Scheduler::NewStub(channel);
  auto ctx = ReaderContext(token);
  rpb::ListResultsRequest req;
  req.set_sweep_id(sweep);
  auto reader = stub->ListResults(ctx.get(), req);
  std::vector<rpb::ResultRow> out;
  rpb::ResultPage page;
  while (reader->Read(&page)) {
    for (const auto& row : page.rows()) out.push_back(row);
  }
  const grpc::Status st = reader->Finish();
  EXPECT_TRUE(st.ok()) << "ListResults " << sweep << ": " << st.error_message();
  return out;
}

inline TableRecount RecountTable(const std::vector<rpb::ResultRow>& rows) {
  TableRecount out;
  for (const auto& r : rows) {
    bool lost = false;
    for (const auto& [mode, status] : r.status()) lost = lost || status == "lost";
    for (RecountRow* row : {&out.tasks[r.task()], &out.archs[r.arch()], &out.total}) {
      row->models += 1;
      row->lost += lost;
      if (lost) continue;
      row->opcov_sum += ts::query::OnSumGrid(r.opcov_ratio());  // the service's summing rule
      for (const auto& [mode, status] : r.status()) row->pass[mode] += status == "pass";
    }
  }
  return out;
}

// One model's record in `sweep` (Query.GetModel); fails the test when it has none.
inline rpb::ModelResult RecordOf(rpb::Query::Stub& query, const std::string& token,
                                 const std::string& model, int64_t sweep) {
  rpb::GetModelRequest req;
  req.set_model_id(model);
  req.set_last(100);
  rpb::ModelHistory h;
  const grpc::Status st = query.GetModel(ReaderContext(token).get(), req, &h);
  EXPECT_TRUE(st.ok()) << model << ": " << st.error_message();
  for (const auto& s : h.sweeps()) {
    if (s.sweep().sweep_id() == sweep) return s.result();
  }
  ADD_FAILURE() << model << " has no record in sweep " << sweep;
  return {};
}

// Op demand of one mode, counted from the records: an op blocks a model in eager when it ran
// through the CPU fallback, in compile also when the compiled graph broke on it (the op its break
// reason names).
struct OpDemandRecount {
  std::map<std::string, int64_t> blocked, alone;
  int64_t models = 0, native = 0;
};
inline OpDemandRecount RecountOpDemand(const std::vector<rpb::ModelResult>& records,
                                       rpb::Mode mode) {
  static const std::regex kOp("aten::[A-Za-z0-9_.]+");
  OpDemandRecount out;
  for (const auto& r : records) {
    std::set<std::string> blockers;
    bool unnamed_break = false;
    for (const auto& u : r.ops()) {
      if (!u.native()) blockers.insert(u.op());
    }
    for (const auto& v : r.modes()) {
      if (mode != rpb::MODE_COMPILE || v.mode() != rpb::MODE_COMPILE) continue;
      for (const auto& reason : v.break_reasons()) {
        std::smatch m;
        if (std::regex_search(reason, m, kOp)) {
          blockers.insert(m.str());
        } else {
          unnamed_break = true;
        }
      }
    }
    out.models += 1;
    out.native += blockers.empty() && !unnamed_break;
    for (const auto& op : blockers) {
      out.blocked[op] += 1;
      out.alone[op] += blockers.size() == 1 && !unnamed_break;
    }
  }
  return out;
}

// Graph-break reasons: reason -> models whose compiled graph broke for it.
inline std::map<std::string, int64_t> RecountBreaks(const std::vector<rpb::ModelResult>& records) {
  std::map<std::string, int64_t> out;
  for (const auto& r : records) {
    for (const auto& v : r.modes()) {
      if (v.mode() != rpb::MODE_COMPILE) continue;
      std::set<std::string> reasons(v.break_reasons().begin(), v.break_reasons().end());
      for (const auto& reason : reasons) out[reason] += 1;
    }
  }
  return out;
}

// The (model, mode) pairs a regression alert must cover: pass in the base, a verdict of the
// model's own in the head that is not pass (not crash, timeout, lost or skipped: those may be the
// infrastructure's), in a model whose flips the confirmation reruns found deterministic.
inline std::set<std::pair<std::string, std::string>> DeterministicRegressions(
    const std::vector<rpb::ResultRow>& base, const std::vector<rpb::ResultRow>& head) {
  static const std::set<std::string> kNotCounted = {"pass", "crash", "timeout", "lost", "skipped"};
  std::map<std::string, const rpb::ResultRow*> before;
  for (const auto& r : base) before[r.model_id()] = &r;
  std::set<std::pair<std::string, std::string>> out;
  for (const auto& r : head) {
    auto b = before.find(r.model_id());
    if (b == before.end() || r.confirmation() != "deterministic") continue;
    for (const auto& [mode, status] : r.status()) {
      auto was = b->second->status().find(mode);
      if (was == b->second->status().end() || was->second != "pass") continue;
      if (!kNotCounted.count(status)) out.insert({r.model_id(), mode});
    }
  }
  return out;
}

}  // namespace ts::testing
