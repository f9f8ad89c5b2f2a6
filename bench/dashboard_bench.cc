// Dashboard benchmark (issue 12): how long the web dashboard's Overview and Classes take over a
// filled database (bench/query_fill: N sweeps of the 104,909-model catalog).
//
//   build/bench/dashboard_bench --state-dir DIR [--repeat 50] [--browser-runs 5]
//   build/bench/dashboard_bench --db URL ...
//
// Starts touchstone-scheduler's service in this process over the database (a reader token, its
// HTTP port on loopback), then:
//   1. times complete HTTP responses (request sent to last byte read, one connection each) of
//      the pages' JSON (/api/v1/overview, /api/v1/summary?group_by=arch&modes=0: what Overview and
//      Classes render from) and of the page documents, `--repeat` times each after 2 warm-ups;
//   2. in a headless Chromium (chromium-driver) logged in with the token, loads Overview and
//      Classes `--browser-runs` times each: the navigation's load event, and when the page has
//      drawn its data (body[data-ready]).
// Prints Markdown tables. Every JSON answer is checked (a line with rows; 841 classes or
// whatever the fill has); a failed check exits 1.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_database.h"
#include "services/common/flags.h"
#include "services/common/http_server.h"
#include "services/scheduler/scheduler.h"
#include "tests/fixtures/webdriver.h"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr char kToken[] = "dashboard-bench-reader";

struct Stats {
  double p50 = 0, p99 = 0, max = 0;
};
Stats Summarize(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  auto at = [&](double q) {
    return ms[std::min(ms.size() - 1, static_cast<size_t>(q * static_cast<double>(ms.size())))];
  };
  return {at(0.5), at(0.99), ms.back()};
}

// Checks what an answer must hold; prints why not and returns false.
bool Check(const std::string& path, const ts::common::HttpResponse& r) {
  if (r.status != 200) {
    std::fprintf(stderr, "%s: HTTP %d: %s\n", path.c_str(), r.status, r.body.substr(0, 300).c_str());
    return false;
  }
  if (path.rfind("/api/", 0) != 0) return true;
  json j = json::parse(r.body, nullptr, false);
  const bool ok = !j.is_discarded() &&
                  (path.find("overview") != std::string::npos
                       ? !j["lines"].empty() && !j["lines"][0]["summary"]["rows"].empty()
                       : !j["rows"].empty());
  if (!ok) std::fprintf(stderr, "%s: unexpected answer: %s\n", path.c_str(), r.body.substr(0, 300).c_str());
  return ok;
}

// 1. complete HTTP responses of the pages' JSON and documents, `repeat` times each after 2
// warm-ups. False when an answer fails its check.
bool TimeResponses(int port, int repeat) {
  bool ok = true;
  std::printf("| response (HTTP, complete) | p50 ms | p99 ms | max ms | bytes |\n|---|---|---|---|---|\n");
  for (const std::string path : {"/api/v1/overview", "/api/v1/summary?group_by=arch&modes=0", "/",
                                 "/classes", "/static/chart.min.js"}) {
    std::vector<double> ms;
    size_t bytes = 0;
    for (int i = 0; i < repeat + 2; ++i) {
      const auto t0 = Clock::now();
      auto r = ts::common::HttpGet(port, path, kToken);
      const double t = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
      if (!r.ok() || !Check(path, *r)) {
        ok = false;
        break;
      }
      bytes = r->body.size();
      if (i >= 2) ms.push_back(t);
    }
    if (ms.empty()) continue;
    const Stats s = Summarize(ms);
    std::printf("| `%s` | %.1f | %.1f | %.1f | %zu |\n", path.c_str(), s.p50, s.p99, s.max, bytes);
    std::fflush(stdout);
  }
  return ok;
}

// One page `runs` times after a warm-up: the load event and when the page drew its data.
// False when the page never said it was ready.
bool TimePage(ts::testing::Browser& b, const std::string& url, const std::string& page, int runs) {
  std::vector<double> load, drawn;
  for (int i = 0; i < runs + 1; ++i) {
    if (!b.Navigate(url).ok()) break;
    auto ready = b.WaitFor(
        "return document.body.getAttribute('data-ready') && "
        "[performance.getEntriesByType('navigation')[0].loadEventEnd,"
        " Number(document.body.getAttribute('data-ready-ms'))];",
        120);
    if (!ready.ok() || !ready->is_array()) {
      std::fprintf(stderr, "%s: %s\n", page.c_str(), ready.status().ToString().c_str());
      return false;
    }
    if (i == 0) continue;  // warm-up
    load.push_back((*ready)[0].get<double>());
    drawn.push_back((*ready)[1].get<double>());
  }
  if (load.empty()) return true;
  const Stats l = Summarize(load), d = Summarize(drawn);
  std::printf("| `%s` | %.0f / %.0f | %.0f / %.0f |\n", page.c_str(), l.p50, l.max, d.p50, d.max);
  return true;
}

// 2. Overview and Classes in a headless Chromium logged in with the token, `runs` times each.
// Returns 0, 1 when a page failed, or -1 when no browser starts.
int TimeBrowser(int port, int runs) {
  const std::string dir =
      std::filesystem::temp_directory_path() / ("ts-dashboard-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto browser = ts::testing::Browser::Start(dir);
  if (!browser.ok()) {
    std::fprintf(stderr, "dashboard_bench: %s\n", browser.status().ToString().c_str());
    return -1;
  }
  auto& b = **browser;
  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  (void)b.Navigate(base + "/login");
  (void)b.Execute(
      "document.getElementById('token').value = arguments[0];"
      "document.querySelector('form').submit();",
      json::array({kToken}));
  (void)b.WaitFor("return location.pathname === '/' && document.body.getAttribute('data-ready');",
                  120);
  std::printf(
      "\n| page (headless Chromium) | load event p50 / max ms | data drawn p50 / max ms |\n"
      "|---|---|---|\n");
  bool ok = true;
  for (const std::string page : {"/", "/classes"}) ok = TimePage(b, base + page, page, runs) && ok;
  std::error_code ec;
  browser->reset();
  std::filesystem::remove_all(dir, ec);
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  ts::bench::DatabaseArgs db;
  int repeat = 50, browser_runs = 5;
  ts::flags::Program p("dashboard_bench",
                       "the web dashboard's Overview and Classes over a query_fill database");
  ts::bench::AddDatabaseFlags(p, &db);
  p.Option("--repeat", &repeat, "N", "timed responses of each page after 2 warm-ups").Min(1);
  p.Option("--browser-runs", &browser_runs, "N", "page loads in Chromium (0: none)").Min(0);
  if (auto rc = p.Parse(argc, argv)) return *rc;
  auto database = ts::bench::OpenDatabase(db);
  if (!database.ok()) return p.UsageError(std::string(database.status().message()));

  ts::scheduler::SchedulerOptions o;
  o.db_url = database->url;
  o.tick_s = 3600;  // no lease expiry or summaries while measuring (the fill kept its answers)
  if (!o.tokens.Add(ts::common::Role::kReader, kToken).ok()) return 1;
  auto sched = ts::scheduler::Scheduler::Start(o);
  if (!sched.ok()) {
    std::fprintf(stderr, "dashboard_bench: %s\n", sched.status().ToString().c_str());
    return 1;
  }
  bool ok = TimeResponses((*sched)->http_port(), repeat);
  if (browser_runs > 0) {
    const int rc = TimeBrowser((*sched)->http_port(), browser_runs);
    if (rc < 0) return 1;
    ok = ok && rc == 0;
  }
  (*sched)->Shutdown();
  return ok ? 0 : 1;
}
