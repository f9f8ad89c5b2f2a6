// The web dashboard end to end (issue 12): two real `touchstone sweep`s of a small catalog (a
// defect-free profile, then sim-2.1 with the first as baseline; one model's id holds a <script>
// tag), `touchstone serve` over their state folder, and a headless Chromium over every page.
// What the pages show is compared with the Query API read here over gRPC with the reader
// token (not with the JSON the pages fetched). Screenshots: <build>/dashboard-screenshots/e2e.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "services/common/auth.h"
#include "services/common/http_server.h"
#include "services/common/process.h"
#include "services/scheduler/dashboard_test_util.h"
#include "tests/fixtures/subprocess.h"
#include "tests/fixtures/webdriver.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts {
namespace {

namespace fs = std::filesystem;
namespace pb = ::touchstone::v1;
using json = nlohmann::json;
using namespace scheduler::dashboard_test;
using ::ts::testing::ReadText;

const std::string kBin = TS_BIN_DIR;
constexpr int kModels = 24;
const std::string kEvil = "e2e/<script>window.__xss=1</script>";

class DashboardE2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/ts-dashboard-e2e-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = new fs::path(tmpl);
    // A small catalog from the reference data; its first model renamed to the <script> id.
    const std::string data = std::string(TS_SOURCE_DIR) + "/../shared/data";
    auto gen = testing::RunProcess({kBin + "/touchstone", "catalog", "generate", "--count",
                                    std::to_string(kModels), "--out",
                                    (*dir_ / "generated.jsonl").string(), "--data", data},
                                   "", 300);
    ASSERT_EQ(gen.exit_code, 0) << testing::Describe(gen) << gen.err;
    std::istringstream in(ReadText(*dir_ / "generated.jsonl"));
    std::ofstream out(*dir_ / "catalog.jsonl");
    int n = 0;
    for (std::string line; std::getline(in, line);) {
      if (line.empty()) continue;
      json row = json::parse(line);
      if (n++ == 0) row["id"] = kEvil;
      out << row.dump() << "\n";
    }
    out.close();
    json clean = json::parse(ReadText(fs::path(TS_PROFILES_DIR) / "sim-2.0.json"));
    clean["defects"] = json::array();
    clean["name"] = "sim-2.0";  // the line "sim", as sim-2.1: the Overview's changes are vs it
    std::ofstream(*dir_ / "clean.json") << clean.dump();
    base_id_ = Sweep((*dir_ / "clean.json").string(), 0, "base");
    head_id_ = Sweep(std::string(TS_PROFILES_DIR) + "/sim-2.1.json", base_id_, "head");
    StartServe();
  }
  static void TearDownTestSuite() {
    if (serve_pid_ > 0) common::Stop(serve_pid_, 60);
    std::error_code ec;
    fs::remove_all(*dir_, ec);
    delete dir_;
  }

  static int64_t Sweep(const std::string& profile, int64_t baseline, const std::string& tag) {
    std::vector<std::string> argv = {
        kBin + "/touchstone", "sweep", "--catalog", (*dir_ / "catalog.jsonl").string(),
        "--sample", "all", "--workers", "2", "--modes", "eager,compile,train", "--profile",
        profile, "--state-dir", (*dir_ / "state").string(), "--json",
        (*dir_ / (tag + ".json")).string()};
    if (baseline > 0) {
      argv.push_back("--baseline");
      argv.push_back(std::to_string(baseline));
    }
    auto r = testing::RunProcess(argv, "", 900);
    EXPECT_EQ(r.exit_code, 0) << testing::Describe(r) << r.err;
    return json::parse(ReadText(*dir_ / (tag + ".json")))["sweep_id"].get<int64_t>();
  }

  static void StartServe() {
    common::SpawnOptions o;
    o.log_path = (*dir_ / "serve.log").string();
    o.new_process_group = true;
    auto pid = common::Spawn(
        {kBin + "/touchstone", "serve", "--state-dir", (*dir_ / "state").string()}, o);
    ASSERT_TRUE(pid.ok()) << pid.status();
    serve_pid_ = *pid;
    auto e = testing::WaitForServing((*dir_ / "serve.log").string());
    ASSERT_TRUE(e.has_value()) << "no 'serving:' line from touchstone serve:\n"
                               << ReadText(*dir_ / "serve.log");
    grpc_ = e->grpc;
    http_ = e->http;
    tokens_ = e->tokens;
    auto t = common::ReadClientToken(tokens_, {common::Role::kReader});
    ASSERT_TRUE(t.ok()) << t.status();
    reader_ = *t;
  }

  static pb::Summary Summary(int64_t sweep, pb::GroupBy by) {
    auto stub = pb::Query::NewStub(grpc::CreateChannel(grpc_, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + reader_);
    pb::GetSummaryRequest r;
    r.set_sweep_id(sweep);
    r.set_group_by(by);
    pb::Summary s;
    auto st = stub->GetSummary(&ctx, r, &s);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return s;
  }

  static fs::path* dir_;
  static std::string grpc_, http_, tokens_, reader_;
  static int64_t base_id_, head_id_;
  static pid_t serve_pid_;
};

fs::path* DashboardE2eTest::dir_ = nullptr;
std::string DashboardE2eTest::grpc_, DashboardE2eTest::http_, DashboardE2eTest::tokens_,
    DashboardE2eTest::reader_;
int64_t DashboardE2eTest::base_id_ = 0, DashboardE2eTest::head_id_ = 0;
pid_t DashboardE2eTest::serve_pid_ = -1;

TEST_F(DashboardE2eTest, EveryPageAgainstTheQueryApi) {
  ASSERT_FALSE(http_.empty());
  const int port = std::stoi(http_.substr(http_.rfind(':') + 1));
  // Without the token: the API refuses, a browser is sent to the login page.
  auto none = common::HttpGet(port, "/api/v1/overview");
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(common::HttpGet(port, "/api/v1/overview", reader_)->status, 200);

  const fs::path shots = fs::path(TS_BUILD_DIR) / "dashboard-screenshots" / "e2e";
  fs::create_directories(shots);
  auto browser = testing::Browser::Start(dir_->string());
  ASSERT_TRUE(browser.ok()) << browser.status();
  testing::Browser& b = **browser;
  const std::string base = "http://" + http_;
  ASSERT_TRUE(b.Navigate(base + "/trends").ok());
  EXPECT_EQ(b.current_url(), base + "/login");
  ASSERT_TRUE(b.Execute("document.getElementById('token').value = arguments[0];"
                        "document.querySelector('form').submit();",
                        json::array({reader_}))
                  .ok());
  ASSERT_TRUE(b.WaitFor("return location.pathname === '/' && "
                        "document.body.getAttribute('data-ready');").ok());

  // Overview: the newest sweep of the line (sim) against its GetSummary; the changes against
  // the previous sweep's.
  Visit(b, base, "/");
  const pb::Summary head = Summary(head_id_, pb::GROUP_BY_TASK);
  const pb::Summary prev = Summary(base_id_, pb::GROUP_BY_TASK);
  ASSERT_GT(head.rows_size(), 0);
  EXPECT_EQ(*b.Execute("return document.querySelectorAll('section.line').length;"), 1);
  EXPECT_EQ(*b.Execute("return document.querySelector('section.line').getAttribute('data-sweep');"),
            std::to_string(head_id_));
  auto cells = Cells(b, "section.line[data-line=\"sim\"] tr[data-group]");
  ASSERT_EQ(cells.size(), static_cast<size_t>(head.rows_size() + 2));
  for (const auto& row : head.rows()) ExpectRowShown(cells[row.group()], row, "overview");
  ExpectRowShown(cells["Total"], head.total(), "overview Total");
  ExpectRowShown(cells["Class-weighted"], head.class_weighted(), "overview Class-weighted");
  auto delta = b.Execute("return Number(document.querySelector("
                         "'tr[data-group=\"Total\"] td[data-field=\"eagerPct\"] .delta')"
                         ".getAttribute('data-delta'));");
  ASSERT_TRUE(delta.ok());
  EXPECT_NEAR(delta->get<double>(), head.total().eager_pct() - prev.total().eager_pct(), 1e-9);
  EXPECT_TRUE(b.Screenshot((shots / "overview.png").string()).ok());

  // Classes: every class row of the sweep.
  Visit(b, base, "/classes?sweep=" + std::to_string(head_id_));
  const pb::Summary classes = Summary(head_id_, pb::GROUP_BY_ARCH);
  cells = Cells(b, "table.classes tr[data-group]");
  ASSERT_EQ(cells.size(), static_cast<size_t>(classes.rows_size()));
  for (const auto& row : classes.rows()) ExpectRowShown(cells[row.group()], row, "classes");
  EXPECT_TRUE(b.Screenshot((shots / "classes.png").string()).ok());

  Visit(b, base, "/trends");
  EXPECT_GT(CanvasPixels(b, "canvas.trend"), 1000);
  EXPECT_TRUE(b.Screenshot((shots / "trends.png").string()).ok());

  Visit(b, base, "/ops");
  EXPECT_TRUE(b.Screenshot((shots / "ops.png").string()).ok());
  Visit(b, base, "/alerts");
  EXPECT_TRUE(b.Screenshot((shots / "alerts.png").string()).ok());

  // The <script> model: shown as text, ran nothing; its loss curves drawn.
  std::string encoded;
  for (unsigned char c : kEvil) {
    char buf[4];
    std::snprintf(buf, sizeof buf, "%%%02X", c);
    encoded += buf;
  }
  Visit(b, base, "/model?id=" + encoded);
  EXPECT_EQ(*b.Execute("return document.getElementById('title').textContent;"), kEvil);
  EXPECT_EQ(*b.Execute("return window.__xss === undefined;"), true);
  EXPECT_EQ(*b.Execute("return document.querySelectorAll('#history tbody tr').length;"), 2);
  EXPECT_GT(CanvasPixels(b, "#loss-chart"), 1000);
  EXPECT_TRUE(b.Screenshot((shots / "model.png").string()).ok());
  const std::string arch = b.Execute("return document.querySelector('#identity a').textContent;")
                               ->get<std::string>();
  Visit(b, base, "/class?sweep=" + std::to_string(head_id_) + "&arch=" + arch);
  EXPECT_EQ(*b.Execute("return Array.from(document.querySelectorAll('tr[data-model] a'))"
                       ".some(a => a.textContent === arguments[0]);",
                       json::array({kEvil})),
            true);
  EXPECT_EQ(*b.Execute("return window.__xss === undefined;"), true);
  EXPECT_TRUE(b.Screenshot((shots / "class.png").string()).ok());
}

// The Classes page's speedup and MFU columns against a recount from the head sweep's
// ListResults alone: per class, the geometric mean of the compile speedups and the median of
// the compiled MFUs of its models whose compile passed with a speedup; '–' for a class without
// one. Clicking the Speedup header sorts the rows by it.
TEST_F(DashboardE2eTest, ClassesPageSpeedupAndMfuEqualARecountFromListResults) {
  ASSERT_FALSE(http_.empty());
  auto stub =
      pb::Scheduler::NewStub(grpc::CreateChannel(grpc_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer " + reader_);
  pb::ListResultsRequest req;
  req.set_sweep_id(head_id_);
  auto reader = stub->ListResults(&ctx, req);
  std::map<std::string, std::vector<double>> speedups, mfus;  // class -> values
  std::set<std::string> archs;
  pb::ResultPage page;
  while (reader->Read(&page)) {
    for (const auto& row : page.rows()) {
      archs.insert(row.arch());
      auto it = row.perf().find("compile");
      if (it == row.perf().end() || !std::isfinite(it->second.speedup())) continue;
      speedups[row.arch()].push_back(it->second.speedup());
      mfus[row.arch()].push_back(it->second.mfu());
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_FALSE(speedups.empty()) << "no model of the head sweep compiled with a speedup";

  auto browser = testing::Browser::Start(dir_->string());
  ASSERT_TRUE(browser.ok()) << browser.status();
  testing::Browser& b = **browser;
  const std::string base = "http://" + http_;
  ASSERT_TRUE(b.Navigate(base + "/login").ok());
  ASSERT_TRUE(b.Execute("document.getElementById('token').value = arguments[0];"
                        "document.querySelector('form').submit();",
                        json::array({reader_}))
                  .ok());
  ASSERT_TRUE(b.WaitFor("return location.pathname === '/' && "
                        "document.body.getAttribute('data-ready');")
                  .ok());
  Visit(b, base, "/classes?sweep=" + std::to_string(head_id_));
  auto cells = Cells(b, "table.classes tr[data-group]");
  ASSERT_EQ(cells.size(), archs.size());
  for (const std::string& arch : archs) {
    const auto& row = cells[arch];
    if (!speedups.count(arch)) {
      EXPECT_EQ(row.at("geomeanSpeedup").text, "–") << arch;
      EXPECT_EQ(row.at("medianMfu").text, "–") << arch;
      continue;
    }
    double logs = 0;
    for (double v : speedups[arch]) logs += std::log(v);
    const double geomean = std::exp(logs / speedups[arch].size());
    std::vector<double> m = mfus[arch];
    std::sort(m.begin(), m.end());
    const size_t n = m.size();
    const double median = n % 2 ? m[n / 2] : (m[n / 2 - 1] + m[n / 2]) / 2;
    EXPECT_NEAR(row.at("geomeanSpeedup").value, geomean, 1e-9 * geomean) << arch;
    EXPECT_NEAR(row.at("medianMfu").value, median, 1e-9 * median) << arch;
    char shown[32];
    std::snprintf(shown, sizeof shown, "%.2f×", row.at("geomeanSpeedup").value);
    EXPECT_EQ(row.at("geomeanSpeedup").text, shown) << arch;
  }
  // Sorted by Speedup (ascending on the first click; classes without one first).
  ASSERT_TRUE(b.Execute("Array.from(document.querySelectorAll('table.classes th'))"
                        ".find(th => th.textContent === 'Speedup').click();")
                  .ok());
  auto order = b.Execute(
      "return Array.from(document.querySelectorAll('table.classes tbody tr'))"
      ".map(tr => Number(tr.querySelector('td[data-field=\"geomeanSpeedup\"]')"
      ".getAttribute('data-value')));");
  ASSERT_TRUE(order.ok()) << order.status();
  std::vector<double> values = order->get<std::vector<double>>();
  EXPECT_TRUE(std::is_sorted(values.begin(), values.end()));
  const fs::path shots = fs::path(TS_BUILD_DIR) / "dashboard-screenshots" / "e2e";
  fs::create_directories(shots);
  EXPECT_TRUE(b.Screenshot((shots / "classes-speedup.png").string()).ok());
}

}  // namespace
}  // namespace ts
