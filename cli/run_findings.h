// What `touchstone run-catalog` found beyond the per-task table: the non-pass modes (the first
// 100, with their errors), the modes replayed op by op, those naming a suspect, and the first
// suspects by how many modes name them. Printed as the JSON's "suspects" block and as lines
// under the text table.
//
// Thread-safety: a value type; one caller.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "touchstone/v1/result.pb.h"

namespace ts::cli {

class RunFindings {
 public:
  static constexpr size_t kMaxFailures = 100;

  void Add(const std::string& model_id, const ::touchstone::v1::ModelResult& record);

  // {"audited_modes", "modes_with_suspects", "first_suspects": {op: modes}, "failures": [...]}
  nlohmann::json Json() const;
  // "op-by-op replays: N modes, M with suspects aten::gelux3", then one line per failure.
  std::string Text() const;

 private:
  int64_t audited_ = 0, with_suspects_ = 0;
  std::map<std::string, int64_t> first_ops_;
  nlohmann::json failures_ = nlohmann::json::array();
};

}  // namespace ts::cli
