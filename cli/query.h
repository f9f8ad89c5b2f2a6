// The query commands: `touchstone sweeps | summary | model | ops | breaks | compare | gate`,
// clients of a running scheduler's Query API (proto/touchstone/v1/query.proto). Each takes
// the shared client flags (client.h) and prints text tables (100 columns) or, with
// --format json, the answer's protobuf JSON.
//
// Exit codes: 0 answered (gate: passed); 1 gate failed; 2 usage or a request the server
// refused as bad (INVALID_ARGUMENT, NOT_FOUND, FAILED_PRECONDITION, PERMISSION_DENIED,
// UNAUTHENTICATED), the message naming the field; 3 no answer (scheduler unreachable, timeout).
#pragma once

#include <string>
#include <vector>

namespace ts::cli {

// True when `cmd` is one of the query commands.
bool IsQueryCommand(const std::string& cmd);
int QueryCommand(const std::string& cmd, const std::vector<std::string>& args);

}  // namespace ts::cli
