// What the Kubernetes probes (deploy/k8s/scheduler.yaml) and the TouchstoneDatabaseUnreachable
// rule rely on, with the database really down: a scheduler on a PostgreSQL cluster of the test's
// own, stopped with pg_ctl. While it is down /healthz answers 503, grpc.health.v1 answers
// NOT_SERVING and /metrics says touchstone_scheduler_db_up 0; once it is started again all three
// come back.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "services/common/http_server.h"
#include "services/scheduler/scheduler.h"
#include "services/store/embedded_postgres.h"

namespace ts::scheduler {
namespace {

namespace fs = std::filesystem;

// grpc.health.v1.Health/Check for the whole server: 1 SERVING, 2 NOT_SERVING; -1 when the call
// fails. The messages are encoded by hand (grpc's health service is not protobuf-generated
// here): an empty request, a response of one varint field.
int GrpcHealth(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub stub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  grpc::CompletionQueue cq;
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1);
  auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", request, &cq);
  call->StartCall();
  grpc::ByteBuffer got;
  grpc::Status status;
  call->Finish(&got, &status, nullptr);
  void* tag = nullptr;
  bool ok = false;
  const bool finished = cq.Next(&tag, &ok) && ok;
  cq.Shutdown();
  while (cq.Next(&tag, &ok)) {
  }
  if (!finished || !status.ok()) return -1;
  std::vector<grpc::Slice> slices;
  (void)got.Dump(&slices);
  std::string bytes;
  for (const auto& s : slices) bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  google::protobuf::UnknownFieldSet fields;
  if (!fields.ParseFromString(bytes) || fields.field_count() != 1 ||
      fields.field(0).number() != 1 ||
      fields.field(0).type() != google::protobuf::UnknownField::TYPE_VARINT) {
    return -1;
  }
  return static_cast<int>(fields.field(0).varint());
}

// What the three probes say at one moment.
struct Probes {
  int healthz = 0;       // HTTP status of /healthz (0: no answer)
  int grpc = 0;          // GrpcHealth
  std::string db_up;     // the value on the touchstone_scheduler_db_up line of /metrics
  std::string Describe() const {
    return "healthz " + std::to_string(healthz) + ", grpc health " + std::to_string(grpc) +
           ", db_up " + db_up;
  }
};

Probes Read(const Scheduler& s, const std::shared_ptr<grpc::Channel>& channel) {
  Probes p;
  auto h = common::HttpGet(s.http_port(), "/healthz");
  p.healthz = h.ok() ? h->status : 0;
  p.grpc = GrpcHealth(channel);
  auto m = common::HttpGet(s.http_port(), "/metrics");
  const std::string name = "\ntouchstone_scheduler_db_up ";
  if (m.ok()) {
    const size_t at = m->body.find(name);
    if (at != std::string::npos) {
      const size_t from = at + name.size();
      p.db_up = m->body.substr(from, m->body.find('\n', from) - from);
    }
  }
  return p;
}

// Polls until `want` holds (every 100 ms, up to `seconds`); returns the last reading.
Probes Await(const Scheduler& s, const std::shared_ptr<grpc::Channel>& channel,
             const std::function<bool(const Probes&)>& want, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  Probes p = Read(s, channel);
  while (!want(p) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    p = Read(s, channel);
  }
  return p;
}

TEST(SchedulerHealthTest, ProbesSayTheDatabaseIsDownWhileItIsAndRecover) {
  char tmpl[] = "/tmp/ts-health-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const fs::path dir = tmpl;
  store::EmbeddedPostgresOptions po;
  po.data_dir = (dir / "pg" / "data").string();
  po.fast_unsafe = true;
  auto pg = store::EmbeddedPostgres::Start(po);
  ASSERT_TRUE(pg.ok()) << pg.status();
  SchedulerOptions o;
  o.db_url = (*pg)->url();
  o.tick_s = 0.1;
  o.lease_ttl_s = 2;
  auto sched = Scheduler::Start(o);
  ASSERT_TRUE(sched.ok()) << sched.status();
  const Scheduler& s = **sched;
  const auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(s.grpc_port()),
                                           grpc::InsecureChannelCredentials());
  const auto up = [](const Probes& p) { return p.healthz == 200 && p.grpc == 1 && p.db_up == "1"; };
  const auto down = [](const Probes& p) {
    return p.healthz == 503 && p.grpc == 2 && p.db_up == "0";
  };
  Probes p = Await(s, channel, up, 30);
  EXPECT_TRUE(up(p)) << "with the database up: " << p.Describe();

  ASSERT_TRUE((*pg)->Stop().ok());  // pg_ctl stop -m fast
  ASSERT_FALSE((*pg)->Alive());
  p = Await(s, channel, down, 30);
  EXPECT_TRUE(down(p)) << "with the database stopped: " << p.Describe();

  ASSERT_TRUE((*pg)->Restart().ok());  // started again on the same port
  p = Await(s, channel, up, 60);
  EXPECT_TRUE(up(p)) << "after the database came back: " << p.Describe();

  (*sched)->Shutdown();
  pg->reset();
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace ts::scheduler
