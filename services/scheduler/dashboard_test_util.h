// The dashboard tests' shared checks (services/scheduler/dashboard_test.cc on hand-reported
// sweeps, tests/dashboard_e2e_test.cc after a real `touchstone sweep`): a headless Chromium
// logs in through the login form and visits every page; what the pages show is compared with
// what the test reads itself over gRPC.
#pragma once

#include <cmath>
#include <filesystem>
#include <map>
#include <string>

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

// A row of the page equals the API's: the exact value in data-value, and the text shown is it
// with one decimal (a count: as is).
inline void ExpectRowShown(const std::map<std::string, Cell>& shown, const pb::SummaryRow& api,
                           const std::string& where) {
  const std::pair<const char*, double> fields[] = {
      {"models", static_cast<double>(api.models())}, {"eagerPct", api.eager_pct()},
      {"opcovPct", api.opcov_pct()}, {"compilePct", api.compile_pct()},
      {"trainPct", api.train_pct()}};
  for (const auto& [field, want] : fields) {
    auto it = shown.find(field);
    if (it == shown.end()) continue;  // a column the page does not have
    EXPECT_EQ(it->second.value, want) << where << " " << field;
    if (std::string(field) == "models") {
      EXPECT_EQ(it->second.text, std::to_string(api.models())) << where;
    } else {
      EXPECT_NEAR(std::stod(it->second.text), want, 0.05 + 1e-9) << where << " " << field;
      EXPECT_EQ(it->second.text.find('.'), it->second.text.size() - 2) << it->second.text;
    }
  }
}

}  // namespace ts::scheduler::dashboard_test
