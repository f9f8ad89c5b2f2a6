// The Query service over real gRPC on loopback and a throwaway PostgreSQL: records go in
// through the Scheduler API (CreateSweep, LeaseShard, ReportResults), answers are checked
// against recounts made here from the records sent or from ListResults.
#include "services/scheduler/query_service.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <thread>
#include <tuple>

#include <google/protobuf/util/field_comparator.h>
#include <google/protobuf/util/message_differencer.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "proto/names.h"
#include "services/common/error_signature.h"
#include "services/query/summary_builder.h"
#include "services/scheduler/scheduler.h"
#include "services/store/store.h"
#include "services/scheduler/scheduler_test_util.h"
#include "tests/fixtures/postgres_fixture.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

using google::protobuf::util::DefaultFieldComparator;
using google::protobuf::util::MessageDifferencer;

constexpr int kModels = 12;
const char* kArchs[] = {"LlamaForCausalLM", "GPT2LMHeadModel", "BertForMaskedLM"};
const char* kFamilies[] = {"llama", "gpt2", "bert"};

int Index(const std::string& model_id) { return std::stoi(model_id.substr(5)); }  // "org/mN"

// The fallback ops and the compile break reasons model i reports.
std::vector<std::string> FallbackOps(int i) {
  switch (i % 4) {
    case 1: return {"aten::cumsum"};
    case 2: return {"aten::cumsum", "aten::erf"};
    case 3: return {"aten::nonzero"};
    default: return {};
  }
}
std::vector<std::string> BreakReasons(int i) {
  switch (i % 5) {
    case 1: return {"data-dependent op aten::nonzero", "dynamic shape from aten::nonzero"};
    case 2: return {"unsupported op aten::cumsum"};
    case 3: return {"graph too large"};
    default: return {};
  }
}

// A verdict with every field set (values vary with `seed` so each sweep's record differs).
pb::ModeVerdict Verdict(pb::Mode mode, pb::Verdict status, int i, double seed) {
  pb::ModeVerdict v;
  v.set_mode(mode);
  v.set_status(status);
  if (status != pb::VERDICT_PASS) v.set_error("rmse 0.0" + std::to_string(31 + i) + " > 0.01");
  v.set_ms(10.5 + i + seed);
  if (mode != pb::MODE_TRAIN) {
    v.set_has_accuracy(true);
    v.set_rmse_device(0.001 * (i + 1) + seed);
    v.set_rmse_reference(0.0009 * (i + 1));
    v.set_rmse_ratio(1.1 + seed);
    v.set_max_abs_err(0.02);
    v.set_cosine(0.99999);
    v.set_rmse_vs_declared(0.0004);
    v.set_max_rel_err(0.125);
    v.set_allclose(i % 2 == 0);
    v.set_first_run_ms(std::numeric_limits<double>::quiet_NaN());  // not measured
  }
  if (mode == pb::MODE_COMPILE) {
    for (const auto& r : BreakReasons(i)) v.add_break_reasons(r);
    v.set_graph_breaks(v.break_reasons_size());
    v.set_device_segments(v.break_reasons_size() + 1);
    v.set_graph_nodes(40 + i);
    v.set_compile_ms(120.25 + seed);
    v.set_compile_wall_ms(33.5);
    v.set_first_run_ms(7.75);
  }
  if (mode == pb::MODE_TRAIN) {
    for (int s = 0; s < 3; ++s) {
      v.add_loss_reference(6.0 - 0.5 * s);
      v.add_loss_device(6.0 - 0.5 * s + 0.001 * seed);
      v.add_loss_declared(6.0 - 0.49 * s);
      v.add_loss_band(0.05);
    }
    v.set_max_loss_gap_ratio(0.2 + seed);
    v.set_grad_rmse_ratio(1.5 + seed);
    v.set_grad_worst_param("model.layers." + std::to_string(i) + ".mlp.up_proj.weight");
  } else {
    v.set_grad_rmse_ratio(std::numeric_limits<double>::quiet_NaN());  // not measured
  }
  if (i % 2 == 1) {  // replayed op by op: a non-finite mismatch first, then a plain one
    v.set_audited(true);
    auto* s = v.add_suspects();
    s->set_op("aten::gelu");
    s->set_shapes("[2,8,64]");
    s->set_dtype("bfloat16");
    s->set_ratio(1e300);
    s->set_calls(3);
    s->set_total_calls(12);
    s = v.add_suspects();
    s->set_op("aten::add.Tensor");
    s->set_shapes("[2,8,64] [64]");
    s->set_dtype("float32");
    s->set_ratio(1.0000000000000002 + seed / 3);
    s->set_calls(1);
    s->set_total_calls(40 + i);
    auto* u = v.add_unchecked();  // an op the replay could not check
    u->set_op("aten::_fused_rms_norm");
    u->set_calls(2 + i);
    u->set_error("no CPU kernel for aten::_fused_rms_norm as called");
  }
  return v;
}

struct Flavor {
  std::map<int, pb::Verdict> eager;    // model index -> status (default: pass, or
  std::map<int, pb::Verdict> compile;  // fail_accuracy / compile_fail by the base rules)
  double seed = 0;
};

// Model i's record in a sweep of `modes`.
pb::ModelResult Record(const pb::Job& job, const std::vector<std::string>& modes,
                       const Flavor& f) {
  const int i = Index(job.model_id());
  pb::ModelResult r;
  r.set_job_id(job.job_id());
  r.set_model_id(job.model_id());
  r.set_run(job.run());
  for (const std::string& name : modes) {
    const pb::Mode mode = *proto::ModeFromName(name);
    pb::Verdict st = pb::VERDICT_PASS;
    if (mode == pb::MODE_EAGER && i % 6 == 5) st = pb::VERDICT_FAIL_ACCURACY;
    if (mode == pb::MODE_COMPILE && i % 5 == 3) st = pb::VERDICT_COMPILE_FAIL;
    const auto& over = mode == pb::MODE_EAGER ? f.eager : f.compile;
    if (auto it = over.find(i); it != over.end()) st = it->second;
    *r.add_modes() = Verdict(mode, st, i, f.seed);
  }
  const auto fallback = FallbackOps(i);
  for (const char* op : {"aten::add", "aten::mm"}) {
    auto* u = r.add_ops();
    u->set_op(op);
    u->set_calls(100 + i);
    u->set_ms(1.5);
    u->set_native(true);
  }
  for (size_t k = 0; k < fallback.size(); ++k) {
    auto* u = r.add_ops();
    u->set_op(fallback[k]);
    u->set_calls(3 + i + static_cast<int>(k));
    u->set_ms(0.25 * (i + 1));
  }
  r.set_distinct_ops(2 + static_cast<int>(fallback.size()));
  r.set_native_ops(2);
  r.set_opcov_ratio(2.0 / r.distinct_ops());
  r.set_call_ratio(0.97 - 0.01 * i);
  r.set_total_ms(250 + i + f.seed);
  r.set_peak_device_bytes(1 << 20);
  r.set_family(kFamilies[i % 3]);
  r.set_tiny_config_json("{\"model_type\": \"" + std::string(kFamilies[i % 3]) + "\"}");
  r.set_arch(job.arch());
  r.set_task(job.task());
  r.set_config_hash("h" + std::to_string(i));
  (*r.mutable_timings_ms())["build"] = 1.5 + f.seed;
  (*r.mutable_timings_ms())["total"] = 250 + i;
  return r;
}

class QueryServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    opts_.db_url = TestDatabaseUrl();
    ASSERT_FALSE(opts_.db_url.empty());
    ASSERT_TRUE(opts_.tokens.Add(common::Role::kAdmin, "test-token").ok());
    opts_.tick_s = 3600;  // the ticker runs once: tests summarize done sweeps themselves
    auto s = Scheduler::Start(opts_);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = std::move(*s);
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(sched_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    sched_stub_ = pb::Scheduler::NewStub(channel);
    query_ = pb::Query::NewStub(channel);
    pb::UpsertModelsRequest up;
    for (int i = 0; i < kModels; ++i) {
      auto* m = up.add_models();
      m->set_id("org/m" + std::to_string(i));
      m->set_task(i % 2 ? "fill-mask" : "text-generation");
      m->set_arch(kArchs[i % 3]);
      m->set_family(kFamilies[i % 3]);
      m->set_config_json("{}");
    }
    pb::UpsertModelsResponse ur;
    ASSERT_TRUE(sched_stub_->UpsertModels(Ctx().get(), up, &ur).ok());
    pb::RegisterWorkerRequest reg;
    reg.set_name("w");
    pb::RegisterWorkerResponse rw;
    ASSERT_TRUE(sched_stub_->RegisterWorker(Ctx().get(), reg, &rw).ok());
    worker_id_ = rw.worker_id();
  }

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "test-token") {
    return BearerContext(token);
  }

  int64_t CreateSweep(const std::string& name, const std::vector<std::string>& modes,
                      int64_t baseline = 0, int models = 0) {
    pb::CreateSweepRequest r;
    r.set_name(name);
    r.mutable_profile()->set_name("sim-2.1");
    r.mutable_profile()->set_body("{}");
    for (const auto& m : modes) r.add_modes(m);
    r.set_baseline_sweep_id(baseline);
    r.set_shard_max_models(5);
    for (int i = 0; i < models; ++i) r.mutable_filter()->add_model_ids("org/m" + std::to_string(i));
    pb::CreateSweepResponse out;
    auto st = sched_stub_->CreateSweep(Ctx().get(), r, &out);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return out.sweep_id();
  }

  // Leases and reports every job until the queue is empty (confirmation reruns included);
  // returns the primary records sent, by model id.
  std::map<std::string, pb::ModelResult> RunSweep(
      const std::vector<std::string>& modes, const Flavor& f,
      std::function<void(pb::ModelResult&)> rerun = nullptr) {
    std::map<std::string, pb::ModelResult> sent;
    for (;;) {
      pb::LeaseShardRequest lq;
      lq.set_worker_id(worker_id_);
      pb::LeaseShardResponse lease;
      EXPECT_TRUE(sched_stub_->LeaseShard(Ctx().get(), lq, &lease).ok());
      if (!lease.has_shard()) return sent;
      pb::ReportResultsRequest rep;
      rep.set_worker_id(worker_id_);
      rep.set_shard_id(lease.shard_id());
      rep.set_lease_token(lease.lease_token());
      rep.set_finish(true);
      for (const auto& job : lease.jobs()) {
        pb::ModelResult r = Record(job, modes, f);
        if (job.run() > 1 && rerun) rerun(r);
        if (job.run() == 1) sent[job.model_id()] = r;
        *rep.add_results() = r;
      }
      pb::ReportResultsResponse rr;
      auto st = sched_stub_->ReportResults(Ctx().get(), rep, &rr);
      EXPECT_TRUE(st.ok()) << st.error_message();
    }
  }

  std::vector<pb::ResultRow> ListAll(int64_t sweep_id) {
    pb::ListResultsRequest lr;
    lr.set_sweep_id(sweep_id);
    lr.set_page_size(5);
    auto ctx = Ctx();
    auto reader = sched_stub_->ListResults(ctx.get(), lr);
    std::vector<pb::ResultRow> rows;
    pb::ResultPage page;
    while (reader->Read(&page)) rows.insert(rows.end(), page.rows().begin(), page.rows().end());
    EXPECT_TRUE(reader->Finish().ok());
    return rows;
  }

  int Summarize() {
    auto s = store::Store::Connect({opts_.db_url});
    EXPECT_TRUE(s.ok());
    auto n = (*s)->SummarizeDoneSweeps(10);
    EXPECT_TRUE(n.ok()) << n.status();
    return n.ok() ? *n : -1;
  }

  int64_t Count(const std::string& sql) {
    pqxx::connection c(opts_.db_url);
    pqxx::nontransaction n(c);
    return n.exec(sql)[0][0].as<int64_t>();
  }

  pb::OpDemandResponse AllOps(int64_t sweep, pb::Mode mode, int page_size) {
    pb::OpDemandResponse all;
    pb::OpDemandRequest r;
    r.set_sweep_id(sweep);
    r.set_mode(mode);
    r.set_page_size(page_size);
    int pages = 0;
    do {
      pb::OpDemandResponse page;
      auto st = query_->OpDemand(Ctx().get(), r, &page);
      EXPECT_TRUE(st.ok()) << st.error_message();
      if (!st.ok() || ++pages > 50) break;
      all.set_models(page.models());
      all.set_models_native(page.models_native());
      for (const auto& o : page.ops()) *all.add_ops() = o;
      r.set_page_token(page.next_page_token());
    } while (!r.page_token().empty());
    return all;
  }

  pb::CompareSweepsResponse AllChanges(int64_t base, int64_t head, int page_size) {
    pb::CompareSweepsResponse all;
    pb::CompareSweepsRequest r;
    r.set_base_sweep_id(base);
    r.set_head_sweep_id(head);
    r.set_page_size(page_size);
    int pages = 0;
    do {
      pb::CompareSweepsResponse page;
      auto st = query_->CompareSweeps(Ctx().get(), r, &page);
      EXPECT_TRUE(st.ok()) << st.error_message();
      if (!st.ok() || ++pages > 50) break;
      if (pages == 1) all = page;
      else for (const auto& c : page.changes()) *all.add_changes() = c;
      r.set_page_token(page.next_page_token());
    } while (!r.page_token().empty());
    all.clear_next_page_token();
    return all;
  }

  SchedulerOptions opts_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<pb::Scheduler::Stub> sched_stub_;
  std::unique_ptr<pb::Query::Stub> query_;
  int64_t worker_id_ = 0;
};

const std::vector<std::string> kEagerCompile = {"eager", "compile"};

// The base sweep's head: models 0 and 6 regress deterministically (eager crash, compile
// fail_accuracy), model 4 regresses flakily (its first rerun passes), model 5 is fixed.
Flavor HeadFlavor() {
  Flavor f;
  f.eager = {{0, pb::VERDICT_CRASH}, {4, pb::VERDICT_CRASH}, {5, pb::VERDICT_PASS}};
  f.compile = {{6, pb::VERDICT_FAIL_ACCURACY}};
  f.seed = 1;
  return f;
}
void FlakyRerun(pb::ModelResult& r) {
  if (r.model_id() == "org/m4" && r.run() == 2) r.mutable_modes(0)->set_status(pb::VERDICT_PASS);
}

TEST_F(QueryServiceTest, SummaryEqualsTheBuilderOverListResultsAndKeptEqualsLive) {
  const int64_t id = CreateSweep("a", kEagerCompile);
  RunSweep(kEagerCompile, Flavor());
  const auto rows = ListAll(id);
  ASSERT_EQ(rows.size(), static_cast<size_t>(kModels));
  DefaultFieldComparator approx;
  approx.set_float_comparison(DefaultFieldComparator::APPROXIMATE);
  approx.SetDefaultFractionAndMargin(1e-12, 1e-12);  // sums taken in another order
  std::map<pb::GroupBy, pb::Summary> live;
  for (pb::GroupBy by : {pb::GROUP_BY_TASK, pb::GROUP_BY_FAMILY, pb::GROUP_BY_ARCH}) {
    pb::GetSummaryRequest r;
    r.set_sweep_id(id);
    r.set_group_by(by);
    pb::Summary s;
    auto st = query_->GetSummary(Ctx().get(), r, &s);
    ASSERT_TRUE(st.ok()) << st.error_message();
    query::SummaryBuilder b(by, kEagerCompile);
    for (const auto& row : rows) b.Add(row);
    pb::Summary want = b.Build();
    want.set_sweep_id(id);
    want.set_state("done");
    MessageDifferencer d;
    d.set_field_comparator(&approx);
    std::string diff;
    d.ReportDifferencesToString(&diff);
    EXPECT_TRUE(d.Compare(want, s)) << diff;
    live[by] = s;
  }
  EXPECT_EQ(live[pb::GROUP_BY_TASK].rows_size(), 2);
  EXPECT_EQ(live[pb::GROUP_BY_ARCH].classes(), 3);
  // The same questions before and after the sweep's answers are kept.
  const auto ops_live = AllOps(id, pb::MODE_COMPILE, 1000);
  pb::GraphBreaksRequest gb;
  gb.set_sweep_id(id);
  pb::GraphBreaksResponse breaks_live, breaks_kept;
  ASSERT_TRUE(query_->GraphBreaks(Ctx().get(), gb, &breaks_live).ok());
  const auto cmp_live = AllChanges(id, id, 1000);
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_facts"), 0);
  EXPECT_EQ(Summarize(), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_facts WHERE sweep_id = " + std::to_string(id)), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_verdicts"), kModels);
  for (const auto& [by, want] : live) {
    pb::GetSummaryRequest r;
    r.set_sweep_id(id);
    r.set_group_by(by);
    pb::Summary s;
    ASSERT_TRUE(query_->GetSummary(Ctx().get(), r, &s).ok());
    EXPECT_TRUE(MessageDifferencer::Equals(want, s)) << s.DebugString();
  }
  EXPECT_TRUE(MessageDifferencer::Equals(ops_live, AllOps(id, pb::MODE_COMPILE, 1000)));
  ASSERT_TRUE(query_->GraphBreaks(Ctx().get(), gb, &breaks_kept).ok());
  EXPECT_TRUE(MessageDifferencer::Equals(breaks_live, breaks_kept));
  EXPECT_EQ(breaks_kept.models_with_breaks(), 7);  // i % 5 in {1, 2, 3}: 1,2,3,6,7,8,11
  EXPECT_TRUE(MessageDifferencer::Equals(cmp_live, AllChanges(id, id, 1000)));
}

// Brute force: what blocks each model in `mode`, straight from the records sent.
pb::OpDemandResponse Recount(const std::map<std::string, pb::ModelResult>& sent, pb::Mode mode) {
  struct Acc {
    int64_t blocked = 0, fallback = 0, brk = 0, alone = 0, calls = 0;
    double ms = 0;
  };
  std::map<std::string, Acc> acc;
  const std::regex op_re("aten::[A-Za-z0-9_.]+");
  pb::OpDemandResponse out;
  for (const auto& [id, r] : sent) {
    std::set<std::string> fb, brk, blockers;
    for (const auto& u : r.ops()) {
      if (!u.native()) fb.insert(u.op());
    }
    for (const auto& v : r.modes()) {
      if (mode != pb::MODE_COMPILE || v.mode() != pb::MODE_COMPILE) continue;
      for (const auto& reason : v.break_reasons()) {
        std::smatch m;
        brk.insert(std::regex_search(reason, m, op_re) ? m.str() : "");
      }
    }
    blockers = fb;
    blockers.insert(brk.begin(), brk.end());
    out.set_models(out.models() + 1);
    if (blockers.empty()) out.set_models_native(out.models_native() + 1);
    for (const auto& op : blockers) {
      if (op.empty()) continue;
      Acc& a = acc[op];
      ++a.blocked;
      a.fallback += fb.count(op);
      a.brk += brk.count(op);
      a.alone += blockers.size() == 1;
      for (const auto& u : r.ops()) {
        if (u.op() == op && !u.native()) {
          a.calls += u.calls();
          a.ms += u.ms();
        }
      }
    }
  }
  std::vector<std::pair<std::string, Acc>> ranked(acc.begin(), acc.end());
  std::sort(ranked.begin(), ranked.end(), [](const auto& x, const auto& y) {
    return std::make_tuple(-x.second.blocked, -x.second.alone, x.first) <
           std::make_tuple(-y.second.blocked, -y.second.alone, y.first);
  });
  for (const auto& [op, a] : ranked) {
    auto* row = out.add_ops();
    row->set_op(op);
    row->set_models_blocked(a.blocked);
    row->set_models_fallback(a.fallback);
    row->set_models_break(a.brk);
    row->set_blocks_alone(a.alone);
    row->set_fallback_calls(a.calls);
    row->set_fallback_ms(a.ms);
  }
  return out;
}

TEST_F(QueryServiceTest, OpDemandBlocksAloneMatchesABruteForceRecount) {
  const int64_t id = CreateSweep("a", kEagerCompile);
  const auto sent = RunSweep(kEagerCompile, Flavor());
  for (pb::Mode mode : {pb::MODE_EAGER, pb::MODE_COMPILE}) {
    const pb::OpDemandResponse want = Recount(sent, mode);
    const pb::OpDemandResponse full = AllOps(id, mode, 1000);
    const pb::OpDemandResponse paged = AllOps(id, mode, 1);  // one op a page
    EXPECT_EQ(full.models(), want.models());
    EXPECT_EQ(full.models_native(), want.models_native()) << proto::ModeName(mode);
    ASSERT_EQ(full.ops_size(), want.ops_size()) << proto::ModeName(mode);
    ASSERT_EQ(paged.ops_size(), want.ops_size());
    for (int k = 0; k < want.ops_size(); ++k) {
      const auto& got = full.ops(k);
      const auto& w = want.ops(k);
      EXPECT_EQ(got.op(), w.op()) << k;
      EXPECT_EQ(got.models_blocked(), w.models_blocked()) << w.op();
      EXPECT_EQ(got.models_fallback(), w.models_fallback()) << w.op();
      EXPECT_EQ(got.models_break(), w.models_break()) << w.op();
      EXPECT_EQ(got.blocks_alone(), w.blocks_alone()) << w.op();
      EXPECT_EQ(got.fallback_calls(), w.fallback_calls()) << w.op();
      EXPECT_NEAR(got.fallback_ms(), w.fallback_ms(), 1e-9) << w.op();
      EXPECT_TRUE(MessageDifferencer::Equals(got, paged.ops(k))) << w.op();
      ASSERT_GT(got.example_models_size(), 0);
      if (w.blocks_alone() > 0) {
        const auto& ex = sent.at(got.example_models(0));  // blocked alone comes first
        EXPECT_EQ(Recount({{ex.model_id(), ex}}, mode).ops(0).blocks_alone(), 1) << w.op();
      }
    }
    // The figures: cumsum blocks 1,2,5,6,9,10 in eager; alone for 1, 5, 9 (i % 4 == 1).
    if (mode == pb::MODE_EAGER) {
      EXPECT_EQ(full.ops(0).op(), "aten::cumsum");
      EXPECT_EQ(full.ops(0).models_blocked(), 6);
      EXPECT_EQ(full.ops(0).blocks_alone(), 3);
    }
  }
}

TEST_F(QueryServiceTest, CompareFlipsMatchTheTwoListResultsStreamsAndGateCountsDeterministic) {
  const int64_t base = CreateSweep("base", kEagerCompile);
  RunSweep(kEagerCompile, Flavor());
  const int64_t head = CreateSweep("head", kEagerCompile, base);
  RunSweep(kEagerCompile, HeadFlavor(), FlakyRerun);
  // Flips computed here from the two streams.
  std::map<std::string, pb::ResultRow> b, h;
  for (auto& r : ListAll(base)) b[r.model_id()] = r;
  for (auto& r : ListAll(head)) h[r.model_id()] = r;
  std::vector<std::tuple<std::string, int, std::string>> want;  // model, kind, mode
  for (const auto& [id, br] : b) {
    const auto& hr = h.at(id);
    for (const std::string mode : {"eager", "compile"}) {
      const bool bp = br.status().at(mode) == "pass", hp = hr.status().at(mode) == "pass";
      if (bp != hp) {
        want.emplace_back(id, bp ? pb::ModelChange::KIND_REGRESSED : pb::ModelChange::KIND_FIXED,
                          mode);
      }
    }
  }
  ASSERT_EQ(want.size(), 4u);
  const pb::CompareSweepsResponse got = AllChanges(base, head, 1);
  std::vector<std::tuple<std::string, int, std::string>> flips;
  for (const auto& c : got.changes()) {
    flips.emplace_back(c.model_id(), c.kind(), proto::ModeName(c.mode()));
  }
  std::sort(want.begin(), want.end());
  EXPECT_EQ(flips, want);
  EXPECT_EQ(got.regressed(), 3);
  EXPECT_EQ(got.fixed(), 1);
  EXPECT_EQ(got.common_models(), kModels);
  ASSERT_GE(got.groups_size(), 3);  // fill-mask, text-generation, Total, Class-weighted
  for (const auto& c : got.changes()) {
    if (c.kind() != pb::ModelChange::KIND_REGRESSED) continue;
    EXPECT_EQ(c.confirmation(), c.model_id() == "org/m4" ? "flaky" : "deterministic");
  }
  // The gate counts deterministic flips only and names the tasks that fell.
  pb::GateRequest g;
  g.set_sweep_id(head);
  auto* rules = g.mutable_rules();
  rules->set_baseline_sweep_id(base);
  rules->set_max_new_failures(1);
  rules->add_forbid("crash");
  (*rules->mutable_min_by_task())["text-generation"].set_eager(90);
  (*rules->mutable_min_by_task())["fill-mask"].set_eager(50);
  pb::GateResponse gr;
  ASSERT_TRUE(query_->Gate(Ctx().get(), g, &gr).ok());
  EXPECT_FALSE(gr.pass());
  std::map<std::string, pb::GateCheck> failed;
  for (const auto& c : gr.failures()) failed[c.rule() + "/" + c.group()] = c;
  EXPECT_EQ(failed.size(), 3u) << gr.DebugString();
  EXPECT_DOUBLE_EQ(failed["max_new_failures/"].measured(), 2);  // m0 eager, m6 compile
  EXPECT_DOUBLE_EQ(failed["forbid/crash"].measured(), 2);       // m0, m4
  // text-generation (even ids): eager passes 2, 6, 8, 10 of 0..10 -> 4/6.
  EXPECT_NEAR(failed["min_by_task.eager/text-generation"].measured(), 400.0 / 6, 1e-9);
  ASSERT_EQ(gr.flaky_size(), 1);
  EXPECT_EQ(gr.flaky(0).model_id(), "org/m4");
  // The base sweep itself passes a no-crash, 80% eager gate.
  pb::GateRequest g0;
  g0.set_sweep_id(base);
  g0.mutable_rules()->add_forbid("crash");
  g0.mutable_rules()->mutable_min()->set_eager(80);
  ASSERT_TRUE(query_->Gate(Ctx().get(), g0, &gr).ok());
  EXPECT_TRUE(gr.pass()) << gr.DebugString();
  // max_new_failures counts against the sweep's own baseline: 0 means it, the same answer...
  rules->set_baseline_sweep_id(0);
  pb::GateResponse own;
  grpc::Status own_st = query_->Gate(Ctx().get(), g, &own);
  ASSERT_TRUE(own_st.ok()) << own_st.error_message();
  EXPECT_EQ(own.failures_size(), 3) << own.DebugString();
  // ...and another sweep (whose flips no rerun confirmed) or none at all is refused, named.
  rules->set_baseline_sweep_id(head);
  grpc::Status st = query_->Gate(Ctx().get(), g, &gr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().rfind("rules.baseline_sweep_id: ", 0), 0u) << st.error_message();
  g0.mutable_rules()->set_max_new_failures(0);
  st = query_->Gate(Ctx().get(), g0, &gr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().rfind("rules.max_new_failures: ", 0), 0u) << st.error_message();
}

// Two sweeps over different samples (9 of 12 models in the base, all 12 in the head, the
// other way round for a second pair): the comparison's flips, appeared/disappeared models and
// group deltas equal a recount from the two ListResults streams, whether answered live or from
// the kept answers (packed verdict codes).
TEST_F(QueryServiceTest, CompareOfDifferentSamplesMatchesARecountLiveAndKept) {
  const int64_t small = CreateSweep("small", kEagerCompile, 0, 9);
  RunSweep(kEagerCompile, Flavor());
  const int64_t full = CreateSweep("full", kEagerCompile);
  RunSweep(kEagerCompile, HeadFlavor());
  DefaultFieldComparator approx;
  approx.set_float_comparison(DefaultFieldComparator::APPROXIMATE);
  approx.SetDefaultFractionAndMargin(1e-12, 1e-12);  // group sums less the others' models
  std::map<std::pair<int64_t, int64_t>, pb::CompareSweepsResponse> live;
  for (auto [base, head] : {std::pair(small, full), std::pair(full, small)}) {
    std::map<std::string, pb::ResultRow> b, h;
    for (auto& r : ListAll(base)) b[r.model_id()] = r;
    for (auto& r : ListAll(head)) h[r.model_id()] = r;
    // The recount: flips per mode of the common models, the others by kind.
    std::vector<std::tuple<std::string, int, int>> want;  // model, kind, mode
    query::SummaryBuilder bsum(pb::GROUP_BY_ARCH, kEagerCompile),
        hsum(pb::GROUP_BY_ARCH, kEagerCompile);
    for (const auto& [id, br] : b) {
      auto it = h.find(id);
      if (it == h.end()) {
        want.emplace_back(id, pb::ModelChange::KIND_DISAPPEARED, pb::MODE_UNSPECIFIED);
        continue;
      }
      bsum.Add(br);
      hsum.Add(it->second);
      for (const std::string& mode : kEagerCompile) {
        const bool bp = br.status().at(mode) == "pass";
        const bool hp = it->second.status().at(mode) == "pass";
        if (bp != hp) {
          want.emplace_back(id, bp ? pb::ModelChange::KIND_REGRESSED : pb::ModelChange::KIND_FIXED,
                            *proto::ModeFromName(mode));
        }
      }
    }
    for (const auto& [id, hr] : h) {
      if (!b.count(id)) want.emplace_back(id, pb::ModelChange::KIND_APPEARED, pb::MODE_UNSPECIFIED);
    }
    std::sort(want.begin(), want.end());
    pb::CompareSweepsRequest r;
    r.set_base_sweep_id(base);
    r.set_head_sweep_id(head);
    r.set_group_by(pb::GROUP_BY_ARCH);
    r.set_page_size(1000);
    pb::CompareSweepsResponse got;
    auto st = query_->CompareSweeps(Ctx().get(), r, &got);
    ASSERT_TRUE(st.ok()) << st.error_message();
    std::vector<std::tuple<std::string, int, int>> changes;
    for (const auto& c : got.changes()) changes.emplace_back(c.model_id(), c.kind(), c.mode());
    EXPECT_EQ(changes, want);
    EXPECT_EQ(got.common_models(), 9);
    EXPECT_EQ(got.appeared() + got.disappeared(), 3);
    const auto deltas = query::Deltas(bsum.Build(), hsum.Build());
    ASSERT_EQ(got.groups_size(), static_cast<int>(deltas.size()));
    for (size_t k = 0; k < deltas.size(); ++k) {
      MessageDifferencer d;
      d.set_field_comparator(&approx);
      std::string diff;
      d.ReportDifferencesToString(&diff);
      EXPECT_TRUE(d.Compare(deltas[k], got.groups(static_cast<int>(k)))) << diff;
    }
    live[{base, head}] = got;
  }
  ASSERT_EQ(Summarize(), 2);
  for (const auto& [pair, want] : live) {
    pb::CompareSweepsRequest r;
    r.set_base_sweep_id(pair.first);
    r.set_head_sweep_id(pair.second);
    r.set_group_by(pb::GROUP_BY_ARCH);
    r.set_page_size(1000);
    pb::CompareSweepsResponse kept;
    ASSERT_TRUE(query_->CompareSweeps(Ctx().get(), r, &kept).ok());
    MessageDifferencer d;
    d.set_field_comparator(&approx);
    std::string diff;
    d.ReportDifferencesToString(&diff);
    EXPECT_TRUE(d.Compare(want, kept)) << diff;
  }
}

TEST_F(QueryServiceTest, ModelHistoryRoundTripsEveryFieldAcrossThreeSweeps) {
  const std::vector<std::string> all = {"eager", "compile", "train"};
  std::vector<std::map<std::string, pb::ModelResult>> sent;
  std::vector<int64_t> ids;
  for (int k = 0; k < 3; ++k) {
    ids.push_back(CreateSweep("s" + std::to_string(k), all));
    Flavor f;
    f.seed = k;
    sent.push_back(RunSweep(all, f));
  }
  ASSERT_EQ(Summarize(), 3);
  pb::GetModelRequest r;
  r.set_model_id("org/m7");
  pb::ModelHistory h;
  auto st = query_->GetModel(Ctx().get(), r, &h);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(h.task(), "fill-mask");
  EXPECT_EQ(h.arch(), "GPT2LMHeadModel");
  ASSERT_EQ(h.sweeps_size(), 3);
  DefaultFieldComparator nan_equal;
  nan_equal.set_treat_nan_as_equal(true);
  for (int k = 0; k < 3; ++k) {
    const auto& rec = h.sweeps(k);
    EXPECT_EQ(rec.sweep().sweep_id(), ids[2 - k]);  // newest first
    EXPECT_EQ(rec.sweep().state(), "done");
    EXPECT_EQ(rec.sweep().models_recorded(), kModels);
    pb::ModelResult want = sent[2 - k].at("org/m7");
    for (auto& v : *want.mutable_modes()) {
      v.set_error_signature(common::ErrorSignature(v.error()));
    }
    MessageDifferencer d;
    d.set_field_comparator(&nan_equal);
    std::string diff;
    d.ReportDifferencesToString(&diff);
    EXPECT_TRUE(d.Compare(want, rec.result())) << diff;
  }
  r.set_last(2);
  ASSERT_TRUE(query_->GetModel(Ctx().get(), r, &h).ok());
  EXPECT_EQ(h.sweeps_size(), 2);
}

TEST_F(QueryServiceTest, ErrorsNameTheFieldAndPrunedSweepsAreNamed) {
  const int64_t id = CreateSweep("a", kEagerCompile);
  RunSweep(kEagerCompile, Flavor());
  pb::GetSummaryRequest s;
  s.set_sweep_id(id);
  s.mutable_filter()->add_tasks("text-generatio");
  pb::Summary sum;
  auto st = query_->GetSummary(Ctx().get(), s, &sum);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message(), "filter.tasks[0]: no model of sweep " + std::to_string(id) +
                                    " has task 'text-generatio'");
  s.clear_filter();
  s.set_sweep_id(9999);
  st = query_->GetSummary(Ctx().get(), s, &sum);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "sweep_id: no sweep 9999");
  EXPECT_EQ(query_->GetSummary(Ctx("").get(), s, &sum).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  pb::OpDemandRequest o;
  o.set_sweep_id(id);
  o.set_page_token("not-a-token");
  pb::OpDemandResponse od;
  st = query_->OpDemand(Ctx().get(), o, &od);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().substr(0, 11), "page_token:");
  pb::GateRequest g;
  g.set_sweep_id(id);
  g.mutable_rules()->add_forbid("crashh");
  pb::GateResponse gr;
  st = query_->Gate(Ctx().get(), g, &gr);
  EXPECT_EQ(st.error_message(), "rules.forbid[0]: unknown status 'crashh'");
  pb::GetModelRequest m;
  m.set_model_id("org/nope");
  pb::ModelHistory mh;
  EXPECT_EQ(query_->GetModel(Ctx().get(), m, &mh).error_code(), grpc::StatusCode::NOT_FOUND);
  // Pruned: kept answers go with the partitions; every reader names the sweep.
  ASSERT_EQ(Summarize(), 1);
  auto store = store::Store::Connect({opts_.db_url});
  ASSERT_TRUE(store.ok());
  store::PruneRequest pr;
  pr.sweep_ids = {id};
  ASSERT_TRUE((*store)->PruneSweeps(pr).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_groups"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_op_demand"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_facts"), 0);
  s.set_sweep_id(id);
  st = query_->GetSummary(Ctx().get(), s, &sum);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(st.error_message().find("sweep " + std::to_string(id) + " was pruned"),
            std::string::npos);
  o.clear_page_token();
  EXPECT_EQ(query_->OpDemand(Ctx().get(), o, &od).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  pb::CompareSweepsRequest c;
  c.set_base_sweep_id(id);
  c.set_head_sweep_id(id);
  pb::CompareSweepsResponse cr;
  st = query_->CompareSweeps(Ctx().get(), c, &cr);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(st.error_message().substr(0, 14), "base_sweep_id:");
}

TEST_F(QueryServiceTest, ListSweepsPagesConcatenateNewestFirst) {
  std::vector<int64_t> ids;
  for (int k = 0; k < 5; ++k) ids.push_back(CreateSweep(k % 2 ? "nightly" : "adhoc", {"eager"}, 0, 1));
  std::reverse(ids.begin(), ids.end());
  pb::ListSweepsRequest r;
  r.set_page_size(2);
  std::vector<int64_t> got;
  int pages = 0;
  do {
    pb::ListSweepsResponse page;
    ASSERT_TRUE(query_->ListSweeps(Ctx().get(), r, &page).ok());
    ++pages;
    for (const auto& s : page.sweeps()) {
      got.push_back(s.sweep_id());
      EXPECT_EQ(s.profile(), "sim-2.1");
      EXPECT_EQ(s.models_expected(), 1);
      EXPECT_TRUE(s.has_created_at());
    }
    r.set_page_token(page.next_page_token());
  } while (!r.page_token().empty() && pages < 10);
  EXPECT_EQ(got, ids);
  EXPECT_EQ(pages, 3);
  pb::ListSweepsRequest f;
  f.set_name_contains("night");
  f.set_state("running");
  pb::ListSweepsResponse page;
  ASSERT_TRUE(query_->ListSweeps(Ctx().get(), f, &page).ok());
  EXPECT_EQ(page.sweeps_size(), 2);
  f.set_state("done");
  ASSERT_TRUE(query_->ListSweeps(Ctx().get(), f, &page).ok());
  EXPECT_EQ(page.sweeps_size(), 0);
  pb::ListSweepsRequest t;
  t.mutable_created_after()->set_seconds(4102444800);  // 2100-01-01: none yet
  ASSERT_TRUE(query_->ListSweeps(Ctx().get(), t, &page).ok());
  EXPECT_EQ(page.sweeps_size(), 0);
  t.clear_created_after();
  t.mutable_created_before()->set_seconds(4102444800);
  ASSERT_TRUE(query_->ListSweeps(Ctx().get(), t, &page).ok());
  EXPECT_EQ(page.sweeps_size(), 5);
}

TEST_F(QueryServiceTest, WatchSweepStreamsUntilDone) {
  const int64_t id = CreateSweep("a", {"eager"});
  pb::WatchSweepRequest r;
  r.set_sweep_id(id);
  r.set_interval_ms(100);
  auto ctx = Ctx();
  auto reader = query_->WatchSweep(ctx.get(), r);
  pb::SweepProgress p;
  ASSERT_TRUE(reader->Read(&p));
  EXPECT_EQ(p.state(), "running");
  EXPECT_EQ(p.models_recorded(), 0);
  RunSweep({"eager"}, Flavor());
  int messages = 1;
  while (reader->Read(&p)) ++messages;
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(p.state(), "done");
  EXPECT_EQ(p.models_recorded(), kModels);
  EXPECT_GE(messages, 2);
  // A sweep that has ended answers one message.
  auto ctx2 = Ctx();
  auto again = query_->WatchSweep(ctx2.get(), r);
  messages = 0;
  while (again->Read(&p)) ++messages;
  EXPECT_TRUE(again->Finish().ok());
  EXPECT_EQ(messages, 1);
}

TEST_F(QueryServiceTest, WatchSweepEndsOnClientCancelAndOnShutdown) {
  const int64_t id = CreateSweep("a", {"eager"});
  pb::WatchSweepRequest r;
  r.set_sweep_id(id);
  r.set_interval_ms(60000);  // a long wait: both ends must cut it short
  auto ctx = Ctx();
  auto reader = query_->WatchSweep(ctx.get(), r);
  pb::SweepProgress p;
  ASSERT_TRUE(reader->Read(&p));
  ctx->TryCancel();
  EXPECT_FALSE(reader->Read(&p));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);

  auto ctx2 = Ctx();
  auto open = query_->WatchSweep(ctx2.get(), r);
  ASSERT_TRUE(open->Read(&p));
  const auto t0 = std::chrono::steady_clock::now();
  std::thread stop([&] { sched_->Shutdown(); });
  EXPECT_FALSE(open->Read(&p));
  EXPECT_EQ(open->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
  stop.join();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST_F(QueryServiceTest, TheTickerKeepsDoneSweepsAnswers) {
  const int64_t id = CreateSweep("a", {"eager"});
  RunSweep({"eager"}, Flavor());
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_facts"), 0);
  sched_->Shutdown();
  opts_.tick_s = 0.05;
  auto s = Scheduler::Start(opts_);
  ASSERT_TRUE(s.ok()) << s.status();
  sched_ = std::move(*s);
  // The ticker queues the done-sweep hook on the query pool; wait for its commit (bounded).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (Count("SELECT count(*) FROM sweep_facts") == 0 &&
         std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_facts WHERE sweep_id = " + std::to_string(id)), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_verdicts"), kModels);
  EXPECT_EQ(Count("SELECT models FROM sweep_facts"), kModels);
}

}  // namespace
}  // namespace ts::scheduler
