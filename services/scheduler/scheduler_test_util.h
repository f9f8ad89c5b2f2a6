// What the scheduler's PostgreSQL tests share: a fresh database per test on the throwaway
// cluster, and a client context carrying a bearer token.
#pragma once

#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "tests/fixtures/postgres_fixture.h"

namespace ts::scheduler {

// A new database named after the running test (empty, with a test failure, when the
// throwaway cluster could not start).
inline std::string TestDatabaseUrl() {
  auto* cluster = testing::PostgresCluster::Get();
  EXPECT_NE(cluster, nullptr);
  if (cluster == nullptr) return "";
  return cluster->NewDatabase(::testing::UnitTest::GetInstance()->current_test_info()->name());
}

// A context sending `authorization: Bearer <token>` (nothing for an empty token).
inline std::unique_ptr<grpc::ClientContext> BearerContext(const std::string& token) {
  auto ctx = std::make_unique<grpc::ClientContext>();
  if (!token.empty()) ctx->AddMetadata("authorization", "Bearer " + token);
  return ctx;
}

}  // namespace ts::scheduler
