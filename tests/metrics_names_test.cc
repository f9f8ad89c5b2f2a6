// Every metric that the Prometheus rules (dashboards/prometheus/*.yml: the rules and their unit
// tests' series) and the Grafana dashboards (the PromQL `expr` of dashboards/grafana/dashboards/
// *.json) name is one that a real touchstone-scheduler or touchstone-worker exports on /metrics,
// scraped after a small sweep so that labelled families have members. The names are read from
// the files, so a rule or a panel added later is checked too; a misspelled or renamed metric
// would otherwise leave an alert that never fires and a panel that stays empty.
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "services/store/embedded_postgres.h"
#include "tests/sweep_fixture.h"

namespace ts {
namespace {

// The metric names a /metrics exposition offers: each sample's name, and each family declared
// by "# TYPE" with the series names its type implies (a histogram's _bucket, _sum and _count).
std::set<std::string> ExportedNames(const std::string& exposition) {
  std::set<std::string> out;
  std::istringstream in(exposition);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("# TYPE ", 0) == 0) {
      std::istringstream t(line.substr(7));
      std::string name, type;
      t >> name >> type;
      out.insert(name);
      if (type == "histogram" || type == "summary") {
        out.insert({name + "_sum", name + "_count"});
        if (type == "histogram") out.insert(name + "_bucket");
      }
      continue;
    }
    if (line.empty() || line[0] == '#') continue;
    out.insert(line.substr(0, line.find_first_of("{ ")));
  }
  return out;
}

// Our metric names in `text` (touchstone_...; recording rules, touchstone:..., are defined by the
// rules themselves), each with `where` it was found.
void NamesIn(const std::string& text, const std::string& where,
             std::map<std::string, std::string>* out) {
  static const std::regex kName("\\btouchstone_[a-z0-9_]+");
  for (std::sregex_iterator it(text.begin(), text.end(), kName), end; it != end; ++it) {
    out->emplace(it->str(), where);
  }
}

// The PromQL of every "expr" in a Grafana dashboard's JSON.
void Exprs(const json& j, const std::string& where, std::map<std::string, std::string>* out) {
  if (j.is_object()) {
    for (const auto& [key, value] : j.items()) {
      if (key == "expr" && value.is_string()) NamesIn(value.get<std::string>(), where, out);
      Exprs(value, where, out);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) Exprs(v, where, out);
  }
}

std::map<std::string, std::string> ReferencedNames() {
  std::map<std::string, std::string> out;
  const fs::path dashboards = fs::path(TS_SOURCE_DIR) / "dashboards";
  for (const auto& e : fs::directory_iterator(dashboards / "prometheus")) {
    if (e.path().extension() != ".yml" && e.path().extension() != ".yaml") continue;
    std::istringstream in(ReadText(e.path()));
    std::string text;
    for (std::string line; std::getline(in, line);) {
      const size_t first = line.find_first_not_of(" \t");
      if (first != std::string::npos && line[first] == '#') continue;  // prose
      text += line + "\n";
    }
    NamesIn(text, e.path().filename().string(), &out);
  }
  for (const auto& e : fs::directory_iterator(dashboards / "grafana" / "dashboards")) {
    if (e.path().extension() != ".json") continue;
    Exprs(json::parse(ReadText(e.path())), e.path().filename().string(), &out);
  }
  return out;
}

TEST_F(SweepTest, EveryMetricTheRulesAndDashboardsNameIsExported) {
  const std::map<std::string, std::string> referenced = ReferencedNames();
  // The files name about ten of ours today: fewer would mean this test reads them wrong.
  ASSERT_GE(referenced.size(), 8u) << "read too few names from dashboards/";

  StartScheduler();
  auto worker_http = store::FreeLoopbackPort();
  ASSERT_TRUE(worker_http.ok()) << worker_http.status();
  worker_args_ = {"--http-port", std::to_string(*worker_http)};
  const int64_t sweep = CreateSweep(2, Cheap, json::array());
  StartWorker("w1");
  WaitFor(sweep, [](const pb::SweepProgress& p) { return p.state() == "done"; }, 300);

  std::set<std::string> exported;
  for (const auto& [what, port] : {std::pair{"scheduler", http_port_},
                                   std::pair{"worker", *worker_http}}) {
    auto m = common::HttpGet(port, "/metrics");
    ASSERT_TRUE(m.ok()) << what << ": " << m.status();
    ASSERT_EQ(m->status, 200) << what;
    const std::set<std::string> names = ExportedNames(m->body);
    EXPECT_GT(names.size(), 5u) << what << " exports almost nothing:\n" << m->body;
    exported.insert(names.begin(), names.end());
  }
  for (const auto& [name, where] : referenced) {
    EXPECT_TRUE(exported.count(name)) << where << " names " << name
                                      << ", which neither the scheduler nor the worker exports";
  }
}

}  // namespace
}  // namespace ts
