#include "proto/names.h"

#include <gtest/gtest.h>

namespace ts::proto {
namespace {

namespace pb = ::touchstone::v1;

TEST(NamesTest, ModesAreTheThreeInOrder) {
  std::vector<std::string> names;
  for (pb::Mode m : AllModes()) names.push_back(ModeName(m));
  EXPECT_EQ(names, (std::vector<std::string>{"eager", "compile", "train"}));
}

TEST(NamesTest, VerdictsAreInStageOrderAsStored) {
  // The names PostgreSQL holds from earlier sweeps: they must not change.
  const std::vector<std::string> stored = {
      "skipped",          "load_fail",    "ref_fail", "ref_nondeterministic", "crash",
      "timeout",          "unsupported_dtype", "device_error", "oom", "compile_fail",
      "compile_timeout",  "fail_accuracy", "pass",
      "lost"};  // the store's own (a worker lost too often), appended: no number moved
  std::vector<std::string> names;
  for (pb::Verdict v : AllVerdicts()) names.push_back(VerdictName(v));
  EXPECT_EQ(names, stored);
}

TEST(NamesTest, NamesRoundTripAndUnknownsAreRefused) {
  for (pb::Verdict v : AllVerdicts()) EXPECT_EQ(VerdictFromName(VerdictName(v)), v);
  for (pb::Mode m : AllModes()) EXPECT_EQ(ModeFromName(ModeName(m)), m);
  EXPECT_FALSE(VerdictFromName("passs"));
  EXPECT_FALSE(VerdictFromName("PASS"));
  EXPECT_FALSE(VerdictFromName("unspecified"));
  EXPECT_FALSE(ModeFromName("jit"));
  EXPECT_FALSE(ModeFromName(""));
  EXPECT_EQ(VerdictName(pb::VERDICT_UNSPECIFIED), "");
  EXPECT_EQ(ModeName(static_cast<pb::Mode>(42)), "");
}

}  // namespace
}  // namespace ts::proto
