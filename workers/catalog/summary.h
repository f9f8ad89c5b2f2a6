// Per-task conformance table in the shape of the published one: task, models, Eager %,
// Mean OpCov %, Compile %, then Total (model-weighted) and the class-equal-weighted total
// (each architecture class counts once: the mean of per-class rates).
//
// Thread-safety: Summary is a value; Add is not synchronised.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ts::catalog {

struct TaskLine {
  std::string task;
  int64_t models = 0;
  double eager_pct = 0, opcov_pct = 0, compile_pct = 0, train_pct = 0;
};

class Summary {
 public:
  // `result` is the JSON view of one model's result record (workers/runner/record_json.h).
  void Add(const std::string& task, const std::string& arch, const nlohmann::json& result);

  std::vector<TaskLine> Tasks() const;
  TaskLine Total() const;
  TaskLine ClassWeighted() const;
  std::map<std::string, int64_t> Statuses() const { return statuses_; }  // over all mode verdicts

  nlohmann::json ToJson() const;
  std::string ToText() const;

 private:
  struct Acc {
    int64_t models = 0, eager = 0, compile = 0, train = 0;
    double opcov = 0;
  };
  static TaskLine Line(const std::string& name, const Acc& a);
  std::map<std::string, Acc> by_task_;
  std::map<std::string, Acc> by_class_;
  Acc total_;
  std::map<std::string, int64_t> statuses_;
};

}  // namespace ts::catalog
