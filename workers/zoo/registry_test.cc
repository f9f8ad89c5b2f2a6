// The registry against transformers' own tables: every class the zoo builds is a real
// transformers class, served under a pipeline tag transformers maps it to.
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <cmath>

#include <gtest/gtest.h>

#include "workers/zoo/model.h"

namespace ts::zoo {
namespace {

// The tasks the zoo serves the classes of the mappings update_metadata.py gives no pipeline tag
// under: semantic, instance and universal segmentation run in transformers' image-segmentation
// pipeline (pipelines/__init__.py: AutoModelForImageSegmentation and
// AutoModelForSemanticSegmentation; image_segmentation.py checks the instance and universal
// mappings), which is the Hub's tag for those checkpoints; backbones and masked image modeling
// have no pipeline, so the task is the mapping's name (causal image modeling, ImageGPT's
// generation head, likewise).
const std::map<std::string, std::string> kUntaggedMappingTasks = {
    {"MODEL_FOR_BACKBONE_MAPPING_NAMES", "backbone"},
    {"MODEL_FOR_MASKED_IMAGE_MODELING_MAPPING_NAMES", "masked-image-modeling"},
    {"MODEL_FOR_CAUSAL_IMAGE_MODELING_MAPPING_NAMES", "causal-image-modeling"},
    {"MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES", "image-segmentation"},
    {"MODEL_FOR_INSTANCE_SEGMENTATION_MAPPING_NAMES", "image-segmentation"},
    {"MODEL_FOR_UNIVERSAL_SEGMENTATION_MAPPING_NAMES", "image-segmentation"},
};

// architecture_class -> pipeline tags, from transformers_task_classes_v5.3.0.dev0.csv (an untagged
// mapping's row counts under kUntaggedMappingTasks' task).
std::map<std::string, std::set<std::string>> TransformersClasses() {
  const char* src = std::getenv("TS_SOURCE_DIR");
  std::ifstream in(std::string(src ? src : TS_ZOO_SOURCE_DIR) +
                   "/../shared/data/transformers_task_classes_v5.3.0.dev0.csv");
  std::map<std::string, std::set<std::string>> out;
  std::string line;
  std::getline(in, line);  // header: mapping,pipeline_tag,auto_class,model_type,config_class,architecture_class
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();  // the file has CRLF endings
    std::vector<std::string> cols;
    std::stringstream ss(line);
    std::string col;
    while (std::getline(ss, col, ',')) cols.push_back(col);
    if (cols.size() < 6) continue;
    auto untagged = kUntaggedMappingTasks.find(cols[0]);
    out[cols[5]].insert(cols[1].empty() && untagged != kUntaggedMappingTasks.end()
                            ? untagged->second
                            : cols[1]);
  }
  return out;
}

TEST(RegistryTest, EveryClassIsARealTransformersClassUnderOneOfItsTasks) {
  const auto classes = TransformersClasses();
  ASSERT_GT(classes.size(), 1000u);
  for (const auto& a : SupportedArchitectures()) {
    auto it = classes.find(a.arch);
    ASSERT_NE(it, classes.end()) << a.arch << " is not a transformers 5.3 class";
    // Base models (feature-extraction) have no task mapping row of that tag in every case.
    if (a.task != "feature-extraction") {
      EXPECT_TRUE(it->second.count(a.task))
          << a.arch << " served as " << a.task << " but transformers maps it to "
          << *it->second.begin();
    }
  }
}

TEST(RegistryTest, CoversAtLeast300ClassesOverTenTasks) {
  std::set<std::string> tasks;
  for (const auto& a : SupportedArchitectures()) tasks.insert(a.task);
  std::cout << "[ zoo      ] " << SupportedArchitectures().size() << " classes, " << tasks.size()
            << " tasks\n";
  EXPECT_GE(SupportedArchitectures().size(), 300u);
  EXPECT_GE(tasks.size(), 10u);
}

TEST(RegistryTest, ClassesAreSortedAndUnique) {
  const auto& archs = SupportedArchitectures();
  ASSERT_FALSE(archs.empty());
  for (size_t i = 1; i < archs.size(); ++i) EXPECT_LT(archs[i - 1].arch, archs[i].arch);
}

TEST(RegistryTest, UnknownClassIsUnimplementedNamingIt) {
  auto r = BuildModel({{"architectures", {"FooForBar"}}}, BuildOptions());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(r.status().message().find("FooForBar"), std::string::npos);
}

}  // namespace
}  // namespace ts::zoo

namespace ts::zoo {
namespace {

TEST(RegistryTest, EveryClassBuildsFromItsExampleConfigAndRunsForwardAndLoss) {
  for (const auto& a : SupportedArchitectures()) {
    auto cfg = ExampleConfig(a.arch);
    ASSERT_TRUE(cfg.ok()) << a.arch;
    ASSERT_TRUE(cfg->contains("architectures")) << a.arch;
    EXPECT_EQ((*cfg)["architectures"][0], a.arch);
    auto model = BuildModel(*cfg, BuildOptions());
    ASSERT_TRUE(model.ok()) << a.arch << ": " << model.status().ToString();
    auto w = (*model)->InitWeights(1);
    auto batch = (*model)->MakeBatch(1, 2);
    auto out = (*model)->Forward(w, batch.inputs);
    ASSERT_FALSE(out.empty()) << a.arch;
    EXPECT_TRUE(at::isfinite(out[0]).all().item<bool>()) << a.arch;
    EXPECT_TRUE(std::isfinite((*model)->Loss(w, batch).item<double>())) << a.arch;
  }
  EXPECT_EQ(ExampleConfig("FooForBar").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace ts::zoo
