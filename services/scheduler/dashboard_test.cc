// The web dashboard (dashboard_http.h) over a real scheduler, real gRPC and a throwaway
// PostgreSQL: two sweeps of one profile line reported through the Scheduler API (models of
// three classes, one whose id holds a <script> tag), then the JSON endpoints and the pages in a
// headless Chromium, checked against the Query API read over gRPC by the test.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <thread>

#include <pqxx/pqxx>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "proto/names.h"
#include "services/common/http_server.h"
#include "services/scheduler/dashboard_http.h"
#include "services/scheduler/dashboard_test_util.h"
#include "services/scheduler/scheduler.h"
#include "services/scheduler/scheduler_test_util.h"
#include "services/store/store.h"
#include "tests/fixtures/postgres_fixture.h"
#include "tests/fixtures/subprocess.h"
#include "tests/fixtures/webdriver.h"
#include "touchstone/v1/query.grpc.pb.h"
#include "touchstone/v1/scheduler.grpc.pb.h"

namespace ts::scheduler {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace dashboard_test;

constexpr int kModels = 12;
const char* kArchs[] = {"LlamaForCausalLM", "GPT2LMHeadModel", "BertForMaskedLM"};
const char* kFamilies[] = {"llama", "gpt2", "bert"};
const std::string kEvil = "org/<script>window.__xss=1</script>";

std::string ModelId(int i) { return i == kModels ? kEvil : "org/m" + std::to_string(i); }

// Model i's record; `head` fails a few more eager runs than the base sweep.
pb::ModelResult Record(const pb::Job& job, int i, bool head) {
  pb::ModelResult r;
  r.set_job_id(job.job_id());
  r.set_model_id(job.model_id());
  r.set_run(job.run());
  auto add = [&](pb::Mode mode, bool pass) {
    auto* v = r.add_modes();
    v->set_mode(mode);
    v->set_status(pass ? pb::VERDICT_PASS : pb::VERDICT_FAIL_ACCURACY);
    if (!pass) v->set_error("rmse 0.5 > 0.01 after aten::cumsum");
    if (mode == pb::MODE_COMPILE && i % 3 == 1) {
      v->add_break_reasons("unsupported op aten::cumsum");
      v->set_graph_breaks(1);
    }
    if (mode == pb::MODE_TRAIN) {
      for (int s = 0; s < 8; ++s) {
        v->add_loss_reference(6.0 - 0.5 * s);
        v->add_loss_device(6.0 - 0.45 * s);
      }
    }
  };
  add(pb::MODE_EAGER, head ? i % 3 != 0 : i % 4 != 0);
  add(pb::MODE_COMPILE, i % 3 != 1);
  add(pb::MODE_TRAIN, i % 5 != 0);
  auto* op = r.add_ops();
  op->set_op("aten::mm");
  op->set_calls(10);
  op->set_native(true);
  if (i % 3 == 1) {
    op = r.add_ops();
    op->set_op("aten::cumsum");
    op->set_calls(2);
  }
  r.set_distinct_ops(i % 3 == 1 ? 2 : 1);
  r.set_native_ops(1);
  r.set_opcov_ratio(1.0 / r.distinct_ops());
  r.set_total_ms(100);
  r.set_family(kFamilies[i % 3]);
  r.set_arch(job.arch());
  r.set_task(job.task());
  return r;
}

class DashboardTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto* cluster = testing::PostgresCluster::Get();
    ASSERT_NE(cluster, nullptr);
    SchedulerOptions o;
    o.db_url = cluster->NewDatabase("dashboard");
    db_url_ = new std::string(o.db_url);
    ASSERT_TRUE(o.tokens.Add(common::Role::kAdmin, "admin-token").ok());
    ASSERT_TRUE(o.tokens.Add(common::Role::kReader, "reader-token").ok());
    ASSERT_TRUE(o.tokens.Add(common::Role::kWorker, "worker-token").ok());
    o.tick_s = 3600;
    auto s = Scheduler::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    sched_ = s->release();
    auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(sched_->grpc_port()),
                                       grpc::InsecureChannelCredentials());
    stub_ = pb::Scheduler::NewStub(channel).release();
    query_ = pb::Query::NewStub(channel).release();
    pb::UpsertModelsRequest up;
    for (int i = 0; i <= kModels; ++i) {
      auto* m = up.add_models();
      m->set_id(ModelId(i));
      m->set_task(i % 2 ? "fill-mask" : "text-generation");
      m->set_arch(kArchs[i % 3]);
      m->set_family(kFamilies[i % 3]);
      m->set_config_json("{}");
    }
    pb::UpsertModelsResponse ur;
    ASSERT_TRUE(stub_->UpsertModels(BearerContext("admin-token").get(), up, &ur).ok());
    base_ = RunSweep("sim-2.0", false);
    head_ = RunSweep("sim-2.1", true, base_);
    auto st = store::Store::Connect({o.db_url});
    ASSERT_TRUE(st.ok());
    ASSERT_TRUE((*st)->SummarizeDoneSweeps(10).ok());
    auto detected = (*st)->DetectDoneSweeps(10);  // head vs base: its flips become alerts
    ASSERT_TRUE(detected.ok()) << detected.status();
    if (const char* hold = std::getenv("TS_DASHBOARD_HOLD_S")) {  // for a person to look
      std::fprintf(stderr, "dashboard: http://127.0.0.1:%d/ (reader-token)\n", sched_->http_port());
      std::this_thread::sleep_for(std::chrono::seconds(std::atoi(hold)));
    }
  }
  static void TearDownTestSuite() {
    delete stub_;
    delete query_;
    delete sched_;
    delete db_url_;
  }

  static int64_t RunSweep(const std::string& profile, bool head, int64_t baseline = 0) {
    pb::CreateSweepRequest c;
    c.set_name(head ? "nightly-head" : "nightly-base");
    c.mutable_profile()->set_name(profile);
    c.mutable_profile()->set_body("{}");
    for (const char* m : {"eager", "compile", "train"}) c.add_modes(m);
    c.set_shard_max_models(5);
    c.set_baseline_sweep_id(baseline);
    pb::CreateSweepResponse cr;
    EXPECT_TRUE(stub_->CreateSweep(BearerContext("admin-token").get(), c, &cr).ok());
    pb::RegisterWorkerRequest reg;
    reg.set_name("w");
    pb::RegisterWorkerResponse rw;
    EXPECT_TRUE(stub_->RegisterWorker(BearerContext("worker-token").get(), reg, &rw).ok());
    for (;;) {
      pb::LeaseShardRequest lq;
      lq.set_worker_id(rw.worker_id());
      pb::LeaseShardResponse lease;
      EXPECT_TRUE(stub_->LeaseShard(BearerContext("worker-token").get(), lq, &lease).ok());
      if (!lease.has_shard()) break;
      pb::ReportResultsRequest rep;
      rep.set_worker_id(rw.worker_id());
      rep.set_shard_id(lease.shard_id());
      rep.set_lease_token(lease.lease_token());
      rep.set_finish(true);
      for (const auto& job : lease.jobs()) {
        int i = kModels;
        if (job.model_id() != kEvil) i = std::stoi(job.model_id().substr(5));
        *rep.add_results() = Record(job, i, head);
      }
      pb::ReportResultsResponse rr;
      auto st = stub_->ReportResults(BearerContext("worker-token").get(), rep, &rr);
      EXPECT_TRUE(st.ok()) << st.error_message();
    }
    return cr.sweep_id();
  }

  static common::HttpResponse Get(const std::string& path, const std::string& token,
                                  std::vector<std::pair<std::string, std::string>> headers = {}) {
    common::HttpRequestSpec spec;
    spec.port = sched_->http_port();
    spec.path = path;
    spec.token = token;
    spec.headers = std::move(headers);
    auto r = common::HttpRequest(spec);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? *r : common::HttpResponse{0, "", ""};
  }

  static pb::Summary Summary(int64_t sweep, pb::GroupBy by) {
    pb::GetSummaryRequest r;
    r.set_sweep_id(sweep);
    r.set_group_by(by);
    pb::Summary s;
    auto st = query_->GetSummary(BearerContext("reader-token").get(), r, &s);
    EXPECT_TRUE(st.ok()) << st.error_message();
    return s;
  }

  static std::string Header(const common::HttpResponse& r, const std::string& name) {
    for (const auto& [k, v] : r.headers) {
      if (k == name) return v;
    }
    return "";
  }

  static Scheduler* sched_;
  static pb::Scheduler::Stub* stub_;
  static pb::Query::Stub* query_;
  static int64_t base_, head_;
  static std::string* db_url_;
};
std::string* DashboardTest::db_url_ = nullptr;

Scheduler* DashboardTest::sched_ = nullptr;
pb::Scheduler::Stub* DashboardTest::stub_ = nullptr;
pb::Query::Stub* DashboardTest::query_ = nullptr;
int64_t DashboardTest::base_ = 0, DashboardTest::head_ = 0;

TEST_F(DashboardTest, RequestsWithoutAReaderTokenAreRefused) {
  EXPECT_EQ(Get("/api/v1/overview", "").status, 401);
  EXPECT_EQ(Get("/api/v1/overview", "wrong").status, 401);
  EXPECT_EQ(Get("/api/v1/overview", "worker-token").status, 403);
  EXPECT_EQ(Get("/api/v1/overview", "reader-token").status, 200);
  auto page = Get("/classes", "", {{"Accept", "text/html"}});
  EXPECT_EQ(page.status, 303);
  EXPECT_EQ(Header(page, "location"), "/login");
  EXPECT_EQ(Get("/healthz", "").status, 200);
  EXPECT_EQ(Get("/login", "").status, 200);
  EXPECT_EQ(Get("/static/common.js", "").status, 401);
}

TEST_F(DashboardTest, LoginSetsAnHttpOnlyStrictCookieForReadersOnly) {
  common::HttpRequestSpec spec;
  spec.port = sched_->http_port();
  spec.method = "POST";
  spec.path = "/login";
  spec.content_type = "application/x-www-form-urlencoded";
  spec.body = "token=reader-token";
  auto r = common::HttpRequest(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->status, 303);
  EXPECT_EQ(Header(*r, "location"), "/");
  EXPECT_EQ(Header(*r, "set-cookie"), "ts_token=reader-token; Path=/; HttpOnly; SameSite=Strict");
  EXPECT_EQ(Get("/api/v1/sweeps", "", {{"Cookie", "ts_token=reader-token"}}).status, 200);
  for (const std::string bad : {"token=worker-token", "token=nope", "token="}) {
    spec.body = bad;
    r = common::HttpRequest(spec);
    EXPECT_EQ(Header(*r, "location"), "/login?refused=1") << bad;
    EXPECT_EQ(Header(*r, "set-cookie"), "") << bad;
  }
}

TEST_F(DashboardTest, OverviewIsTheQueryApisSummaryOfTheLinesLastTwoSweeps) {
  auto r = Get("/api/v1/overview", "reader-token");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["lines"].size(), 1u);
  const json& line = j["lines"][0];
  EXPECT_EQ(line["line"], "sim");
  EXPECT_EQ(line["sweep"]["sweepId"], std::to_string(head_));
  EXPECT_EQ(line["previous"]["sweepId"], std::to_string(base_));
  for (auto [sweep, key] : {std::pair{head_, "summary"}, std::pair{base_, "previousSummary"}}) {
    const pb::Summary want = Summary(sweep, pb::GROUP_BY_TASK);
    const json& got = line[key];
    ASSERT_EQ(got["rows"].size(), static_cast<size_t>(want.rows_size()));
    for (int i = 0; i < want.rows_size(); ++i) {
      EXPECT_EQ(got["rows"][i]["group"], want.rows(i).group());
      EXPECT_EQ(got["rows"][i]["models"], std::to_string(want.rows(i).models()));
      EXPECT_EQ(got["rows"][i]["eagerPct"].get<double>(), want.rows(i).eager_pct());
      EXPECT_EQ(got["rows"][i]["compilePct"].get<double>(), want.rows(i).compile_pct());
    }
    EXPECT_EQ(got["classWeighted"]["eagerPct"].get<double>(), want.class_weighted().eager_pct());
  }
}

TEST_F(DashboardTest, ClassRowsNameTheirTasksAndFamilies) {
  auto r = Get("/api/v1/summary?group_by=arch&sweep=" + std::to_string(head_), "reader-token");
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = json::parse(r.body);
  ASSERT_EQ(j["rows"].size(), 3u);
  EXPECT_EQ(j["rows"][0]["group"], "BertForMaskedLM");
  EXPECT_EQ(j["rows"][0]["families"], json::array({"bert"}));
  EXPECT_EQ(j["rows"][0]["tasks"], json::array({"fill-mask", "text-generation"}));
  EXPECT_EQ(j["rows"][0]["modes"].size(), 3u);  // eager, compile, train
  // modes=0 (the Classes page): the same rows without their status counts.
  auto lean = Get("/api/v1/summary?group_by=arch&modes=0&sweep=" + std::to_string(head_),
                  "reader-token");
  const json l = json::parse(lean.body);
  ASSERT_EQ(l["rows"].size(), 3u);
  EXPECT_EQ(l["rows"][0]["modes"].size(), 0u);
  EXPECT_EQ(l["rows"][0]["eagerPct"], j["rows"][0]["eagerPct"]);
  auto c = Get("/api/v1/class?arch=GPT2LMHeadModel&sweep=" + std::to_string(head_), "reader-token");
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_EQ(json::parse(c.body)["rows"].size(), 4u);  // m1 m4 m7 m10
}

TEST_F(DashboardTest, BadParametersAreNamedAndDataIsEscaped) {
  auto r = Get("/api/v1/summary?sweep=abc", "reader-token");
  EXPECT_EQ(r.status, 400);
  EXPECT_EQ(json::parse(r.body)["error"], "sweep: a positive sweep id, not 'abc'");
  r = Get("/api/v1/summary?sweep=999", "reader-token");
  EXPECT_EQ(r.status, 404) << r.body;
  r = Get("/api/v1/ops?mode=train", "reader-token");
  EXPECT_EQ(json::parse(r.body)["error"], "mode: eager or compile, not 'train'");
  r = Get("/api/v1/model?id=org%2F%3Cscript%3Ewindow.__xss%3D1%3C%2Fscript%3E", "reader-token");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.body.find('<'), std::string::npos);  // escaped as \u003c
  EXPECT_EQ(json::parse(r.body)["modelId"], kEvil);
}

// Every string under `key` in a Grafana dashboard JSON (panels, targets, templating).
void Collect(const json& j, const std::string& key, std::vector<std::string>* out) {
  if (j.is_object()) {
    for (const auto& [k, v] : j.items()) {
      if (k == key && v.is_string()) out->push_back(v.get<std::string>());
      Collect(v, key, out);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) Collect(v, key, out);
  }
}

json ReadJson(const fs::path& p) {
  std::ifstream in(p);
  return json::parse(in);
}

const fs::path kGrafana = fs::path(TS_SOURCE_DIR) / "dashboards" / "grafana" / "dashboards";

// Each SQL query of the PostgreSQL dashboard, its Grafana macros and variables made concrete,
// runs on the real schema over the two sweeps and returns rows.
TEST_F(DashboardTest, GrafanaSqlQueriesReturnRows) {
  std::vector<std::string> queries;
  const json dash = ReadJson(kGrafana / "touchstone-conformance.json");
  Collect(dash, "rawSql", &queries);
  for (const auto& var : dash["templating"]["list"]) queries.push_back(var["query"]);
  ASSERT_GE(queries.size(), 6u);
  pqxx::connection c(*db_url_);
  for (std::string q : queries) {
    q = std::regex_replace(q, std::regex(R"(\$__timeFilter\(([^)]*)\))"),
                           "$1 BETWEEN now() - interval '3650 days' AND now() + interval '1 day'");
    q = std::regex_replace(q, std::regex(R"(\$\{?sweep\}?)"), std::to_string(head_));
    ASSERT_EQ(q.find('$'), std::string::npos) << "a macro left in:\n" << q;
    pqxx::work w(c);
    pqxx::result r;
    try {
      r = w.exec(q);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what() << "\n" << q;
      continue;
    }
    EXPECT_GT(r.size(), 0u) << q;
  }
}

// Each PromQL expression of the Prometheus dashboard parses (promtool, as recording rules).
TEST(GrafanaDashboardTest, PromqlParses) {
  std::vector<std::string> exprs;
  Collect(ReadJson(kGrafana / "touchstone-operations.json"), "expr", &exprs);
  ASSERT_GE(exprs.size(), 5u);
  const fs::path rules = fs::temp_directory_path() / ("ts-grafana-promql-" + std::to_string(::getpid()) + ".yml");
  {
    std::ofstream out(rules);
    out << "groups:\n  - name: grafana\n    rules:\n";
    for (size_t i = 0; i < exprs.size(); ++i) {
      out << "      - record: grafana:expr_" << i << "\n        expr: " << json(exprs[i]).dump() << "\n";
    }
  }
  auto r = testing::RunProcess({"/usr/bin/promtool", "check", "rules", rules.string()}, "", 60);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("SUCCESS: " + std::to_string(exprs.size()) + " rules found"), std::string::npos)
      << r.out;
  fs::remove(rules);
}

TEST_F(DashboardTest, PagesInHeadlessChromium) {
  const fs::path dir = fs::path(TS_BUILD_DIR) / "dashboard-screenshots" / "unit";
  fs::create_directories(dir);
  auto browser = testing::Browser::Start(dir.string());
  ASSERT_TRUE(browser.ok()) << browser.status();
  testing::Browser& b = **browser;
  const std::string base = "http://127.0.0.1:" + std::to_string(sched_->http_port());
  // Not logged in: the browser lands on the login page; a refused token says so.
  ASSERT_TRUE(b.Navigate(base + "/").ok());
  EXPECT_EQ(b.current_url(), base + "/login");
  auto login = [&](const std::string& token) {
    ASSERT_TRUE(b.Execute("document.getElementById('token').value = arguments[0];"
                          "document.querySelector('form').submit();",
                          json::array({token}))
                    .ok());
  };
  login("worker-token");
  ASSERT_TRUE(b.WaitFor("return location.search === '?refused=1' && "
                        "!document.getElementById('refused').hidden;").ok());
  login("reader-token");
  ASSERT_TRUE(b.WaitFor("return location.pathname === '/' && document.body.getAttribute('data-ready');").ok());
  auto cookie = b.Execute("return document.cookie;");  // HttpOnly: scripts do not see it
  EXPECT_EQ(*cookie, "");

  Visit(b, base, "/");
  const pb::Summary head = Summary(head_, pb::GROUP_BY_TASK);
  EXPECT_EQ(*b.Execute("return document.querySelectorAll('section.line').length;"), 1);
  auto cells = Cells(b, "section.line tr[data-group]");
  ExpectTableShown(cells, head, kOverviewFields, /*totals=*/true, "overview");
  EXPECT_TRUE(b.Screenshot((dir / "overview.png").string()).ok());

  Visit(b, base, "/classes");
  const pb::Summary classes = Summary(head_, pb::GROUP_BY_ARCH);
  cells = Cells(b, "table.classes tr[data-group]");
  ExpectTableShown(cells, classes, kClassesFields, /*totals=*/false, "classes");
  // Filtered by family: only the bert class stays visible.
  ASSERT_TRUE(b.Execute("const s = document.getElementById('family-filter'); s.value = 'bert';"
                        "s.dispatchEvent(new Event('change'));").ok());
  EXPECT_EQ(*b.Execute("return Array.from(document.querySelectorAll('table.classes tbody tr'))"
                       ".filter(r => !r.hidden).map(r => r.getAttribute('data-group'));"),
            json::array({"BertForMaskedLM"}));
  EXPECT_TRUE(b.Screenshot((dir / "classes.png").string()).ok());

  Visit(b, base, "/class?arch=LlamaForCausalLM&sweep=" + std::to_string(head_));
  EXPECT_EQ(*b.Execute("return document.querySelectorAll('tr[data-model]').length;"), 5);
  // The <script> id is shown as text and ran nothing.
  EXPECT_EQ(*b.Execute("return Array.from(document.querySelectorAll('tr[data-model] a'))"
                       ".some(a => a.textContent === arguments[0]);",
                       json::array({kEvil})),
            true);
  EXPECT_EQ(*b.Execute("return window.__xss === undefined;"), true);
  EXPECT_TRUE(b.Screenshot((dir / "class.png").string()).ok());

  Visit(b, base, "/trends");
  {
    // Each chart draws the line's two sweeps: the Total and every task, as GetSummary has them.
    const pb::Summary older = Summary(base_, pb::GROUP_BY_TASK);
    for (const std::string field : {"eagerPct", "compilePct"}) {
      const json chart = ChartData(b, "canvas.trend[data-field=\"" + field + "\"]");
      ASSERT_TRUE(chart.is_object()) << field;
      EXPECT_EQ(chart["labels"].size(), 2u) << chart.dump();
      std::map<std::string, json> drawn, want;
      for (const json& d : chart["datasets"]) drawn[d["label"].get<std::string>()] = d["data"];
      for (const pb::Summary* s : {&older, &head}) {
        want["Total"].push_back(FieldOf(s->total(), field));
        for (const auto& row : s->rows()) want[row.group()].push_back(FieldOf(row, field));
      }
      EXPECT_EQ(drawn, want) << field;
    }
  }
  EXPECT_TRUE(b.Screenshot((dir / "trends.png").string()).ok());
  // Clicking the first point (the older sweep) opens that sweep's classes.
  ASSERT_TRUE(b.Execute("const c = document.querySelector('canvas.trend');"
                        "const p = Chart.getChart(c).getDatasetMeta(0).data[0];"
                        "const r = c.getBoundingClientRect();"
                        "c.dispatchEvent(new MouseEvent('click', {clientX: r.left + p.x,"
                        "  clientY: r.top + p.y, bubbles: true}));").ok());
  auto opened = b.WaitFor("return location.pathname === '/classes' && location.search;");
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(*opened, "?sweep=" + std::to_string(base_));

  Visit(b, base, "/ops");
  EXPECT_GT(CanvasPixels(b, "canvas"), 1000);
  EXPECT_TRUE(b.Screenshot((dir / "ops.png").string()).ok());

  Visit(b, base, "/alerts");
  pb::ListAlertsRequest lr;
  lr.set_state("open");
  pb::ListAlertsResponse alerts;
  ASSERT_TRUE(query_->ListAlerts(BearerContext("reader-token").get(), lr, &alerts).ok());
  EXPECT_EQ(*b.Execute("return document.querySelectorAll('section.alert').length;"),
            alerts.alerts_size());
  for (const auto& a : alerts.alerts()) {
    EXPECT_EQ(*b.Execute("return document.querySelectorAll("
                         "'section.alert[data-alert=\"' + arguments[0] + '\"] tbody tr').length;",
                         json::array({std::to_string(a.alert_id())})),
              a.models_size());
    // The alert's modes are shown on it, and each model's modes in its row.
    std::string modes;
    for (int m : a.modes()) {
      modes += (modes.empty() ? "" : " ") + proto::ModeName(static_cast<pb::Mode>(m));
    }
    EXPECT_FALSE(modes.empty()) << a.alert_id();
    EXPECT_EQ(*b.Execute("return document.querySelector('section.alert[data-alert=\"' +"
                         "  arguments[0] + '\"]').getAttribute('data-modes');",
                         json::array({std::to_string(a.alert_id())})),
              modes);
    for (const auto& m : a.models()) {
      std::string model_modes;
      for (int mode : m.modes()) {
        model_modes +=
            (model_modes.empty() ? "" : " ") + proto::ModeName(static_cast<pb::Mode>(mode));
      }
      EXPECT_EQ(*b.Execute("return Array.from(document.querySelectorAll("
                           "  'section.alert[data-alert=\"' + arguments[0] + '\"] tbody tr'))"
                           ".find(tr => tr.cells[0].textContent === arguments[1])"
                           ".querySelector('td[data-modes]').getAttribute('data-modes');",
                           json::array({std::to_string(a.alert_id()), m.model_id()})),
                model_modes)
          << m.model_id();
    }
  }
  EXPECT_GE(alerts.alerts_size(), 1);  // the head's eager flips (m3, m6, m9) vs its baseline
  EXPECT_TRUE(b.Screenshot((dir / "alerts.png").string()).ok());

  ASSERT_TRUE(b.Navigate(base + "/").ok());  // search from the header
  ASSERT_TRUE(b.WaitFor("return document.body.getAttribute('data-ready');").ok());
  ASSERT_TRUE(b.Execute("const f = document.getElementById('search');"
                        "f.querySelector('input').value = arguments[0]; f.submit();",
                        json::array({kEvil})).ok());
  ASSERT_TRUE(b.WaitFor("return location.pathname === '/model' && "
                        "document.body.getAttribute('data-ready');").ok());
  EXPECT_EQ(*b.Execute("return document.getElementById('title').textContent;"), kEvil);
  EXPECT_EQ(*b.Execute("return window.__xss === undefined;"), true);
  EXPECT_EQ(*b.Execute("return document.querySelectorAll('#history tbody tr').length;"), 2);
  EXPECT_GT(CanvasPixels(b, "#loss-chart"), 1000);
  EXPECT_TRUE(b.Screenshot((dir / "model.png").string()).ok());
}

}  // namespace
}  // namespace ts::scheduler
