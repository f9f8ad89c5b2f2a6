// Issue 10 through the scheduler over real gRPC on loopback and a throwaway PostgreSQL: a
// sweep's audit_ops from CreateSweep to LeaseShard and SweepInfo, suspects refused with the
// field named (nothing stored), and SuspectOps' ranking, counts, mode filter, paging and
// errors on records written here whose answer is worked out by hand.
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <pqxx/pqxx>

#include "services/scheduler/scheduler.h"
#include "services/scheduler/scheduler_test_util.h"
#include "services/store/store.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

namespace pb = ::touchstone::v1;

constexpr int kModels = 10;
constexpr double kNonFinite = 1e300;

struct Sus {
  const char* op;
  double ratio;
};
// One mode of a record: its status, whether it was audited, its suspects in order.
struct ModeCase {
  pb::Verdict status = pb::VERDICT_PASS;
  bool audited = false;
  std::vector<Sus> suspects;
};
using Case = std::map<pb::Mode, ModeCase>;  // a mode left out passes, not audited

const pb::Verdict kFail = pb::VERDICT_FAIL_ACCURACY;
const pb::Verdict kPass = pb::VERDICT_PASS;

// The records, by model index (org/sN). The expectations below are worked out from them.
Case CaseOf(int i) {
  switch (i) {
    case 0: return {{pb::MODE_EAGER, {kFail, true, {{"aten::gelu", 5}, {"aten::add.Tensor", 2}}}}};
    case 1: return {{pb::MODE_EAGER, {kFail, true, {{"aten::gelu", 3}}}},
                    {pb::MODE_COMPILE, {kFail, true, {{"aten::gelu", kNonFinite}}}}};
    case 2: return {{pb::MODE_EAGER, {kFail, true, {}}}};  // failing, no suspect found
    case 3: return {{pb::MODE_EAGER, {kPass, true, {{"aten::gelu", 1.2}}}},
                    {pb::MODE_COMPILE, {kPass, true, {{"aten::native_layer_norm", 1.5}}}}};
    case 4: return {{pb::MODE_EAGER, {kPass, true, {}}}};  // audited, clean
    case 6: return {{pb::MODE_TRAIN, {kFail, true, {{"aten::_softmax_backward_data", 4.1},
                                                     {"aten::native_layer_norm_backward", 2}}}}};
    case 7: return {{pb::MODE_EAGER, {pb::VERDICT_CRASH, false, {}}},
                    {pb::MODE_COMPILE, {kFail, true, {{"aten::add.Tensor", 2.5},
                                                      {"aten::gelu", 1.1}}}}};
    default: return {};
  }
}

pb::ModelResult Record(const pb::Job& job) {
  const int i = std::stoi(job.model_id().substr(5));
  const Case c = CaseOf(i);
  pb::ModelResult r;
  r.set_job_id(job.job_id());
  r.set_model_id(job.model_id());
  r.set_run(job.run());
  r.set_opcov_ratio(1);
  for (pb::Mode mode : {pb::MODE_EAGER, pb::MODE_COMPILE, pb::MODE_TRAIN}) {
    auto it = c.find(mode);
    const ModeCase mc = it == c.end() ? ModeCase() : it->second;
    pb::ModeVerdict* v = r.add_modes();
    v->set_mode(mode);
    v->set_status(mc.status);
    v->set_audited(mc.audited);
    for (const Sus& s : mc.suspects) {
      pb::Suspect* p = v->add_suspects();
      p->set_op(s.op);
      p->set_shapes("[2,8,64]");
      p->set_dtype("float32");
      p->set_ratio(s.ratio);
      p->set_calls(2);
      p->set_total_calls(6);
    }
  }
  return r;
}

// An expected row: op, failed, named, warned, max ratio, examples.
struct Row {
  std::string op;
  int64_t failed, named, warned;
  double max_ratio;
  std::vector<std::string> examples;
};

class SuspectOpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    opts_.db_url = TestDatabaseUrl();
    ASSERT_FALSE(opts_.db_url.empty());
    ASSERT_TRUE(opts_.tokens.Add(common::Role::kAdmin, "admin-token").ok());
    ASSERT_TRUE(opts_.tokens.Add(common::Role::kReader, "reader-token").ok());
    ASSERT_TRUE(opts_.tokens.Add(common::Role::kWorker, "worker-token").ok());
    opts_.tick_s = 3600;
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
      m->set_id("org/s" + std::to_string(i));
      m->set_task("text-generation");
      m->set_arch("GPT2LMHeadModel");
      m->set_family("gpt2");
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

  std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token = "admin-token") {
    return BearerContext(token);
  }

  int64_t CreateSweep(bool audit_ops) {
    pb::CreateSweepRequest r;
    r.set_name(audit_ops ? "audited" : "plain");
    r.mutable_profile()->set_name("sim-2.1");
    r.mutable_profile()->set_body("{}");
    r.set_shard_max_models(kModels);
    r.set_audit_ops(audit_ops);
    pb::CreateSweepResponse out;
    auto st = sched_stub_->CreateSweep(Ctx().get(), r, &out);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return out.sweep_id();
  }

  pb::LeaseShardResponse Lease() {
    pb::LeaseShardRequest lq;
    lq.set_worker_id(worker_id_);
    pb::LeaseShardResponse lease;
    auto st = sched_stub_->LeaseShard(Ctx().get(), lq, &lease);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return lease;
  }

  grpc::Status Report(const pb::LeaseShardResponse& lease,
                      const std::vector<pb::ModelResult>& results) {
    pb::ReportResultsRequest rep;
    rep.set_worker_id(worker_id_);
    rep.set_shard_id(lease.shard_id());
    rep.set_lease_token(lease.lease_token());
    rep.set_finish(true);
    for (const auto& r : results) *rep.add_results() = r;
    pb::ReportResultsResponse rr;
    return sched_stub_->ReportResults(Ctx().get(), rep, &rr);
  }

  // Leases the sweep's one shard and reports every model's record (CaseOf).
  void RunSweep() {
    const pb::LeaseShardResponse lease = Lease();
    ASSERT_TRUE(lease.has_shard());
    std::vector<pb::ModelResult> results;
    for (const auto& job : lease.jobs()) results.push_back(Record(job));
    auto st = Report(lease, results);
    ASSERT_TRUE(st.ok()) << st.error_message();
  }

  grpc::Status Suspects(int64_t sweep, pb::Mode mode, int page_size, const std::string& token,
                        pb::SuspectOpsResponse* out, const std::string& auth = "reader-token") {
    pb::SuspectOpsRequest r;
    r.set_sweep_id(sweep);
    r.set_mode(mode);
    r.set_page_size(page_size);
    r.set_page_token(token);
    return query_->SuspectOps(Ctx(auth).get(), r, out);
  }

  // Every page of the answer, `page_size` ops a page; the counts of the first page.
  pb::SuspectOpsResponse AllPages(int64_t sweep, pb::Mode mode, int page_size) {
    pb::SuspectOpsResponse all;
    std::string token;
    for (int pages = 1;; ++pages) {
      pb::SuspectOpsResponse page;
      auto st = Suspects(sweep, mode, page_size, token, &page);
      EXPECT_TRUE(st.ok()) << st.error_message();
      if (!st.ok() || pages > 20) break;
      if (pages == 1) {
        all = page;
      } else {
        for (const auto& o : page.ops()) *all.add_ops() = o;
      }
      EXPECT_LE(page.ops_size(), page_size);
      token = page.next_page_token();
      if (token.empty()) break;
    }
    all.clear_next_page_token();
    return all;
  }

  static void ExpectRows(const pb::SuspectOpsResponse& got, const std::vector<Row>& want) {
    ASSERT_EQ(got.ops_size(), static_cast<int>(want.size())) << got.DebugString();
    for (size_t k = 0; k < want.size(); ++k) {
      const pb::SuspectOpsRow& o = got.ops(static_cast<int>(k));
      EXPECT_EQ(o.op(), want[k].op) << k;
      EXPECT_EQ(o.models_failed(), want[k].failed) << o.op();
      EXPECT_EQ(o.models_named(), want[k].named) << o.op();
      EXPECT_EQ(o.models_warned(), want[k].warned) << o.op();
      EXPECT_EQ(o.max_ratio(), want[k].max_ratio) << o.op();
      EXPECT_EQ(std::vector<std::string>(o.example_models().begin(), o.example_models().end()),
                want[k].examples)
          << o.op();
    }
  }

  int64_t Count(const std::string& sql) {
    pqxx::connection c(opts_.db_url);
    pqxx::nontransaction n(c);
    return n.exec(sql)[0][0].as<int64_t>();
  }

  SchedulerOptions opts_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<pb::Scheduler::Stub> sched_stub_;
  std::unique_ptr<pb::Query::Stub> query_;
  int64_t worker_id_ = 0;
};

TEST_F(SuspectOpsTest, AuditOpsGoesFromCreateSweepToTheLeaseAndTheSweepInfo) {
  const int64_t audited = CreateSweep(true);
  pb::LeaseShardResponse lease = Lease();
  ASSERT_TRUE(lease.has_shard());
  EXPECT_EQ(lease.sweep_id(), audited);
  EXPECT_TRUE(lease.audit_ops());
  pb::CancelSweepRequest cancel;
  cancel.set_sweep_id(audited);
  pb::SweepProgress cancelled;
  ASSERT_TRUE(sched_stub_->CancelSweep(Ctx().get(), cancel, &cancelled).ok());
  const int64_t plain = CreateSweep(false);
  lease = Lease();
  ASSERT_TRUE(lease.has_shard());
  EXPECT_EQ(lease.sweep_id(), plain);
  EXPECT_FALSE(lease.audit_ops());
  pb::ListSweepsRequest lr;
  pb::ListSweepsResponse sweeps;
  ASSERT_TRUE(query_->ListSweeps(Ctx("reader-token").get(), lr, &sweeps).ok());
  std::map<int64_t, bool> shown;
  for (const auto& s : sweeps.sweeps()) shown[s.sweep_id()] = s.audit_ops();
  EXPECT_EQ(shown, (std::map<int64_t, bool>{{audited, true}, {plain, false}}));
}

TEST_F(SuspectOpsTest, ABadSuspectIsRefusedByFieldAndStoresNothing) {
  CreateSweep(true);
  const pb::LeaseShardResponse lease = Lease();
  ASSERT_TRUE(lease.has_shard());
  std::vector<pb::ModelResult> results;
  for (const auto& job : lease.jobs()) results.push_back(Record(job));
  size_t s1 = 0;
  while (s1 < results.size() && results[s1].model_id() != "org/s1") ++s1;
  ASSERT_LT(s1, results.size());
  const std::string at = "results[" + std::to_string(s1) + "].modes[1].suspects[0].";
  const std::pair<std::function<void(pb::Suspect&)>, std::string> cases[] = {
      {[](pb::Suspect& s) { s.clear_op(); }, at + "op: empty"},
      {[](pb::Suspect& s) { s.set_calls(-2); }, at + "calls: must be >= 0"},
      {[](pb::Suspect& s) { s.set_ratio(std::nan("")); }, at + "ratio: must be finite"},
  };
  for (const auto& [mutate, prefix] : cases) {
    std::vector<pb::ModelResult> bad = results;
    mutate(*bad[s1].mutable_modes(1)->mutable_suspects(0));  // org/s1, compile
    grpc::Status st = Report(lease, bad);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << prefix;
    EXPECT_EQ(st.error_message().substr(0, prefix.size()), prefix);
  }
  EXPECT_EQ(Count("SELECT count(*) FROM results"), 0);
  ASSERT_TRUE(Report(lease, results).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM results"), 3 * kModels);
  EXPECT_EQ(Count("SELECT count(*) FROM results WHERE suspects IS NOT NULL"), 7);
}

TEST_F(SuspectOpsTest, EveryModeRanksByFirstSuspectsOfFailuresThenByModelsNamed) {
  const int64_t id = CreateSweep(true);
  RunSweep();
  const pb::SuspectOpsResponse all = AllPages(id, pb::MODE_UNSPECIFIED, 50);
  EXPECT_EQ(all.sweep_id(), id);
  EXPECT_EQ(all.mode(), pb::MODE_UNSPECIFIED);
  EXPECT_EQ(all.models_failed(), 5);      // s0 s1 s2 s6 s7
  EXPECT_EQ(all.models_attributed(), 4);  // not s2
  EXPECT_EQ(all.models_audited(), 7);     // s0 s1 s2 s3 s4 s6 s7
  ExpectRows(all, {
      {"aten::gelu", 2, 4, 1, kNonFinite, {"org/s0", "org/s1", "org/s7", "org/s3"}},
      {"aten::add.Tensor", 1, 2, 0, 2.5, {"org/s0", "org/s7"}},
      {"aten::_softmax_backward_data", 1, 1, 0, 4.1, {"org/s6"}},
      {"aten::native_layer_norm", 0, 1, 1, 1.5, {"org/s3"}},
      {"aten::native_layer_norm_backward", 0, 1, 0, 2, {"org/s6"}},
  });
  // One op a page: the same answer, in the same order.
  const pb::SuspectOpsResponse paged = AllPages(id, pb::MODE_UNSPECIFIED, 1);
  EXPECT_EQ(paged.DebugString(), all.DebugString());
}

TEST_F(SuspectOpsTest, AModeCountsOnlyItsOwnVerdicts) {
  const int64_t id = CreateSweep(true);
  RunSweep();
  pb::SuspectOpsResponse eager = AllPages(id, pb::MODE_EAGER, 50);
  EXPECT_EQ(eager.mode(), pb::MODE_EAGER);
  EXPECT_EQ(eager.models_failed(), 3);
  EXPECT_EQ(eager.models_attributed(), 2);
  EXPECT_EQ(eager.models_audited(), 5);
  ExpectRows(eager, {{"aten::gelu", 2, 3, 1, 5, {"org/s0", "org/s1", "org/s3"}},
                     {"aten::add.Tensor", 0, 1, 0, 2, {"org/s0"}}});
  pb::SuspectOpsResponse compile = AllPages(id, pb::MODE_COMPILE, 50);
  EXPECT_EQ(compile.models_failed(), 2);
  EXPECT_EQ(compile.models_attributed(), 2);
  EXPECT_EQ(compile.models_audited(), 3);
  ExpectRows(compile, {{"aten::gelu", 1, 2, 0, kNonFinite, {"org/s1", "org/s7"}},
                       {"aten::add.Tensor", 1, 1, 0, 2.5, {"org/s7"}},
                       {"aten::native_layer_norm", 0, 1, 1, 1.5, {"org/s3"}}});
  pb::SuspectOpsResponse train = AllPages(id, pb::MODE_TRAIN, 50);
  EXPECT_EQ(train.models_failed(), 1);
  EXPECT_EQ(train.models_audited(), 1);
  ExpectRows(train, {{"aten::_softmax_backward_data", 1, 1, 0, 4.1, {"org/s6"}},
                     {"aten::native_layer_norm_backward", 0, 1, 0, 2, {"org/s6"}}});
}

TEST_F(SuspectOpsTest, KeptAnswersOfADoneSweepEqualTheLiveOnesPageByPage) {
  const int64_t id = CreateSweep(true);
  RunSweep();
  const pb::Mode modes[] = {pb::MODE_UNSPECIFIED, pb::MODE_EAGER, pb::MODE_COMPILE,
                            pb::MODE_TRAIN};
  std::map<pb::Mode, std::string> live;
  for (pb::Mode m : modes) live[m] = AllPages(id, m, 50).DebugString();
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_suspects"), 0);  // done, not kept yet: live
  auto store = store::Store::Connect({opts_.db_url});
  ASSERT_TRUE(store.ok());
  ASSERT_EQ((*store)->SummarizeDoneSweeps(5).value_or(-1), 1);
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_suspect_facts"), 4);
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_suspects"), 5 + 2 + 3 + 2);
  for (pb::Mode m : modes) {
    EXPECT_EQ(AllPages(id, m, 50).DebugString(), live[m]) << m;
    EXPECT_EQ(AllPages(id, m, 2).DebugString(), live[m]) << m;
  }
  // Pruning drops them with the sweep's other kept answers.
  store::PruneRequest pr;
  pr.sweep_ids = {id};
  ASSERT_TRUE((*store)->PruneSweeps(pr).ok());
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_suspect_facts"), 0);
  EXPECT_EQ(Count("SELECT count(*) FROM sweep_suspects"), 0);
}

TEST_F(SuspectOpsTest, ErrorsNameTheFieldAndTheSweep) {
  const int64_t id = CreateSweep(false);
  RunSweep();
  pb::SuspectOpsResponse out;
  grpc::Status st = Suspects(9999, pb::MODE_UNSPECIFIED, 0, "", &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(st.error_message(), "sweep_id: no sweep 9999");
  st = Suspects(id, static_cast<pb::Mode>(9), 0, "", &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().substr(0, 5), "mode:");
  st = Suspects(id, pb::MODE_EAGER, 0, "not-a-token", &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(st.error_message().substr(0, 11), "page_token:");
  st = Suspects(id, pb::MODE_EAGER, -1, "", &out);
  EXPECT_EQ(st.error_message(), "page_size: must be >= 0");
  // Readers and admins may ask; a worker's token may not, nor no token.
  EXPECT_TRUE(Suspects(id, pb::MODE_EAGER, 0, "", &out, "admin-token").ok());
  EXPECT_EQ(Suspects(id, pb::MODE_EAGER, 0, "", &out, "worker-token").error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(Suspects(id, pb::MODE_EAGER, 0, "", &out, "").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto store = store::Store::Connect({opts_.db_url});
  ASSERT_TRUE(store.ok());
  store::PruneRequest pr;
  pr.sweep_ids = {id};
  ASSERT_TRUE((*store)->PruneSweeps(pr).ok());
  st = Suspects(id, pb::MODE_UNSPECIFIED, 0, "", &out);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(st.error_message(),
            "sweep_id: sweep " + std::to_string(id) + " was pruned; its results are gone");
}

}  // namespace
}  // namespace ts::scheduler
