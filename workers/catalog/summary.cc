#include "workers/catalog/summary.h"

#include <cstdio>

namespace ts::catalog {

void Summary::Add(const std::string& task, const std::string& arch, const nlohmann::json& r) {
  auto pass = [&](const char* mode) {
    if (!r.contains("modes") || !r["modes"].contains(mode)) return false;
    return r["modes"][mode].value("status", std::string()) == "pass";
  };
  double opcov = 0;
  if (r.contains("op_coverage") && r["op_coverage"].contains("ratio") &&
      r["op_coverage"]["ratio"].is_number()) {
    opcov = r["op_coverage"]["ratio"].get<double>();
  }
  for (Acc* a : {&by_task_[task], &by_class_[arch], &total_}) {
    a->models += 1;
    a->eager += pass("eager");
    a->compile += pass("compile");
    a->train += pass("train");
    a->opcov += opcov;
  }
  if (r.contains("modes")) {
    for (const auto& [mode, m] : r["modes"].items()) {
      const std::string s = m.value("status", std::string("?"));
      if (s != "skipped") statuses_[s] += 1;
    }
  }
}

TaskLine Summary::Line(const std::string& name, const Acc& a) {
  TaskLine l;
  l.task = name;
  l.models = a.models;
  if (a.models == 0) return l;
  const double n = static_cast<double>(a.models);
  l.eager_pct = 100.0 * a.eager / n;
  l.compile_pct = 100.0 * a.compile / n;
  l.train_pct = 100.0 * a.train / n;
  l.opcov_pct = 100.0 * a.opcov / n;
  return l;
}

std::vector<TaskLine> Summary::Tasks() const {
  std::vector<TaskLine> out;
  for (const auto& [task, a] : by_task_) out.push_back(Line(task, a));
  return out;
}

TaskLine Summary::Total() const { return Line("Total", total_); }

TaskLine Summary::ClassWeighted() const {
  TaskLine l;
  l.task = "Class-weighted";
  l.models = total_.models;
  if (by_class_.empty()) return l;
  for (const auto& [arch, a] : by_class_) {
    TaskLine c = Line(arch, a);
    l.eager_pct += c.eager_pct;
    l.compile_pct += c.compile_pct;
    l.train_pct += c.train_pct;
    l.opcov_pct += c.opcov_pct;
  }
  const double k = static_cast<double>(by_class_.size());
  l.eager_pct /= k;
  l.compile_pct /= k;
  l.train_pct /= k;
  l.opcov_pct /= k;
  return l;
}

namespace {
nlohmann::json LineJson(const TaskLine& l) {
  return {{"task", l.task},           {"models", l.models},
          {"eager_pct", l.eager_pct}, {"opcov_pct", l.opcov_pct},
          {"compile_pct", l.compile_pct}, {"train_pct", l.train_pct}};
}
}  // namespace

nlohmann::json Summary::ToJson() const {
  nlohmann::json tasks = nlohmann::json::array();
  for (const auto& l : Tasks()) tasks.push_back(LineJson(l));
  nlohmann::json cw = LineJson(ClassWeighted());
  cw["classes"] = by_class_.size();
  return {{"tasks", tasks}, {"total", LineJson(Total())}, {"class_weighted", cw},
          {"statuses", Statuses()}};
}

std::string Summary::ToText() const {
  std::string out;
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-32s %7s %8s %12s %10s %8s\n", "Task", "Models", "Eager %",
                "Mean OpCov %", "Compile %", "Train %");
  out += buf;
  auto row = [&](const TaskLine& l) {
    std::snprintf(buf, sizeof(buf), "%-32s %7lld %8.1f %12.1f %10.1f %8.1f\n", l.task.c_str(),
                  static_cast<long long>(l.models), l.eager_pct, l.opcov_pct, l.compile_pct,
                  l.train_pct);
    out += buf;
  };
  for (const auto& l : Tasks()) row(l);
  row(Total());
  TaskLine cw = ClassWeighted();
  cw.task += " (" + std::to_string(by_class_.size()) + " classes)";
  row(cw);
  out += "statuses:";
  for (const auto& [s, n] : statuses_) out += " " + s + "=" + std::to_string(n);
  out += "\n";
  return out;
}

}  // namespace ts::catalog
