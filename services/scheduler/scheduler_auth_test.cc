// Tokens by role and TLS on the scheduler, over real gRPC on loopback and a throwaway
// PostgreSQL; the start-up refusals through the real touchstone-scheduler binary.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <google/protobuf/descriptor.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "services/common/http_server.h"
#include "services/common/process.h"
#include "services/common/tls.h"
#include "services/scheduler/scheduler.h"
#include "services/scheduler/scheduler_test_util.h"
#include "tests/fixtures/postgres_fixture.h"
#include "tests/fixtures/subprocess.h"
#include "tests/fixtures/test_pki.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using common::Role;

constexpr char kWorker[] = "worker-token-1";
constexpr char kReader[] = "reader-token-1";
constexpr char kAdmin[] = "admin-token-1";

std::unique_ptr<grpc::ClientContext> Ctx(const std::string& token) {
  auto ctx = BearerContext(token);
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  return ctx;
}

// A folder of its own under the test temp dir, removed at the end.
class TempDir {
 public:
  TempDir() {
    path_ = fs::path(::testing::TempDir()) /
            ("scheduler_auth_" + std::to_string(::getpid()) + "_" + std::to_string(next_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string File(const std::string& name) const { return (path_ / name).string(); }
  std::string path() const { return path_.string(); }

 private:
  static inline int next_ = 0;
  fs::path path_;
};

class SchedulerAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    opts_.db_url = TestDatabaseUrl();
    ASSERT_FALSE(opts_.db_url.empty());
    ASSERT_TRUE(opts_.tokens.Add(Role::kWorker, kWorker).ok());
    ASSERT_TRUE(opts_.tokens.Add(Role::kReader, kReader).ok());
    ASSERT_TRUE(opts_.tokens.Add(Role::kAdmin, kAdmin).ok());
  }

  void StartScheduler(const std::string& ca_file = "") {
    auto s = Scheduler::Start(opts_);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = std::move(*s);
    auto ch = common::MakeChannel("127.0.0.1:" + std::to_string(sched_->grpc_port()), ca_file);
    ASSERT_TRUE(ch.ok()) << ch.status();
    stub_ = pb::Scheduler::NewStub(*ch);
    query_ = pb::Query::NewStub(*ch);
  }

  // One model in the catalog and a sweep of it, made with the admin token.
  int64_t MakeSweep() {
    pb::UpsertModelsRequest up;
    auto* m = up.add_models();
    m->set_id("org/m0");
    m->set_task("text-generation");
    m->set_arch("LlamaForCausalLM");
    m->set_family("llama");
    m->set_config_json("{}");
    pb::UpsertModelsResponse ur;
    EXPECT_TRUE(stub_->UpsertModels(Ctx(kAdmin).get(), up, &ur).ok());
    pb::CreateSweepResponse created;
    EXPECT_TRUE(stub_->CreateSweep(Ctx(kAdmin).get(), SweepRequest(), &created).ok());
    return created.sweep_id();
  }

  static pb::CreateSweepRequest SweepRequest() {
    pb::CreateSweepRequest sweep;
    sweep.mutable_profile()->set_name("p");
    sweep.mutable_profile()->set_body("{}");
    sweep.add_modes("eager");
    return sweep;
  }

  // ListResults' status for a token (the stream ends at once when refused).
  grpc::Status ListResults(const std::string& token, int64_t sweep_id, int* rows = nullptr) {
    pb::ListResultsRequest req;
    req.set_sweep_id(sweep_id);
    auto ctx = Ctx(token);
    auto reader = stub_->ListResults(ctx.get(), req);
    pb::ResultPage page;
    while (reader->Read(&page)) {
      if (rows != nullptr) *rows += page.rows_size();
    }
    return reader->Finish();
  }

  grpc::Status GetSweep(const std::string& token, int64_t sweep_id, pb::SweepProgress* p) {
    pb::GetSweepRequest req;
    req.set_sweep_id(sweep_id);
    return stub_->GetSweep(Ctx(token).get(), req, p);
  }

  SchedulerOptions opts_;
  std::unique_ptr<Scheduler> sched_;
  std::unique_ptr<pb::Scheduler::Stub> stub_;
  std::unique_ptr<pb::Query::Stub> query_;
};

// Every method of touchstone.v1.Scheduler has a role, and the worker API is exactly the
// methods a worker calls: the five of a shard's life and the three of reference bundles.
TEST(SchedulerMethodRoleTest, EveryMethodDeclaresItsRole) {
  const auto* service = google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
      "touchstone.v1.Scheduler");
  ASSERT_NE(service, nullptr);
  std::set<std::string> worker, reader, admin;
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string name = service->method(i)->name();
    auto role = SchedulerMethodRole(name);
    ASSERT_TRUE(role.has_value()) << name << " has no role";
    (*role == Role::kWorker ? worker : *role == Role::kReader ? reader : admin).insert(name);
  }
  EXPECT_EQ(worker, (std::set<std::string>{"RegisterWorker", "LeaseShard", "Heartbeat",
                                           "ReportResults", "FinishShard", "ListReferences",
                                           "FetchReferences", "UploadReferences"}));
  EXPECT_EQ(reader, (std::set<std::string>{"GetSweep", "ListResults", "ReferenceStats"}));
  EXPECT_EQ(admin, (std::set<std::string>{"UpsertModels", "CreateSweep", "CancelSweep",
                                          "PruneReferences", "AddSchedule", "ListSchedules",
                                          "RemoveSchedule", "SetScheduleEnabled"}));
  EXPECT_EQ(SchedulerMethodRole("Prune"), std::nullopt);
}

TEST_F(SchedulerAuthTest, WorkerTokenNeverReadsResults) {
  StartScheduler();
  const int64_t sweep = MakeSweep();
  pb::SweepProgress p;
  grpc::Status st = GetSweep(kWorker, sweep, &p);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(),
            "GetSweep: the worker role may not call it (it needs reader or admin)");
  st = ListResults(kWorker, sweep);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(),
            "ListResults: the worker role may not call it (it needs reader or admin)");
  // Nor does it create or cancel sweeps.
  pb::CreateSweepResponse created;
  EXPECT_EQ(stub_->CreateSweep(Ctx(kWorker).get(), SweepRequest(), &created).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  pb::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep);
  EXPECT_EQ(stub_->CancelSweep(Ctx(kWorker).get(), cancel, &p).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Its own API works: it leases the sweep's shard.
  pb::RegisterWorkerRequest reg;
  reg.set_name("w");
  pb::RegisterWorkerResponse w;
  ASSERT_TRUE(stub_->RegisterWorker(Ctx(kWorker).get(), reg, &w).ok());
  pb::LeaseShardRequest lq;
  lq.set_worker_id(w.worker_id());
  pb::LeaseShardResponse lease;
  ASSERT_TRUE(stub_->LeaseShard(Ctx(kWorker).get(), lq, &lease).ok());
  EXPECT_TRUE(lease.has_shard());
}

// Every Query method reads results: reader or admin, never worker.
TEST_F(SchedulerAuthTest, QueryServiceNeedsAReaderToken) {
  StartScheduler();
  const int64_t sweep = MakeSweep();
  pb::ListSweepsRequest list;
  pb::ListSweepsResponse sweeps;
  grpc::Status st = query_->ListSweeps(Ctx(kWorker).get(), list, &sweeps);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(),
            "touchstone.v1.Query: the worker role may not call it (it needs reader or admin)");
  pb::GetSummaryRequest summary;
  summary.set_sweep_id(sweep);
  pb::Summary table;
  EXPECT_EQ(query_->GetSummary(Ctx(kWorker).get(), summary, &table).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(query_->GetSummary(Ctx("").get(), summary, &table).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(query_->GetSummary(Ctx("wrong").get(), summary, &table).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  pb::WatchSweepRequest watch;
  watch.set_sweep_id(sweep);
  auto ctx = Ctx(kWorker);
  auto stream = query_->WatchSweep(ctx.get(), watch);
  pb::SweepProgress p;
  EXPECT_FALSE(stream->Read(&p));
  EXPECT_EQ(stream->Finish().error_code(), grpc::StatusCode::PERMISSION_DENIED);
  for (const char* token : {kReader, kAdmin}) {
    st = query_->ListSweeps(Ctx(token).get(), list, &sweeps);
    ASSERT_TRUE(st.ok()) << token << ": " << st.error_message();
    ASSERT_EQ(sweeps.sweeps_size(), 1);
    EXPECT_EQ(sweeps.sweeps(0).sweep_id(), sweep);
  }
}

TEST_F(SchedulerAuthTest, ReaderTokenReadsButNeverWrites) {
  StartScheduler();
  const int64_t sweep = MakeSweep();
  pb::CreateSweepResponse created;
  grpc::Status st = stub_->CreateSweep(Ctx(kReader).get(), SweepRequest(), &created);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(), "CreateSweep: the reader role may not call it (it needs admin)");
  pb::UpsertModelsRequest up;
  up.add_models()->set_id("org/other");
  pb::UpsertModelsResponse ur;
  EXPECT_EQ(stub_->UpsertModels(Ctx(kReader).get(), up, &ur).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  pb::CancelSweepRequest cancel;
  cancel.set_sweep_id(sweep);
  pb::SweepProgress p;
  EXPECT_EQ(stub_->CancelSweep(Ctx(kReader).get(), cancel, &p).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // A reader is not a worker either: it cannot lease (and so never reports) a shard.
  pb::RegisterWorkerRequest reg;
  reg.set_name("r");
  pb::RegisterWorkerResponse w;
  st = stub_->RegisterWorker(Ctx(kReader).get(), reg, &w);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(st.error_message(),
            "RegisterWorker: the reader role may not call it (it needs worker or admin)");
  // What it may do, and the refusals changed nothing: still one sweep, running, no results.
  ASSERT_TRUE(GetSweep(kReader, sweep, &p).ok());
  EXPECT_EQ(p.state(), "running");
  EXPECT_EQ(p.models_expected(), 1);
  EXPECT_EQ(p.models_recorded(), 0);
  EXPECT_EQ(GetSweep(kReader, sweep + 1, &p).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(ListResults(kReader, sweep).ok());
}

TEST_F(SchedulerAuthTest, NoTokenOrAWrongOneIsUnauthenticatedOnEveryMethod) {
  StartScheduler();
  const int64_t sweep = MakeSweep();
  for (const std::string token : {"", "wrong-token", "worker-token-", "admin-token-1x"}) {
    SCOPED_TRACE("token '" + token + "'");
    const std::string want = token.empty()
                                 ? ": no bearer token (authorization: Bearer TOKEN)"
                                 : ": unknown bearer token";
    pb::RegisterWorkerRequest reg;
    reg.set_name("w");
    pb::RegisterWorkerResponse w;
    grpc::Status st = stub_->RegisterWorker(Ctx(token).get(), reg, &w);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(st.error_message(), "RegisterWorker" + want);
    pb::LeaseShardRequest lq;
    lq.set_worker_id(1);
    pb::LeaseShardResponse lease;
    EXPECT_EQ(stub_->LeaseShard(Ctx(token).get(), lq, &lease).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    pb::CreateSweepResponse created;
    EXPECT_EQ(stub_->CreateSweep(Ctx(token).get(), SweepRequest(), &created).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
    pb::SweepProgress p;
    st = GetSweep(token, sweep, &p);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(st.error_message(), "GetSweep" + want);
    st = ListResults(token, sweep);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
    EXPECT_EQ(st.error_message(), "ListResults" + want);
  }
}

// Admin drives a whole sweep alone: catalog, sweep, the worker API, reads and cancel.
TEST_F(SchedulerAuthTest, AdminMayCallEverything) {
  StartScheduler();
  const int64_t sweep = MakeSweep();
  ASSERT_GT(sweep, 0);
  pb::RegisterWorkerRequest reg;
  reg.set_name("a");
  pb::RegisterWorkerResponse w;
  ASSERT_TRUE(stub_->RegisterWorker(Ctx(kAdmin).get(), reg, &w).ok());
  pb::LeaseShardRequest lq;
  lq.set_worker_id(w.worker_id());
  pb::LeaseShardResponse lease;
  ASSERT_TRUE(stub_->LeaseShard(Ctx(kAdmin).get(), lq, &lease).ok());
  ASSERT_TRUE(lease.has_shard());
  pb::HeartbeatRequest hb;
  hb.set_worker_id(w.worker_id());
  hb.set_shard_id(lease.shard_id());
  hb.set_lease_token(lease.lease_token());
  pb::HeartbeatResponse hr;
  EXPECT_TRUE(stub_->Heartbeat(Ctx(kAdmin).get(), hb, &hr).ok());
  pb::ReportResultsRequest report;
  report.set_worker_id(w.worker_id());
  report.set_shard_id(lease.shard_id());
  report.set_lease_token(lease.lease_token());
  auto* m = report.add_results();
  m->set_job_id(lease.jobs(0).job_id());
  m->set_model_id(lease.jobs(0).model_id());
  m->add_modes()->set_mode(pb::MODE_EAGER);
  m->mutable_modes(0)->set_status(pb::VERDICT_PASS);
  pb::ReportResultsResponse rr;
  ASSERT_TRUE(stub_->ReportResults(Ctx(kAdmin).get(), report, &rr).ok());
  EXPECT_EQ(rr.accepted(), 1);
  pb::FinishShardRequest fin;
  fin.set_worker_id(w.worker_id());
  fin.set_shard_id(lease.shard_id());
  fin.set_lease_token(lease.lease_token());
  pb::FinishShardResponse fr;
  ASSERT_TRUE(stub_->FinishShard(Ctx(kAdmin).get(), fin, &fr).ok());
  pb::SweepProgress p;
  ASSERT_TRUE(GetSweep(kAdmin, sweep, &p).ok());
  EXPECT_EQ(p.models_recorded(), 1);
  int rows = 0;
  EXPECT_TRUE(ListResults(kAdmin, sweep, &rows).ok());
  EXPECT_EQ(rows, 1);
  pb::CreateSweepResponse second;
  ASSERT_TRUE(stub_->CreateSweep(Ctx(kAdmin).get(), SweepRequest(), &second).ok());
  pb::CancelSweepRequest cancel;
  cancel.set_sweep_id(second.sweep_id());
  ASSERT_TRUE(stub_->CancelSweep(Ctx(kAdmin).get(), cancel, &p).ok());
  EXPECT_EQ(p.state(), "cancelled");
}

// No tokens configured: open, as the tokenless loopback mode always was.
TEST_F(SchedulerAuthTest, NoTokensConfiguredIsOpen) {
  opts_.tokens = common::TokenSet();
  StartScheduler();
  const int64_t sweep = MakeSweep();
  pb::SweepProgress p;
  EXPECT_TRUE(GetSweep("", sweep, &p).ok());
  EXPECT_TRUE(GetSweep("anything", sweep, &p).ok());
  EXPECT_TRUE(ListResults("", sweep).ok());
}

using testing::MakePki;

TEST_F(SchedulerAuthTest, TlsWithATestCaWorksAndPlaintextDoesNot) {
  TempDir dir;
  auto pki = MakePki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.status();
  opts_.tls_cert_file = pki->cert;
  opts_.tls_key_file = pki->key;
  StartScheduler(pki->ca);
  const std::string port = std::to_string(sched_->grpc_port());
  pb::RegisterWorkerRequest reg;
  reg.set_name("tls");
  pb::RegisterWorkerResponse w;
  grpc::Status st = stub_->RegisterWorker(Ctx(kWorker).get(), reg, &w);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_GT(w.worker_id(), 0);
  // The certificate names localhost too; tokens still apply over TLS.
  auto by_name = pb::Scheduler::NewStub(*common::MakeChannel("localhost:" + port, pki->ca));
  EXPECT_TRUE(by_name->RegisterWorker(Ctx(kWorker).get(), reg, &w).ok());
  EXPECT_EQ(by_name->RegisterWorker(Ctx("").get(), reg, &w).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  // Plaintext, or TLS trusting another CA: no call gets through.
  for (const std::string& ca : {std::string(), pki->other_ca}) {
    auto stub = pb::Scheduler::NewStub(*common::MakeChannel("127.0.0.1:" + port, ca));
    auto ctx = Ctx(kAdmin);
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    st = stub->RegisterWorker(ctx.get(), reg, &w);
    EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAVAILABLE) << "ca '" << ca << "'";
  }
}

// The set-cookie header of a POST /login with `token` (its value, "" when none).
std::string LoginCookie(common::HttpRequestSpec spec, const std::string& token) {
  spec.method = "POST";
  spec.path = "/login";
  spec.body = "token=" + token;
  spec.content_type = "application/x-www-form-urlencoded";
  auto r = common::HttpRequest(spec);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return "";
  EXPECT_EQ(r->status, 303) << r->body;
  for (const auto& [name, value] : r->headers) {
    if (name == "set-cookie") return value;
  }
  return "";
}

// With TLS on, the HTTP port is HTTPS with the same certificate: the probes and the dashboard
// answer a client that trusts the CA (by address and by name), nothing answers plaintext or a
// client trusting another CA, and the login cookie is Secure.
TEST_F(SchedulerAuthTest, UnderTlsTheHttpPortIsHttpsAndTheLoginCookieSecure) {
  TempDir dir;
  auto pki = MakePki(dir.path());
  ASSERT_TRUE(pki.ok()) << pki.status();
  opts_.tls_cert_file = pki->cert;
  opts_.tls_key_file = pki->key;
  StartScheduler(pki->ca);
  common::HttpRequestSpec https;
  https.port = sched_->http_port();
  https.path = "/healthz";
  https.tls_ca_file = pki->ca;
  for (const std::string host : {"127.0.0.1", "localhost"}) {
    https.host = host;
    auto health = common::HttpRequest(https);
    ASSERT_TRUE(health.ok()) << host << ": " << health.status();
    EXPECT_EQ(health->status, 200) << host;
  }
  https.host = "127.0.0.1";
  auto plain = common::HttpGet(sched_->http_port(), "/healthz");
  EXPECT_FALSE(plain.ok()) << "plaintext answered " << plain->status;
  common::HttpRequestSpec other = https;
  other.tls_ca_file = pki->other_ca;
  auto refused = common::HttpRequest(other);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable) << refused.status();
  EXPECT_EQ(LoginCookie(https, kReader),
            std::string("ts_token=") + kReader + "; Path=/; HttpOnly; SameSite=Strict; Secure");
}

// Served over plaintext the cookie is not Secure (a browser would drop it), unless a
// TLS-terminating proxy in front says the browser came over HTTPS.
TEST_F(SchedulerAuthTest, OverPlainHttpTheLoginCookieIsSecureOnlyBehindATlsProxy) {
  StartScheduler();
  common::HttpRequestSpec plain;
  plain.port = sched_->http_port();
  EXPECT_EQ(LoginCookie(plain, kReader),
            std::string("ts_token=") + kReader + "; Path=/; HttpOnly; SameSite=Strict");
  plain.headers = {{"X-Forwarded-Proto", "https"}};
  EXPECT_EQ(LoginCookie(plain, kReader),
            std::string("ts_token=") + kReader + "; Path=/; HttpOnly; SameSite=Strict; Secure");
}

TEST_F(SchedulerAuthTest, TlsNeedsBothFilesAndNamesTheOneThatIsMissingOrBad) {
  TempDir dir;
  opts_.tls_cert_file = dir.File("cert.pem");
  auto s = Scheduler::Start(opts_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.status().message(), "tls_key: needed with tls_cert");
  opts_.tls_key_file = dir.File("key.pem");
  s = Scheduler::Start(opts_);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  const std::string unreadable = "tls_cert: cannot read " + opts_.tls_cert_file + ": ";
  EXPECT_EQ(s.status().message().substr(0, unreadable.size()), unreadable);
  std::ofstream(opts_.tls_cert_file) << "not a certificate\n";
  s = Scheduler::Start(opts_);
  EXPECT_EQ(s.status().message(), "tls_cert: " + opts_.tls_cert_file + " holds no PEM block");
  auto ch = common::MakeChannel("127.0.0.1:1", dir.File("missing-ca.pem"));
  EXPECT_EQ(ch.status().code(), absl::StatusCode::kNotFound);
}

// The real binary refuses to start on a tokens file that others may read, or a malformed one,
// and says which file (and mode, or line).
TEST_F(SchedulerAuthTest, SchedulerBinaryRefusesLooseOrMalformedTokensFiles) {
  TempDir dir;
  const std::string loose = dir.File("loose-tokens");
  std::ofstream(loose) << "admin " << kAdmin << "\n";
  ::chmod(loose.c_str(), 0644);
  auto r = testing::RunProcess(
      {TS_SCHEDULER_BIN, "--db", opts_.db_url, "--listen", "127.0.0.1:0", "--token-file", loose},
      "", 60);
  EXPECT_EQ(r.exit_code, 2) << testing::Describe(r) << r.err;
  EXPECT_NE(r.err.find("refusing to start: " + loose + ": mode 0644 lets group or others read"),
            std::string::npos)
      << r.err;

  const std::string bad = dir.File("bad-tokens");
  std::ofstream(bad) << "# tokens\nworker w-1\nreeder r-1\n";
  ::chmod(bad.c_str(), 0600);
  r = testing::RunProcess(
      {TS_SCHEDULER_BIN, "--db", opts_.db_url, "--listen", "127.0.0.1:0", "--token-file", bad},
      "", 60);
  EXPECT_EQ(r.exit_code, 2) << testing::Describe(r) << r.err;
  EXPECT_NE(r.err.find(bad + ":3: unknown role"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace ts::scheduler
