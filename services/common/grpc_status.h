// The one bridge between absl::Status (our code) and grpc::Status (the wire). The codes are
// the same enumeration (both follow google.rpc.Code), so the bridge is a cast plus the message.
//
// Thread-safety: pure functions.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace ts::common {

grpc::Status ToGrpcStatus(const absl::Status& s);
absl::Status FromGrpcStatus(const grpc::Status& s);

}  // namespace ts::common
