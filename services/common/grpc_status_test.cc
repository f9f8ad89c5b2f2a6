#include "services/common/grpc_status.h"

#include <gtest/gtest.h>

namespace ts::common {
namespace {

struct Case {
  absl::StatusCode absl_code;
  grpc::StatusCode grpc_code;
};

// Every code the services return, both ways.
TEST(GrpcStatusTest, CodesMapOneToOneBothWays) {
  const Case cases[] = {
      {absl::StatusCode::kOk, grpc::StatusCode::OK},
      {absl::StatusCode::kCancelled, grpc::StatusCode::CANCELLED},
      {absl::StatusCode::kInvalidArgument, grpc::StatusCode::INVALID_ARGUMENT},
      {absl::StatusCode::kDeadlineExceeded, grpc::StatusCode::DEADLINE_EXCEEDED},
      {absl::StatusCode::kNotFound, grpc::StatusCode::NOT_FOUND},
      {absl::StatusCode::kAlreadyExists, grpc::StatusCode::ALREADY_EXISTS},
      {absl::StatusCode::kPermissionDenied, grpc::StatusCode::PERMISSION_DENIED},
      {absl::StatusCode::kResourceExhausted, grpc::StatusCode::RESOURCE_EXHAUSTED},
      {absl::StatusCode::kFailedPrecondition, grpc::StatusCode::FAILED_PRECONDITION},
      {absl::StatusCode::kAborted, grpc::StatusCode::ABORTED},
      {absl::StatusCode::kUnimplemented, grpc::StatusCode::UNIMPLEMENTED},
      {absl::StatusCode::kInternal, grpc::StatusCode::INTERNAL},
      {absl::StatusCode::kUnavailable, grpc::StatusCode::UNAVAILABLE},
      {absl::StatusCode::kUnauthenticated, grpc::StatusCode::UNAUTHENTICATED},
  };
  for (const auto& c : cases) {
    absl::Status a(c.absl_code, c.absl_code == absl::StatusCode::kOk ? "" : "jobs[2].model_id: x");
    grpc::Status g = ToGrpcStatus(a);
    EXPECT_EQ(g.error_code(), c.grpc_code) << a;
    if (!a.ok()) {
      EXPECT_EQ(g.error_message(), "jobs[2].model_id: x");
    }
    absl::Status back = FromGrpcStatus(g);
    EXPECT_EQ(back.code(), c.absl_code);
    EXPECT_EQ(back.message(), a.message());
  }
}

}  // namespace
}  // namespace ts::common
