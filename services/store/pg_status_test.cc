#include "services/store/pg_status.h"

#include <gtest/gtest.h>
#include <pqxx/pqxx>

namespace ts::store {
namespace {

TEST(PgStatusTest, SqlStatesMapByClass) {
  const std::pair<const char*, absl::StatusCode> cases[] = {
      {"08006", absl::StatusCode::kUnavailable},      {"08001", absl::StatusCode::kUnavailable},
      {"57P01", absl::StatusCode::kUnavailable},      {"57P03", absl::StatusCode::kUnavailable},
      {"40001", absl::StatusCode::kAborted},          {"40P01", absl::StatusCode::kAborted},
      {"23505", absl::StatusCode::kAlreadyExists},    {"23503", absl::StatusCode::kNotFound},
      {"22P02", absl::StatusCode::kInvalidArgument},  {"22003", absl::StatusCode::kInvalidArgument},
      {"53100", absl::StatusCode::kResourceExhausted}, {"42P01", absl::StatusCode::kInternal},
      {"", absl::StatusCode::kInternal},              {"XX000", absl::StatusCode::kInternal},
  };
  for (const auto& [state, code] : cases) EXPECT_EQ(CodeForSqlState(state), code) << state;
}

TEST(PgStatusTest, ExceptionsInFlightConvert) {
  auto convert = [](auto thrower) {
    try {
      thrower();
    } catch (...) {
      return StatusFromCurrentException("LeaseShard");
    }
    return absl::OkStatus();
  };
  auto lost = convert([] { throw pqxx::broken_connection("server closed the connection"); });
  EXPECT_EQ(lost.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(lost.message().find("LeaseShard"), std::string::npos);
  auto doubt = convert([] { throw pqxx::in_doubt_error("lost during commit"); });
  EXPECT_EQ(doubt.code(), absl::StatusCode::kUnavailable);
  auto sql = convert([] { throw pqxx::sql_error("duplicate key", "INSERT", "23505"); });
  EXPECT_EQ(sql.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(sql.message().find("23505"), std::string::npos);
  auto other = convert([] { throw std::runtime_error("boom"); });
  EXPECT_EQ(other.code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace ts::store
