// Invariant checks that print both operands on failure, and the error type they throw.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace nanovllm {

// Thrown for violated invariants and for bad input (files, requests); caught at the CLI edge.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail_check(const char* file, int line, const std::string& message);

}  // namespace nanovllm

#define NVLLM_CHECK(cond)                                                            \
  do {                                                                               \
    if (!(cond)) ::nanovllm::fail_check(__FILE__, __LINE__, "check failed: " #cond); \
  } while (0)

#define NVLLM_CHECK_MSG(cond, ...)                                                      \
  do {                                                                                  \
    if (!(cond))                                                                        \
      ::nanovllm::fail_check(__FILE__, __LINE__,                                        \
                             "check failed: " #cond ": " + ::fmt::format(__VA_ARGS__)); \
  } while (0)

#define NVLLM_CHECK_OP_(a, b, op)                                                               \
  do {                                                                                          \
    const auto& nvllm_a_ = (a);                                                                 \
    const auto& nvllm_b_ = (b);                                                                 \
    if (!(nvllm_a_ op nvllm_b_))                                                                \
      ::nanovllm::fail_check(                                                                   \
          __FILE__, __LINE__,                                                                   \
          ::fmt::format("check failed: {} {} {} ({} vs {})", #a, #op, #b, nvllm_a_, nvllm_b_)); \
  } while (0)

#define NVLLM_CHECK_EQ(a, b) NVLLM_CHECK_OP_(a, b, ==)
#define NVLLM_CHECK_NE(a, b) NVLLM_CHECK_OP_(a, b, !=)
#define NVLLM_CHECK_LT(a, b) NVLLM_CHECK_OP_(a, b, <)
#define NVLLM_CHECK_LE(a, b) NVLLM_CHECK_OP_(a, b, <=)
#define NVLLM_CHECK_GT(a, b) NVLLM_CHECK_OP_(a, b, >)
#define NVLLM_CHECK_GE(a, b) NVLLM_CHECK_OP_(a, b, >=)
