// The dashboard tests' shared checks (services/scheduler/dashboard_test.cc on hand-reported
// sweeps, tests/dashboard_e2e_test.cc after a real `touchstone sweep`): a headless Chromium
// logs in through the login form and visits every page; what the pages show is compared with
// what the test reads itself over gRPC.
#pragma once

#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/fixtures/webdriver.h"
#include "touchstone/v1/query.pb.h"

namespace ts::scheduler::dashboard_test {

namespace pb = ::touchstone::v1;
using json = nlohmann::json;

// Loads `path` and waits for the page's data (body[data-ready]); fails on a page error.
inline void Visit(testing::Browser& b, const std::string& base, const std::string& path) {
  ASSERT_TRUE(b.Navigate(base + path).ok()) << path;
  auto ready = b.WaitFor("return document.body && document.body.getAttribute('data-ready');", 60);
  ASSERT_TRUE(ready.ok()) << path << ": " << ready.status();
  auto status = b.Execute("return document.getElementById('status').textContent;");
  EXPECT_EQ(*ready, "1") << path << ": " << (status.ok() ? status->dump() : "");
}

// The non-transparent pixels of the page's canvases (a drawn chart has many).
inline int64_t CanvasPixels(testing::Browser& b, const std::string& selector) {
  auto n = b.Execute(
      "let n = 0; for (const c of document.querySelectorAll(arguments[0])) {"
      "  const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
      "  for (let i = 3; i < d.length; i += 4) if (d[i] !== 0) n++; } return n;",
      json::array({selector}));
  EXPECT_TRUE(n.ok()) << n.status();
  return n.ok() ? n->get<int64_t>() : 0;
}

// The cells of the table rows under `selector`: group -> field -> {shown text, data-value}.
struct Cell {
  std::string text;
  double value = 0;
};
inline std::map<std::string, std::map<std::string, Cell>> Cells(testing::Browser& b,
                                                                 const std::string& selector) {
  auto v = b.Execute(
      "const out = {}; for (const tr of document.querySelectorAll(arguments[0])) {"
      "  const row = {}; for (const td of tr.querySelectorAll('td[data-field]')) {"
      "    const shown = td.querySelector('.value') || td;"
      "    row[td.getAttribute('data-field')] = [shown.textContent, td.getAttribute('data-value')]; }"
      "  out[tr.getAttribute('data-group')] = row; } return out;",
      json::array({selector}));
  std::map<std::string, std::map<std::string, Cell>> out;
  EXPECT_TRUE(v.ok()) << v.status();
  if (!v.ok()) return out;
  for (const auto& [group, row] : v->items()) {
    for (const auto& [field, cell] : row.items()) {
      out[group][field] = {cell[0].get<std::string>(), std::stod(cell[1].get<std::string>())};
    }
  }
  return out;
}

// The value columns of the pages' tables (dashboards/web: overview.js COLUMNS, classes.js
// FIELDS), by the API's field names.
inline const std::vector<std::string> kOverviewFields = {"models", "eagerPct", "opcovPct",
                                                         "compilePct"};
inline const std::vector<std::string> kClassesFields = {"models", "eagerPct", "compilePct",
                                                        "trainPct", "opcovPct"};

inline double FieldOf(const pb::SummaryRow& row, const std::string& field) {
  if (field == "models") return static_cast<double>(row.models());
  if (field == "eagerPct") return row.eager_pct();
  if (field == "opcovPct") return row.opcov_pct();
  if (field == "compilePct") return row.compile_pct();
  if (field == "trainPct") return row.train_pct();
  ADD_FAILURE() << "no SummaryRow field " << field;
  return NAN;
}

// A row of the page shows `want(field)` for each of `fields`: the value in data-value (exactly,
// or within `tolerance` of a recount that sums in another order), and the text shown is it with
// one decimal (a count: as is). A row the page lacks, or a field it does not show, is a failure.
inline void ExpectRowShown(const std::map<std::string, std::map<std::string, Cell>>& table,
                           const std::string& group, const std::vector<std::string>& fields,
                           const std::function<double(const std::string&)>& want,
                           const std::string& where, double tolerance = 0) {
  auto row = table.find(group);
  if (row == table.end()) {
    ADD_FAILURE() << where << ": the page has no row " << group;
    return;
  }
  for (const std::string& field : fields) {
    auto it = row->second.find(field);
    if (it == row->second.end()) {
      ADD_FAILURE() << where << " " << group << ": the page shows no " << field;
      continue;
    }
    const double v = want(field);
    EXPECT_NEAR(it->second.value, v, tolerance) << where << " " << group << " " << field;
    if (field == "models") {
      EXPECT_EQ(it->second.text, std::to_string(static_cast<int64_t>(v))) << where << " " << group;
    } else {
      EXPECT_NEAR(std::stod(it->second.text), v, 0.05 + 1e-9) << where << " " << group << " "
                                                              << field;
      EXPECT_EQ(it->second.text.find('.'), it->second.text.size() - 2) << it->second.text;
    }
  }
}

inline void ExpectRowShown(const std::map<std::string, std::map<std::string, Cell>>& table,
                           const pb::SummaryRow& api, const std::vector<std::string>& fields,
                           const std::string& where) {
  ExpectRowShown(
      table, api.group(), fields, [&](const std::string& f) { return FieldOf(api, f); }, where);
}

// The page's table is the summary: exactly its rows (and, with `totals`, Total and
// Class-weighted), each as ExpectRowShown.
inline void ExpectTableShown(const std::map<std::string, std::map<std::string, Cell>>& table,
                             const pb::Summary& api, const std::vector<std::string>& fields,
                             bool totals, const std::string& where) {
  std::set<std::string> want, shown;
  for (const auto& row : api.rows()) want.insert(row.group());
  if (totals) want.insert({"Total", "Class-weighted"});
  for (const auto& [group, cells] : table) shown.insert(group);
  EXPECT_EQ(shown, want) << where << ": the page's rows";
  for (const auto& row : api.rows()) ExpectRowShown(table, row, fields, where);
  if (!totals) return;
  ExpectRowShown(table, api.total(), fields, where);
  ExpectRowShown(table, api.class_weighted(), fields, where);
}

// What a Chart.js chart on the page draws (Chart.getChart(canvas).data): {labels: [...],
// datasets: [{label, data: [...]}, ...]}; null when `selector` matches no chart.
inline json ChartData(testing::Browser& b, const std::string& selector) {
  auto v = b.Execute(
      "const c = document.querySelector(arguments[0]); const ch = c && Chart.getChart(c);"
      "if (!ch) return null;"
      "return {labels: ch.data.labels, datasets: ch.data.datasets.map("
      "  d => ({label: d.label === undefined ? '' : d.label, data: d.data}))};",
      json::array({selector}));
  EXPECT_TRUE(v.ok()) << selector << ": " << v.status();
  return v.ok() ? *v : json();
}

}  // namespace ts::scheduler::dashboard_test
