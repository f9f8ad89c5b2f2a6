// The query benchmark's generated records: the rates and shapes its header promises, so that
// the figures measured on them describe a realistic database.
#include "bench/query_records.h"

#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

namespace ts::bench {
namespace {

// 20,000 models over 40 classes of 4 tasks, written as `touchstone catalog generate` does.
std::string WriteCatalog(const std::string& name, int models) {
  // One file per process: ctest runs each test of this suite in its own process, in parallel.
  const std::string path = (std::filesystem::temp_directory_path() /
                            (std::to_string(::getpid()) + "-" + name))
                               .string();
  std::ofstream out(path);
  for (int i = 0; i < models; ++i) {
    out << R"({"id":"org/m-)" << i << R"(","task":"task-)" << i % 4 << R"(","arch":"Arch)" << i % 40
        << R"(ForX","family":"fam)" << i % 40 << R"(","config_hash":"h)" << i
        << R"(","config":{"num_hidden_layers":)" << 2 + i % 30
        << R"(},"tiny_config":{"num_hidden_layers":1}})"
        << "\n";
  }
  return path;
}

class QueryRecordsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path = WriteCatalog("query_records_test.jsonl", 20000);
    auto c = LoadCatalog(path);
    std::filesystem::remove(path);
    ASSERT_TRUE(c.ok()) << c.status();
    catalog_ = new std::vector<CatalogEntry>(std::move(*c));
    gen_ = new RecordGenerator(*catalog_, 7);
  }
  static std::vector<CatalogEntry>* catalog_;
  static RecordGenerator* gen_;
};
std::vector<CatalogEntry>* QueryRecordsTest::catalog_ = nullptr;
RecordGenerator* QueryRecordsTest::gen_ = nullptr;

TEST_F(QueryRecordsTest, PassRatesAndFailureMixAreRealistic) {
  std::map<pb::Mode, int> pass;
  std::map<pb::Verdict, int> fails;
  for (const auto& e : *catalog_) {
    const pb::ModelResult r = gen_->Make(e, 5, 1);
    for (const auto& m : r.modes()) {
      if (m.status() == pb::VERDICT_PASS) {
        ++pass[m.mode()];
        EXPECT_TRUE(m.error().empty());
      } else {
        ++fails[m.status()];
        EXPECT_FALSE(m.error().empty()) << e.model.id();
      }
    }
  }
  const double n = static_cast<double>(catalog_->size());
  EXPECT_NEAR(pass[pb::MODE_EAGER] / n, 0.80, 0.05);
  EXPECT_NEAR(pass[pb::MODE_COMPILE] / n, 0.70, 0.05);
  EXPECT_NEAR(pass[pb::MODE_TRAIN] / n, 0.75, 0.05);
  // fail_accuracy leads; crash and timeout are rare but present.
  for (const auto& [v, count] : fails) {
    if (v != pb::VERDICT_FAIL_ACCURACY) {
      EXPECT_LT(count, fails[pb::VERDICT_FAIL_ACCURACY]) << v;
    }
  }
  EXPECT_GT(fails[pb::VERDICT_COMPILE_FAIL], fails[pb::VERDICT_DEVICE_ERROR] / 2);
  EXPECT_GT(fails[pb::VERDICT_CRASH], 0);
  EXPECT_LT(fails[pb::VERDICT_CRASH] + fails[pb::VERDICT_TIMEOUT], 0.01 * 3 * n);
}

TEST_F(QueryRecordsTest, ConsecutiveSweepsDifferByAFewFlipsSomeReverting) {
  int flips = 0, reverted = 0;
  for (const auto& e : *catalog_) {
    for (pb::Mode m : {pb::MODE_EAGER, pb::MODE_COMPILE, pb::MODE_TRAIN}) {
      const bool p4 = gen_->Status(e, m, 4) == pb::VERDICT_PASS;
      const bool p5 = gen_->Status(e, m, 5) == pb::VERDICT_PASS;
      const bool p6 = gen_->Status(e, m, 6) == pb::VERDICT_PASS;
      if (p4 != p5) {
        ++flips;
        if (p6 == p4) ++reverted;
      }
    }
  }
  // 20,000 models x 3 modes x 0.26% (a flip for good or for this sweep only, or the revert of
  // the last sweep's one-sweep flip): ~156 flips, ~30% of them reverted in the next sweep.
  EXPECT_GT(flips, 100);
  EXPECT_LT(flips, 220);
  EXPECT_GT(reverted, flips / 5);
  EXPECT_LT(reverted, flips * 4 / 5);
}

TEST_F(QueryRecordsTest, RecordsAreDeterministicAndRerunsConfirmOrFlake) {
  int deterministic = 0, flaky = 0;
  for (const auto& e : *catalog_) {
    const pb::ModelResult a = gen_->Make(e, 9, 1);
    ASSERT_TRUE(google::protobuf::util::MessageDifferencer::Equals(a, gen_->Make(e, 9, 1)))
        << e.model.id();
    bool flipped = false;
    for (const auto& m : a.modes()) {
      flipped |= m.status() != pb::VERDICT_PASS && gen_->Status(e, m.mode(), 8) == pb::VERDICT_PASS;
    }
    if (!flipped) continue;
    const pb::ModelResult r2 = gen_->Make(e, 9, 2);
    bool same = true;
    for (int k = 0; k < 3; ++k) same &= r2.modes(k).status() == a.modes(k).status();
    (same ? deterministic : flaky) += 1;
  }
  EXPECT_GT(deterministic, 0);
  EXPECT_GT(flaky, 0);
  EXPECT_LT(flaky, deterministic);
}

TEST_F(QueryRecordsTest, OpsCoverageAndBreaksAgree) {
  std::set<std::string> fallback_ops;
  int with_fallback = 0;
  for (const auto& e : *catalog_) {
    const pb::ModelResult r = gen_->Make(e, 3, 1);
    ASSERT_GE(r.ops_size(), 25);
    ASSERT_LE(r.ops_size(), 60);
    int native = 0;
    for (const auto& op : r.ops()) {
      native += op.native();
      if (!op.native()) fallback_ops.insert(op.op());
      EXPECT_GT(op.calls(), 0);
    }
    EXPECT_EQ(r.native_ops(), native);
    EXPECT_DOUBLE_EQ(r.opcov_ratio(), static_cast<double>(native) / r.ops_size());
    with_fallback += native < r.ops_size();
    const pb::ModeVerdict& compile = r.modes(1);
    if (compile.status() == pb::VERDICT_LOAD_FAIL || compile.status() == pb::VERDICT_REF_FAIL) {
      continue;
    }
    EXPECT_EQ(compile.graph_breaks(), compile.break_reasons_size());
    for (const auto& reason : compile.break_reasons()) {
      EXPECT_TRUE(reason.rfind("unsupported op aten::", 0) == 0 ||
                  reason.rfind("data-dependent op aten::", 0) == 0 ||
                  reason.rfind("dynamic shape from aten::", 0) == 0)
          << reason;
    }
    EXPECT_EQ(r.modes(2).loss_device_size(), 5);
    EXPECT_EQ(r.modes(2).loss_band_size(), 5);
  }
  EXPECT_GE(fallback_ops.size(), 5u);
  EXPECT_GT(with_fallback, static_cast<int>(catalog_->size()) / 2);
  EXPECT_LT(with_fallback, static_cast<int>(catalog_->size()) * 9 / 10);
}

TEST(QueryCatalogTest, MalformedRowIsNamedByLineAndField) {
  const std::string path =
      (std::filesystem::temp_directory_path() / "query_records_bad.jsonl").string();
  std::ofstream(path) << R"({"id":"a","task":"t","arch":"A","config":{}})"
                      << "\n"
                      << R"({"id":"b","task":"","arch":"A","config":{}})"
                      << "\n";
  auto c = LoadCatalog(path);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find(":2: task"), std::string::npos) << c.status();
  EXPECT_EQ(LoadCatalog(path + ".missing").status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ts::bench
