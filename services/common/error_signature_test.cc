#include "services/common/error_signature.h"

#include <gtest/gtest.h>

namespace ts::common {
namespace {

TEST(ErrorSignatureTest, NumbersAndAddressesDoNotSplitASignature) {
  EXPECT_EQ(NormalizeError("[simdevice:oom] allocating 1048576 bytes at 0x7f3a9c"),
            "[simdevice:oom] allocating N bytes at X");
  EXPECT_EQ(ErrorSignature("shape [2, 64] vs [2, 65]"), ErrorSignature("shape [4, 8] vs [1, 3]"));
  EXPECT_EQ(ErrorSignature("rmse 0.0312 > 0.0101"), ErrorSignature("rmse 1.5 > 2.25"));
}

TEST(ErrorSignatureTest, DifferentOpsAreDifferentSignatures) {
  EXPECT_NE(ErrorSignature("op aten::gelu failed"), ErrorSignature("op aten::softmax failed"));
  EXPECT_EQ(ErrorSignature(""), "");
  EXPECT_EQ(ErrorSignature("x").size(), 16u);
}

TEST(ErrorSignatureTest, WhitespaceIsCollapsedAndLengthBounded) {
  EXPECT_EQ(NormalizeError("  a \n\t b  "), "a b");
  EXPECT_LE(NormalizeError(std::string(1000, 'y')).size(), 160u);
}

}  // namespace
}  // namespace ts::common
