#include "cli/run_findings.h"

#include "proto/names.h"

namespace ts::cli {

void RunFindings::Add(const std::string& model_id, const ::touchstone::v1::ModelResult& record) {
  for (const auto& m : record.modes()) {
    if (m.status() != ::touchstone::v1::VERDICT_PASS && failures_.size() < kMaxFailures) {
      failures_.push_back({{"model_id", model_id}, {"arch", record.arch()},
                           {"mode", proto::ModeName(m.mode())},
                           {"status", proto::VerdictName(m.status())}, {"error", m.error()}});
    }
    if (!m.audited()) continue;
    ++audited_;
    if (m.suspects().empty()) continue;
    ++with_suspects_;
    ++first_ops_[m.suspects(0).op()];
  }
}

nlohmann::json RunFindings::Json() const {
  return {{"audited_modes", audited_}, {"modes_with_suspects", with_suspects_},
          {"first_suspects", first_ops_}, {"failures", failures_}};
}

std::string RunFindings::Text() const {
  std::string out = "op-by-op replays: " + std::to_string(audited_) + " modes, " +
                    std::to_string(with_suspects_) + " with suspects";
  for (const auto& [op, n] : first_ops_) out += " " + op + "x" + std::to_string(n);
  out += "\n";
  for (const auto& f : failures_) {
    out += "  " + f["model_id"].get<std::string>() + " " + f["mode"].get<std::string>() + " " +
           f["status"].get<std::string>() + ": " + f["error"].get<std::string>() + "\n";
  }
  return out;
}

}  // namespace ts::cli
