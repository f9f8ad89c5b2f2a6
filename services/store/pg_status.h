// The one bridge from pqxx/libpq errors to absl::Status, by SQLSTATE class:
//   08xxx connection, 57P0x shutdown, broken connection, commit in doubt -> UNAVAILABLE
//   40001 serialization, 40P01 deadlock                                -> ABORTED
//   23505 unique violation -> ALREADY_EXISTS; 23503 foreign key -> NOT_FOUND
//   22xxx data exception -> INVALID_ARGUMENT; 53xxx resources -> RESOURCE_EXHAUSTED
//   anything else (42xxx: our SQL is wrong) -> INTERNAL
//
// Thread-safety: pure functions.
#pragma once

#include <exception>
#include <string>

#include "absl/status/status.h"

namespace ts::store {

absl::StatusCode CodeForSqlState(const std::string& sqlstate);
// Call inside a catch block: converts the exception in flight. `what` names the operation.
absl::Status StatusFromCurrentException(const std::string& what);

}  // namespace ts::store
