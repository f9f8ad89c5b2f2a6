#include "cli/client.h"

#include <gtest/gtest.h>

#include <vector>

namespace ts::cli {
namespace {

// Every command that calls a scheduler exits by this one table (issue 34: the query and schedule
// commands had drifted apart on ALREADY_EXISTS).
TEST(RpcExitCodeTest, RefusedIsTwoAndNoAnswerIsThree) {
  const std::vector<std::pair<absl::StatusCode, int>> table = {
      {absl::StatusCode::kInvalidArgument, 2},   {absl::StatusCode::kNotFound, 2},
      {absl::StatusCode::kAlreadyExists, 2},     {absl::StatusCode::kFailedPrecondition, 2},
      {absl::StatusCode::kPermissionDenied, 2},  {absl::StatusCode::kUnauthenticated, 2},
      {absl::StatusCode::kUnavailable, 3},       {absl::StatusCode::kDeadlineExceeded, 3},
      {absl::StatusCode::kResourceExhausted, 3}, {absl::StatusCode::kInternal, 3},
      {absl::StatusCode::kCancelled, 3},         {absl::StatusCode::kUnknown, 3},
  };
  for (const auto& [code, exit_code] : table) {
    EXPECT_EQ(RpcExitCode(code), exit_code) << absl::StatusCodeToString(code);
  }
}

}  // namespace
}  // namespace ts::cli
