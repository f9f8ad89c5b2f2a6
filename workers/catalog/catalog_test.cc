#include "workers/catalog/catalog.h"

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "workers/zoo/model.h"

namespace ts::catalog {
namespace {

std::string DataDir() {
  const char* src = std::getenv("TS_SOURCE_DIR");
  return std::string(src ? src : ".") + "/../shared/data";
}

std::string GenerateText(uint64_t seed, int64_t count, GenerateStats* stats = nullptr) {
  std::ostringstream out;
  GenerateOptions o;
  o.seed = seed;
  o.count = count;
  o.data_dir = DataDir();
  auto st = Generate(o, out);
  EXPECT_TRUE(st.ok()) << st.status().ToString();
  if (stats && st.ok()) *stats = *st;
  return out.str();
}

std::vector<Row> Rows(const std::string& text) {
  std::vector<Row> rows;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    auto r = ParseJsonLine(line);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    if (r.ok()) rows.push_back(*r);
  }
  return rows;
}

TEST(CatalogTest, SameSeedIsByteIdenticalOtherSeedDiffers) {
  const std::string a = GenerateText(7, 1500), b = GenerateText(7, 1500), c = GenerateText(8, 1500);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(std::count(a.begin(), a.end(), '\n'), 1500);
}

TEST(CatalogTest, RowsCoverTheZooWithHubLikeTaskMixAndRealIds) {
  // Enough rows that the smallest task shares (0.5% for a task outside the target mix, such as
  // multiple-choice with its 20-odd classes) still give each class of the task a row.
  constexpr int64_t kRows = 8000;
  GenerateStats st;
  auto rows = Rows(GenerateText(1, kRows, &st));
  ASSERT_EQ(rows.size(), static_cast<size_t>(kRows));
  EXPECT_EQ(st.rows, kRows);
  EXPECT_GT(st.real_ids, 100) << "real Hub ids from ptm_naming_model_types.json";
  std::set<std::string> tasks, archs, ids;
  for (const auto& r : rows) {
    tasks.insert(r.task);
    archs.insert(r.arch);
    ids.insert(r.id);
    EXPECT_EQ(r.config["architectures"][0], r.arch);
    EXPECT_FALSE(r.tiny_config.is_null()) << r.id;
    EXPECT_EQ(r.config_hash.size(), 16u);
  }
  EXPECT_EQ(ids.size(), rows.size()) << "ids are unique";
  std::set<std::string> zoo_tasks;
  for (const auto& a : zoo::SupportedArchitectures()) zoo_tasks.insert(a.task);
  EXPECT_EQ(tasks, zoo_tasks) << "every zoo task is in the catalog";
  EXPECT_EQ(archs.size(), zoo::SupportedArchitectures().size()) << "every class has rows";
  // Text generation leads, as on today's Hub.
  int64_t max_other = 0;
  for (const auto& [task, n] : st.per_task) {
    if (task != "text-generation") max_other = std::max(max_other, n);
  }
  EXPECT_GT(st.per_task["text-generation"], max_other);
}

TEST(CatalogTest, VariedConfigsBuildAndDuplicatesShareAHash) {
  auto rows = Rows(GenerateText(3, 600));
  std::map<std::string, int> hashes;
  for (size_t i = 0; i < rows.size(); ++i) {
    hashes[rows[i].config_hash] += 1;
    if (i % 20 != 0) continue;  // build a spread of them
    auto m = zoo::BuildModel(rows[i].config, zoo::BuildOptions());
    ASSERT_TRUE(m.ok()) << rows[i].id << ": " << m.status().ToString();
    EXPECT_EQ((*m)->spec().tiny_config, rows[i].tiny_config);
  }
  int dup = 0;
  for (const auto& [h, n] : hashes) dup += n > 1;
  EXPECT_GT(dup, 0) << "fine-tune style duplicates keep their base config";
  EXPECT_GT(hashes.size(), rows.size() / 10) << "configs vary";
}

TEST(CatalogTest, ImportTakesRealHubIdsAndReportsBadLinesByNumber) {
  std::ifstream in(DataDir() + "/ptm_naming_model_types.json");
  std::stringstream ss;
  ss << in.rdbuf();
  auto ptm = nlohmann::json::parse(ss.str());
  std::ostringstream lines;
  int good = 0;
  for (const auto& [arch, tag] : std::vector<std::pair<std::string, std::string>>{
           {"BertForMaskedLM", "fill-mask"}, {"BertForSequenceClassification", "text-classification"},
           {"GPT2LMHeadModel", "text-generation"}}) {
    for (const auto& [mt, archs] : ptm.items()) {
      if (!archs.contains(arch)) continue;
      int k = 0;
      for (const auto& id : archs[arch]) {
        if (k++ == 20) break;
        lines << nlohmann::json{{"id", id}, {"pipeline_tag", tag}, {"architectures", {arch}}}.dump() << "\n";
        ++good;
      }
    }
  }
  lines << "{not json\n";                                                  // bad
  lines << R"({"id": "x/y", "architectures": ["BertModel"]})" << "\n";     // bad: no tag
  lines << R"({"id": "x/z", "pipeline_tag": "fill-mask", "architectures": []})" << "\n";  // bad
  std::istringstream input(lines.str());
  std::ostringstream out;
  ImportStats st = Import(input, out);
  EXPECT_EQ(st.imported, good);
  ASSERT_EQ(st.errors.size(), 3u);
  EXPECT_EQ(st.errors[0].rfind("line " + std::to_string(good + 1) + ": not valid JSON", 0), 0u) << st.errors[0];
  EXPECT_NE(st.errors[1].find("pipeline_tag: missing"), std::string::npos);
  EXPECT_NE(st.errors[2].find("architectures"), std::string::npos);
  auto rows = Rows(out.str());
  ASSERT_EQ(static_cast<int>(rows.size()), good);
  EXPECT_EQ(rows[0].id, "bert-base-cased");
}

TEST(CatalogTest, StratifiedSampleCoversEveryTaskAndSpreadsOverClasses) {
  auto rows = Rows(GenerateText(5, 3000));
  auto sample = StratifiedSample(rows, 60, 1);
  EXPECT_EQ(sample.size(), 60u);
  std::set<std::string> all_tasks, sample_tasks;
  for (const auto& r : rows) all_tasks.insert(r.task);
  std::map<std::string, std::set<std::string>> archs_per_task;
  for (const auto& r : sample) {
    sample_tasks.insert(r.task);
    archs_per_task[r.task].insert(r.arch);
  }
  EXPECT_EQ(sample_tasks, all_tasks);
  EXPECT_GT(archs_per_task["text-generation"].size(), 1u);
  auto again = StratifiedSample(rows, 60, 1);
  for (size_t i = 0; i < sample.size(); ++i) EXPECT_EQ(sample[i].id, again[i].id);
}

TEST(CatalogTest, KeysParseWithoutConfigs) {
  auto text = GenerateText(2, 5);
  std::istringstream in(text);
  std::string line;
  std::getline(in, line);
  auto full = ParseJsonLine(line);
  auto keys = ParseKeys(line);
  ASSERT_TRUE(full.ok() && keys.ok());
  EXPECT_EQ(keys->id, full->id);
  EXPECT_EQ(keys->arch, full->arch);
  EXPECT_TRUE(keys->config.is_null());
}

}  // namespace
}  // namespace ts::catalog
