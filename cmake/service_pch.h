// Precompiled header of the service targets (ts_service_target): what most of services/, cli/,
// tests/ and bench/ include, directly or through our headers: gRPC, protobuf with our generated
// messages and stubs, Abseil's status and GoogleTest. Every file that loads it pays for what it
// holds (GCC re-instantiates the templates the header left pending), so a header that few files
// include stays out: nlohmann/json (a quarter of them), Boost.Beast (one), pqxx (services/store
// only, CONVENTIONS); and no torch.
#pragma once
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"
