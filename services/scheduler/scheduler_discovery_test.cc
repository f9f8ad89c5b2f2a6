// grpc_cli-style discovery and probes on a token-protected scheduler, without a token: server
// reflection lists the services and serves their descriptors; grpc.health.v1 answers SERVING.
// The reflection messages are built from the descriptors that libgrpc++_reflection registers
// in the generated pool (its headers are not installed); health's two messages are encoded by
// hand (grpc's health service is not protobuf-generated).
#include <chrono>
#include <memory>
#include <set>
#include <string>

#include <google/protobuf/descriptor.h>
#include <google/protobuf/descriptor.pb.h>
#include <google/protobuf/message.h>
#include <google/protobuf/unknown_field_set.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "services/scheduler/scheduler.h"
#include "tests/fixtures/postgres_fixture.h"

namespace ts::scheduler {
namespace {

namespace gp = ::google::protobuf;

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string FromBuffer(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  (void)buffer.Dump(&slices);
  std::string out;
  for (const auto& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

std::chrono::system_clock::time_point In(int seconds) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

// Waits for the one operation in flight on `cq`; false when it failed.
bool Await(grpc::CompletionQueue* cq) {
  void* tag = nullptr;
  bool ok = false;
  return cq->Next(&tag, &ok) && ok;
}

// Shuts the queue down and takes what is left in it (required before it is destroyed).
void Drain(grpc::CompletionQueue* cq) {
  cq->Shutdown();
  void* tag = nullptr;
  bool ok = false;
  while (cq->Next(&tag, &ok)) {
  }
}

class SchedulerDiscoveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto* cluster = testing::PostgresCluster::Get();
    ASSERT_NE(cluster, nullptr);
    SchedulerOptions o;
    o.db_url =
        cluster->NewDatabase(::testing::UnitTest::GetInstance()->current_test_info()->name());
    o.http_port = -1;
    ASSERT_TRUE(o.tokens.Add(common::Role::kAdmin, "admin-token").ok());
    auto s = Scheduler::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = std::move(*s);
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(sched_->grpc_port()),
                                   grpc::InsecureChannelCredentials());
  }

  // One request/response on the ServerReflectionInfo stream, without a token.
  std::unique_ptr<gp::Message> Reflect(const std::string& field, const std::string& value) {
    const gp::Descriptor* req_type = gp::DescriptorPool::generated_pool()->FindMessageTypeByName(
        "grpc.reflection.v1alpha.ServerReflectionRequest");
    const gp::Descriptor* resp_type = gp::DescriptorPool::generated_pool()->FindMessageTypeByName(
        "grpc.reflection.v1alpha.ServerReflectionResponse");
    if (req_type == nullptr || resp_type == nullptr) {
      ADD_FAILURE() << "grpc.reflection.v1alpha is not in the generated descriptor pool";
      return nullptr;
    }
    auto* factory = gp::MessageFactory::generated_factory();
    std::unique_ptr<gp::Message> req(factory->GetPrototype(req_type)->New());
    req->GetReflection()->SetString(req.get(), req_type->FindFieldByName(field), value);

    grpc::GenericStub stub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(In(10));
    grpc::CompletionQueue cq;
    auto call = stub.PrepareCall(
        &ctx, "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo", &cq);
    call->StartCall(nullptr);
    bool ok = Await(&cq);
    call->Write(ToBuffer(req->SerializeAsString()), nullptr);
    ok = ok && Await(&cq);
    call->WritesDone(nullptr);
    ok = ok && Await(&cq);
    grpc::ByteBuffer got;
    call->Read(&got, nullptr);
    const bool read = ok && Await(&cq);
    grpc::Status status;
    call->Finish(&status, nullptr);
    Await(&cq);
    Drain(&cq);
    EXPECT_TRUE(read && status.ok()) << status.error_code() << " " << status.error_message();
    std::unique_ptr<gp::Message> resp(factory->GetPrototype(resp_type)->New());
    EXPECT_TRUE(resp->ParseFromString(FromBuffer(got)));
    return resp;
  }

  // The sub-message `name` of `m`.
  static const gp::Message& Field(const gp::Message& m, const std::string& name) {
    return m.GetReflection()->GetMessage(m, m.GetDescriptor()->FindFieldByName(name));
  }

  std::unique_ptr<Scheduler> sched_;
  std::shared_ptr<grpc::Channel> channel_;
};

// grpc_cli ls: every service on the port, without a token.
TEST_F(SchedulerDiscoveryTest, ReflectionListsTheServicesWithoutAToken) {
  auto resp = Reflect("list_services", "*");
  ASSERT_NE(resp, nullptr);
  const gp::Message& list = Field(*resp, "list_services_response");
  const gp::FieldDescriptor* service = list.GetDescriptor()->FindFieldByName("service");
  std::set<std::string> names;
  for (int i = 0; i < list.GetReflection()->FieldSize(list, service); ++i) {
    const gp::Message& s = list.GetReflection()->GetRepeatedMessage(list, service, i);
    names.insert(s.GetReflection()->GetString(s, s.GetDescriptor()->FindFieldByName("name")));
  }
  std::string all;
  for (const auto& n : names) all += n + " ";
  SCOPED_TRACE("services: " + all);
  EXPECT_TRUE(names.contains("touchstone.v1.Scheduler"));
  EXPECT_TRUE(names.contains("touchstone.v1.Query"));
  EXPECT_TRUE(names.contains("grpc.health.v1.Health"));
  EXPECT_TRUE(names.contains("grpc.reflection.v1alpha.ServerReflection"));
  EXPECT_EQ(names.size(), 4u);
}

// grpc_cli ls -l: the descriptor of a listed service, enough to call it by hand.
TEST_F(SchedulerDiscoveryTest, ReflectionServesTheSchedulerDescriptor) {
  auto resp = Reflect("file_containing_symbol", "touchstone.v1.Scheduler");
  ASSERT_NE(resp, nullptr);
  const gp::Message& files = Field(*resp, "file_descriptor_response");
  const gp::FieldDescriptor* protos =
      files.GetDescriptor()->FindFieldByName("file_descriptor_proto");
  const int n = files.GetReflection()->FieldSize(files, protos);
  ASSERT_GT(n, 0);
  bool found = false;
  for (int i = 0; i < n; ++i) {
    gp::FileDescriptorProto file;
    ASSERT_TRUE(file.ParseFromString(files.GetReflection()->GetRepeatedString(files, protos, i)));
    for (const auto& s : file.service()) {
      if (file.package() + "." + s.name() != "touchstone.v1.Scheduler") continue;
      found = true;
      std::set<std::string> methods;
      for (const auto& m : s.method()) methods.insert(m.name());
      EXPECT_TRUE(methods.contains("CreateSweep"));
      EXPECT_TRUE(methods.contains("ListResults"));
      EXPECT_TRUE(methods.contains("AddSchedule"));
      // Exactly the methods this binary was compiled with (scheduler.proto), no more or fewer.
      const gp::ServiceDescriptor* compiled =
          gp::DescriptorPool::generated_pool()->FindServiceByName("touchstone.v1.Scheduler");
      ASSERT_NE(compiled, nullptr);
      std::set<std::string> want;
      for (int k = 0; k < compiled->method_count(); ++k) want.insert(compiled->method(k)->name());
      EXPECT_EQ(methods, want);
      EXPECT_EQ(methods.size(), 19u);
    }
  }
  EXPECT_TRUE(found) << "no file in the response defines touchstone.v1.Scheduler";
}

// Load balancers and probes have no token: grpc.health.v1.Health/Check answers SERVING.
TEST_F(SchedulerDiscoveryTest, HealthCheckAnswersServingWithoutAToken) {
  grpc::GenericStub stub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(In(10));
  grpc::CompletionQueue cq;
  // HealthCheckRequest{service: ""}: an empty message.
  auto call = stub.PrepareUnaryCall(&ctx, "/grpc.health.v1.Health/Check", ToBuffer(""), &cq);
  call->StartCall();
  grpc::ByteBuffer got;
  grpc::Status status;
  call->Finish(&got, &status, nullptr);
  const bool finished = Await(&cq);
  Drain(&cq);
  ASSERT_TRUE(finished);
  ASSERT_TRUE(status.ok()) << status.error_code() << " " << status.error_message();
  // HealthCheckResponse{status = 1: SERVING}.
  gp::UnknownFieldSet fields;
  ASSERT_TRUE(fields.ParseFromString(FromBuffer(got)));
  ASSERT_EQ(fields.field_count(), 1);
  EXPECT_EQ(fields.field(0).number(), 1);
  ASSERT_EQ(fields.field(0).type(), gp::UnknownField::TYPE_VARINT);
  EXPECT_EQ(fields.field(0).varint(), 1u);
}

}  // namespace
}  // namespace ts::scheduler
