#include "services/store/pg_status.h"

#include <pqxx/pqxx>

namespace ts::store {

absl::StatusCode CodeForSqlState(const std::string& s) {
  if (s.size() != 5) return absl::StatusCode::kInternal;
  const std::string cls = s.substr(0, 2);
  if (cls == "08" || s == "57P01" || s == "57P02" || s == "57P03") {
    return absl::StatusCode::kUnavailable;
  }
  if (s == "40001" || s == "40P01") return absl::StatusCode::kAborted;
  if (s == "23505") return absl::StatusCode::kAlreadyExists;
  if (s == "23503") return absl::StatusCode::kNotFound;
  if (cls == "22") return absl::StatusCode::kInvalidArgument;
  if (cls == "53") return absl::StatusCode::kResourceExhausted;
  return absl::StatusCode::kInternal;
}

absl::Status StatusFromCurrentException(const std::string& what) {
  try {
    throw;
  } catch (const pqxx::broken_connection& e) {
    return absl::UnavailableError(what + ": database connection lost: " + e.what());
  } catch (const pqxx::in_doubt_error& e) {
    return absl::UnavailableError(what + ": commit in doubt (retry; writes are idempotent): " +
                                  e.what());
  } catch (const pqxx::sql_error& e) {
    return absl::Status(CodeForSqlState(e.sqlstate()),
                        what + ": " + e.what() + " [SQLSTATE " + e.sqlstate() + "]");
  } catch (const std::exception& e) {
    return absl::InternalError(what + ": " + e.what());
  }
}

}  // namespace ts::store
