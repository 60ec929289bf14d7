#include "core/check.h"

#include <gtest/gtest.h>

namespace nanovllm {
namespace {

TEST(Check, ComparisonFailurePrintsBothValues) {
  const int block_size = 16;
  const int tokens = 20;
  try {
    NVLLM_CHECK_LE(tokens, block_size);
    FAIL() << "expected a throw";
  } catch (const Error& error) {
    const std::string message = error.what();
    EXPECT_NE(message.find("tokens <= block_size"), std::string::npos) << message;
    EXPECT_NE(message.find("(20 vs 16)"), std::string::npos) << message;
  }
}

TEST(Check, PassingChecksDoNothing) {
  NVLLM_CHECK(true);
  NVLLM_CHECK_EQ(1, 1);
  NVLLM_CHECK_MSG(2 > 1, "never shown {}", 3);
}

}  // namespace
}  // namespace nanovllm
