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
#include <limits>
#include <map>
#include <set>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "services/common/auth.h"
#include "services/common/http_server.h"
#include "proto/names.h"
#include "services/common/process.h"
#include "services/scheduler/dashboard_test_util.h"
#include "tests/fixtures/subprocess.h"
#include "tests/fixtures/webdriver.h"
#include "services/query/summary_builder.h"
#include "tests/result_recount.h"
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

  // /ops of the head sweep: each mode's heading, table and chart, and the graph-break reasons,
  // against the counts of every model's own record.
  static void ExpectOpsShown(testing::Browser& b, const std::string& base,
                             const std::vector<pb::ResultRow>& rows) {
    auto query = pb::Query::NewStub(grpc::CreateChannel(grpc_, grpc::InsecureChannelCredentials()));
    std::vector<pb::ModelResult> records;
    for (const auto& r : rows) {
      records.push_back(testing::RecordOf(*query, reader_, r.model_id(), head_id_));
    }
    Visit(b, base, "/ops?sweep=" + std::to_string(head_id_));
    using Counts = std::map<std::string, std::pair<int64_t, int64_t>>;  // op -> blocked, alone
    for (auto [mode, name] : {std::pair{pb::MODE_EAGER, std::string("eager")},
                              std::pair{pb::MODE_COMPILE, std::string("compile")}}) {
      const testing::OpDemandRecount want = testing::RecountOpDemand(records, mode);
      const std::string section = "section[data-mode=\"" + name + "\"]";
      EXPECT_EQ(*b.Execute("return document.querySelector(arguments[0] + ' h2').textContent;",
                           json::array({section})),
                "Op demand, " + name + ": " + std::to_string(want.native) + " of " +
                    std::to_string(want.models) + " models native");
      Counts expected, shown;
      for (const auto& [op, n] : want.blocked) expected[op] = {n, want.alone.at(op)};
      const json table = *b.Execute(
          "return Array.from(document.querySelectorAll(arguments[0] + ' table tbody tr')).map("
          "  tr => [tr.cells[0].textContent, Number(tr.cells[1].textContent),"
          "         Number(tr.cells[2].textContent)]);",
          json::array({section}));
      for (const json& r : table) {
        shown[r[0].get<std::string>()] = {r[1].get<int64_t>(), r[2].get<int64_t>()};
      }
      EXPECT_EQ(shown, expected) << name << " table";
      // The chart: the (up to) 25 ops that block the most models, with the same counts.
      const json chart = ChartData(b, "#ops-" + name);
      if (expected.empty()) {
        EXPECT_TRUE(chart.is_null()) << name << ": a chart of nothing";
        continue;
      }
      ASSERT_TRUE(chart.is_object()) << name << ": no chart";
      ASSERT_EQ(chart["datasets"].size(), 2u) << chart.dump();
      const json& labels = chart["labels"];
      ASSERT_EQ(labels.size(), std::min<size_t>(25, expected.size())) << chart.dump();
      int64_t least = std::numeric_limits<int64_t>::max();
      std::set<std::string> charted;
      for (size_t i = 0; i < labels.size(); ++i) {
        const std::string op = labels[i].get<std::string>();
        charted.insert(op);
        auto it = expected.find(op);
        ASSERT_NE(it, expected.end()) << name << " chart names " << op;
        EXPECT_EQ(chart["datasets"][0]["data"][i], it->second.first) << name << " chart " << op;
        EXPECT_EQ(chart["datasets"][1]["data"][i], it->second.second) << name << " chart " << op;
        least = std::min(least, it->second.first);
      }
      for (const auto& [op, n] : expected) {
        if (!charted.count(op)) {
          EXPECT_LE(n.first, least) << name << ": " << op << " left out";
        }
      }
    }
    // Graph-break reasons: the heading, the table and the chart (a label is the reason cut to 60
    // characters).
    const std::map<std::string, int64_t> reasons = testing::RecountBreaks(records);
    int64_t broken = 0;
    for (const auto& r : records) {
      for (const auto& v : r.modes()) {
        broken += v.mode() == pb::MODE_COMPILE && v.break_reasons_size() > 0;
      }
    }
    const std::string section = "section:not([data-mode])";
    EXPECT_EQ(*b.Execute("return document.querySelector(arguments[0] + ' h2').textContent;",
                         json::array({section})),
              "Graph-break reasons: " + std::to_string(broken) + " models break");
    std::map<std::string, int64_t> shown, charted, want_charted;
    const json table = *b.Execute(
        "return Array.from(document.querySelectorAll(arguments[0] + ' table tbody tr')).map("
        "  tr => [tr.cells[0].textContent, Number(tr.cells[1].textContent)]);",
        json::array({section}));
    for (const json& r : table) shown[r[0].get<std::string>()] = r[1].get<int64_t>();
    EXPECT_EQ(shown, reasons) << "graph-break table";
    for (const auto& [reason, n] : reasons) {
      want_charted[reason.size() > 60 ? reason.substr(0, 57) + "..." : reason] = n;
    }
    const json chart = ChartData(b, "#breaks");
    if (reasons.empty()) {
      EXPECT_TRUE(chart.is_null());
      return;
    }
    ASSERT_TRUE(chart.is_object()) << "no graph-break chart";
    for (size_t i = 0; i < chart["labels"].size(); ++i) {
      charted[chart["labels"][i].get<std::string>()] =
          chart["datasets"][0]["data"][i].get<int64_t>();
    }
    if (reasons.size() <= 25) {
      EXPECT_EQ(charted, want_charted) << "graph-break chart";
    }
  }

  // /alerts after detection on the head: the page's alerts are ListAlerts' open ones, each with
  // its models; together they cover exactly `regressions` (model, mode), recounted from results.
  static void ExpectAlertsShown(testing::Browser& b, const std::string& base,
                                const std::set<std::pair<std::string, std::string>>& regressions) {
    ASSERT_FALSE(regressions.empty()) << "sim-2.1 regressed none of the " << kModels << " models";
    auto query = pb::Query::NewStub(grpc::CreateChannel(grpc_, grpc::InsecureChannelCredentials()));
    auto admin = common::ReadClientToken(tokens_, {common::Role::kAdmin});
    ASSERT_TRUE(admin.ok()) << admin.status();
    pb::DetectRegressionsRequest dr;
    dr.set_sweep_id(head_id_);
    pb::DetectRegressionsResponse detected;
    grpc::Status st = query->DetectRegressions(testing::ReaderContext(*admin).get(), dr, &detected);
    ASSERT_TRUE(st.ok()) << st.error_message();
    pb::ListAlertsRequest lr;
    lr.set_state("open");
    lr.set_page_size(1000);
    pb::ListAlertsResponse alerts;
    st = query->ListAlerts(testing::ReaderContext(reader_).get(), lr, &alerts);
    ASSERT_TRUE(st.ok()) << st.error_message();
    std::set<std::pair<std::string, std::string>> covered;
    std::map<std::string, std::set<std::string>> api_models;
    std::set<std::string> regressed_models;
    for (const auto& [model, mode] : regressions) regressed_models.insert(model);
    for (const auto& a : alerts.alerts()) {
      for (const auto& m : a.models()) {
        // Each model names the modes it regressed in for the alert's cause.
        EXPECT_GT(m.modes_size(), 0) << a.alert_id() << " " << m.model_id();
        for (int mode : m.modes()) {
          covered.insert({m.model_id(), proto::ModeName(static_cast<pb::Mode>(mode))});
        }
        api_models[std::to_string(a.alert_id())].insert(m.model_id());
      }
    }
    EXPECT_EQ(covered, regressions) << "the alerts' (model, mode) vs the recount";

    Visit(b, base, "/alerts");
    std::map<std::string, std::set<std::string>> page_models;
    std::set<std::string> shown_models;
    std::set<std::pair<std::string, std::string>> shown_pairs;  // (model, mode) as shown
    const json sections = *b.Execute(
        "return Array.from(document.querySelectorAll('section.alert')).map(s => ["
        "  s.getAttribute('data-alert'),"
        "  Array.from(s.querySelectorAll('tbody tr')).map(tr => [tr.cells[0].textContent,"
        "    tr.querySelector('td[data-modes]').getAttribute('data-modes')])]);");
    for (const json& s : sections) {
      auto& models = page_models[s[0].get<std::string>()];
      for (const json& m : s[1]) {
        const std::string model = m[0].get<std::string>();
        models.insert(model);
        shown_models.insert(model);
        std::istringstream modes(m[1].get<std::string>());
        for (std::string mode; modes >> mode;) shown_pairs.insert({model, mode});
      }
    }
    EXPECT_EQ(page_models, api_models) << "the page's alerts and models vs ListAlerts";
    EXPECT_EQ(shown_models, regressed_models) << "the page's models vs the recount";
    EXPECT_EQ(shown_pairs, regressions) << "the page's (model, mode) vs the recount";
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

  // What the pages must show, recounted here (tests/result_recount.h): the tables from the two
  // sweeps' ListResults rows, op demand and graph breaks from every model's own record.
  const auto channel = grpc::CreateChannel(grpc_, grpc::InsecureChannelCredentials());
  const auto base_rows = testing::ListAllResults(channel, reader_, base_id_);
  const auto head_rows = testing::ListAllResults(channel, reader_, head_id_);
  ASSERT_EQ(head_rows.size(), static_cast<size_t>(kModels));
  const testing::TableRecount before = testing::RecountTable(base_rows);
  const testing::TableRecount now = testing::RecountTable(head_rows);

  // Overview: the newest sweep of the line (sim) as its GetSummary and as the recount; the
  // changes against the previous sweep's.
  Visit(b, base, "/");
  const pb::Summary head = Summary(head_id_, pb::GROUP_BY_TASK);
  ASSERT_GT(head.rows_size(), 0);
  EXPECT_EQ(*b.Execute("return document.querySelectorAll('section.line').length;"), 1);
  EXPECT_EQ(*b.Execute("return document.querySelector('section.line').getAttribute('data-sweep');"),
            std::to_string(head_id_));
  auto cells = Cells(b, "section.line[data-line=\"sim\"] tr[data-group]");
  ExpectTableShown(cells, head, kOverviewFields, /*totals=*/true, "overview");
  constexpr double kSumOrder = 1e-9;  // opcov sums taken in another order
  for (const auto& [task, row] : now.tasks) {
    ExpectRowShown(cells, task, kOverviewFields, [&](const std::string& f) { return row.Field(f); },
                   "overview vs recount", kSumOrder);
  }
  ExpectRowShown(cells, "Total", kOverviewFields,
                 [&](const std::string& f) { return now.total.Field(f); }, "overview vs recount",
                 kSumOrder);
  ExpectRowShown(
      cells, "Class-weighted", kOverviewFields,
      [&](const std::string& f) {
        return f == "models" ? static_cast<double>(now.total.models) : now.ClassWeighted(f);
      },
      "overview vs recount", kSumOrder);
  auto delta = b.Execute("return Number(document.querySelector("
                         "'tr[data-group=\"Total\"] td[data-field=\"eagerPct\"] .delta')"
                         ".getAttribute('data-delta'));");
  ASSERT_TRUE(delta.ok());
  EXPECT_NEAR(delta->get<double>(), now.total.Pct("eager") - before.total.Pct("eager"), 1e-9);
  EXPECT_TRUE(b.Screenshot((shots / "overview.png").string()).ok());

  // Classes: every class row of the sweep, as GetSummary and as the recount.
  Visit(b, base, "/classes?sweep=" + std::to_string(head_id_));
  const pb::Summary classes = Summary(head_id_, pb::GROUP_BY_ARCH);
  cells = Cells(b, "table.classes tr[data-group]");
  ExpectTableShown(cells, classes, kClassesFields, /*totals=*/false, "classes");
  for (const auto& [arch, row] : now.archs) {
    ExpectRowShown(cells, arch, kClassesFields, [&](const std::string& f) { return row.Field(f); },
                   "classes vs recount", kSumOrder);
  }
  EXPECT_TRUE(b.Screenshot((shots / "classes.png").string()).ok());

  // Trends: the line's two sweeps, Total and each task, as the charts' own data.
  Visit(b, base, "/trends");
  for (const std::string field : {"eagerPct", "compilePct"}) {
    const json chart =
        ChartData(b, "canvas.trend[data-line=\"sim\"][data-field=\"" + field + "\"]");
    if (!chart.is_object()) {
      ADD_FAILURE() << "no " << field << " chart";
      continue;
    }
    std::vector<std::string> labels;
    for (const json& l : chart["labels"]) {
      labels.push_back(l.is_string() ? l.get<std::string>() : l.dump());  // int64: a string
    }
    EXPECT_EQ(labels,
              (std::vector<std::string>{std::to_string(base_id_), std::to_string(head_id_)}));
    std::set<std::string> want = {"Total"}, shown;
    for (const auto* count : {&before, &now}) {
      for (const auto& [task, row] : count->tasks) want.insert(task);
    }
    for (const json& d : chart["datasets"]) {
      const std::string label = d["label"].get<std::string>();
      shown.insert(label);
      if (d["data"].size() != 2) {  // not fatal: the pages after this one are still checked
        ADD_FAILURE() << field << " " << label << ": " << d["data"].size() << " points, not 2";
        continue;
      }
      int point = 0;
      for (const auto* count : {&before, &now}) {
        const json& v = d["data"][point++];
        const testing::RecountRow* row = nullptr;
        if (label == "Total") row = &count->total;
        if (auto it = count->tasks.find(label); it != count->tasks.end()) row = &it->second;
        if (row == nullptr) {
          EXPECT_TRUE(v.is_null()) << field << " " << label << " has a point where it has no model";
          continue;
        }
        if (!v.is_number()) {
          ADD_FAILURE() << field << " " << label << ": " << v.dump();
          continue;
        }
        EXPECT_NEAR(v.get<double>(), row->Field(field), 1e-9) << field << " " << label;
      }
    }
    EXPECT_EQ(shown, want) << field;
  }
  EXPECT_TRUE(b.Screenshot((shots / "trends.png").string()).ok());

  // Ops: each mode's demand chart and table, and the graph-break reasons, as the records say.
  ExpectOpsShown(b, base, head_rows);
  EXPECT_TRUE(b.Screenshot((shots / "ops.png").string()).ok());

  // Alerts: detection on the head (idempotent: `touchstone serve`'s ticker may have run it),
  // then the page's alerts are ListAlerts', and the models they cover are the deterministic
  // regressions recounted from the two sweeps' results.
  ExpectAlertsShown(b, base, testing::DeterministicRegressions(base_rows, head_rows));
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
  // The loss chart draws the newest record's training curves.
  {
    auto query = pb::Query::NewStub(grpc::CreateChannel(grpc_, grpc::InsecureChannelCredentials()));
    const pb::ModelResult record = testing::RecordOf(*query, reader_, kEvil, head_id_);
    json want_ref = json::array(), want_dev = json::array();
    for (const auto& v : record.modes()) {
      if (v.mode() != pb::MODE_TRAIN) continue;
      for (double x : v.loss_reference()) want_ref.push_back(x);
      for (double x : v.loss_device()) want_dev.push_back(x);
    }
    ASSERT_FALSE(want_ref.empty()) << "the <script> model recorded no loss curve";
    const json chart = ChartData(b, "#loss-chart");
    ASSERT_TRUE(chart.is_object()) << "no loss chart";
    ASSERT_EQ(chart["datasets"].size(), 2u);
    EXPECT_EQ(chart["datasets"][0]["data"], want_ref);
    EXPECT_EQ(chart["datasets"][1]["data"], want_dev);
  }
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

// The Classes page's speedup and MFU columns against a recount from a sweep's ListResults alone:
// per class, the geometric mean of the compile speedups and the median of the compiled MFUs of
// its models whose compile passed with a speedup; '–' for a class without one. Checked on the
// clean base sweep (every class has one: `require_speedups`) and on the sim-2.1 head (whose
// defects leave few or no models with a passing compile and eager, so mostly '–'). Clicking the
// Speedup header sorts the rows by it.
void ExpectClassesPerfShown(testing::Browser& b, const std::string& base, int64_t sweep,
                            const std::string& grpc, const std::string& reader,
                            bool require_speedups) {
  std::map<std::string, std::vector<double>> speedups, mfus;  // class -> values
  std::set<std::string> archs;
  for (const auto& row : testing::ListAllResults(
           grpc::CreateChannel(grpc, grpc::InsecureChannelCredentials()), reader, sweep)) {
    archs.insert(row.arch());
    auto it = row.perf().find("compile");
    if (it == row.perf().end() || !std::isfinite(it->second.speedup())) continue;
    speedups[row.arch()].push_back(it->second.speedup());
    mfus[row.arch()].push_back(it->second.mfu());
  }
  ASSERT_FALSE(archs.empty()) << "sweep " << sweep << " lists no model";
  if (require_speedups) {
    ASSERT_EQ(speedups.size(), archs.size())
        << "sweep " << sweep << ": a class of the clean sweep has no model with a speedup";
  }

  Visit(b, base, "/classes?sweep=" + std::to_string(sweep));
  auto cells = Cells(b, "table.classes tr[data-group]");
  ASSERT_EQ(cells.size(), archs.size()) << "sweep " << sweep;
  for (const std::string& arch : archs) {
    const auto& row = cells[arch];
    if (!speedups.count(arch)) {
      EXPECT_EQ(row.at("geomeanSpeedup").text, "–") << arch;
      EXPECT_EQ(row.at("medianMfu").text, "–") << arch;
      continue;
    }
    double logs = 0;
    for (double v : speedups[arch]) logs += ts::query::OnSumGrid(std::log(v));  // as the service sums
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
  if (!require_speedups) return;
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
  EXPECT_EQ(values.size(), archs.size());
  EXPECT_TRUE(std::is_sorted(values.begin(), values.end()));
}

TEST_F(DashboardE2eTest, ClassesPageSpeedupAndMfuEqualARecountFromListResults) {
  ASSERT_FALSE(http_.empty());
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
  ExpectClassesPerfShown(b, base, head_id_, grpc_, reader_, /*require_speedups=*/false);
  ExpectClassesPerfShown(b, base, base_id_, grpc_, reader_, /*require_speedups=*/true);
  const fs::path shots = fs::path(TS_BUILD_DIR) / "dashboard-screenshots" / "e2e";
  fs::create_directories(shots);
  EXPECT_TRUE(b.Screenshot((shots / "classes-speedup.png").string()).ok());
}

}  // namespace
}  // namespace ts
