// SamplingParams and EngineConfig validation: every invalid field gets an Error naming it.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "core/check.h"
#include "nanovllm/engine_config.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm {
namespace {

// Runs `fn` and expects an Error whose message contains `needle`.
void expect_error_mentioning(const std::function<void()>& fn, const std::string& needle) {
  try {
    fn();
    ADD_FAILURE() << "expected an Error mentioning '" << needle << "'";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find(needle), std::string::npos) << error.what();
  }
}

void expect_params_error(const std::function<void(SamplingParams&)>& edit,
                         const std::string& needle) {
  SamplingParams params;
  edit(params);
  expect_error_mentioning([&] { params.validate(); }, needle);
}

TEST(SamplingParams, DefaultsMatchNanoVllm) {
  const SamplingParams params;
  EXPECT_EQ(params.temperature, 1.0f);
  EXPECT_EQ(params.max_tokens, 64);
  EXPECT_FALSE(params.ignore_eos);
  EXPECT_EQ(params.top_k, 0);
  EXPECT_EQ(params.top_p, 1.0f);
  EXPECT_FALSE(params.seed.has_value());
  EXPECT_FALSE(params.logprobs.has_value());
  EXPECT_NO_THROW(params.validate());
}

TEST(SamplingParams, ValidBoundaryValuesPass) {
  SamplingParams params;
  params.temperature = 0.0f;
  params.top_p = 1.0f;
  params.top_k = -1;
  params.max_tokens = 1;
  params.logprobs = 0;
  EXPECT_NO_THROW(params.validate());
  params.logprobs = SamplingParams::kMaxLogprobs;
  params.top_k = 1;
  params.top_p = 1e-6f;
  params.stop = {"\n"};
  params.stop_token_ids = {0, 5};
  EXPECT_NO_THROW(params.validate());
}

TEST(SamplingParams, GreedyAtZeroAndTinyTemperature) {
  SamplingParams params;
  params.temperature = 0.0f;
  EXPECT_TRUE(params.is_greedy());
  params.temperature = 1e-6f;
  EXPECT_TRUE(params.is_greedy());
  params.temperature = 0.01f;
  EXPECT_FALSE(params.is_greedy());
}

TEST(SamplingParams, RejectsNegativeTemperature) {
  expect_params_error([](SamplingParams& p) { p.temperature = -0.1f; }, "temperature");
}

TEST(SamplingParams, RejectsNonFiniteTemperature) {
  expect_params_error([](SamplingParams& p) { p.temperature = std::nanf(""); }, "temperature");
  expect_params_error(
      [](SamplingParams& p) { p.temperature = std::numeric_limits<float>::infinity(); },
      "temperature");
}

TEST(SamplingParams, RejectsTopPOutsideZeroOne) {
  expect_params_error([](SamplingParams& p) { p.top_p = 0.0f; }, "top_p");
  expect_params_error([](SamplingParams& p) { p.top_p = -0.5f; }, "top_p");
  expect_params_error([](SamplingParams& p) { p.top_p = 1.01f; }, "top_p");
  expect_params_error([](SamplingParams& p) { p.top_p = std::nanf(""); }, "top_p");
}

TEST(SamplingParams, RejectsMaxTokensBelowOne) {
  expect_params_error([](SamplingParams& p) { p.max_tokens = 0; }, "max_tokens");
  expect_params_error([](SamplingParams& p) { p.max_tokens = -3; }, "max_tokens");
}

TEST(SamplingParams, RejectsTopKBelowMinusOne) {
  expect_params_error([](SamplingParams& p) { p.top_k = -2; }, "top_k");
}

TEST(SamplingParams, RejectsLogprobsOutOfRange) {
  expect_params_error([](SamplingParams& p) { p.logprobs = -1; }, "logprobs");
  expect_params_error([](SamplingParams& p) { p.logprobs = 21; }, "logprobs");
}

TEST(SamplingParams, RejectsNegativeStopTokenIds) {
  expect_params_error([](SamplingParams& p) { p.stop_token_ids = {3, -1}; }, "stop_token_ids");
}

TEST(SamplingParams, RejectsEmptyStopString) {
  expect_params_error([](SamplingParams& p) { p.stop = {"ok", ""}; }, "stop strings");
}

void expect_config_error(const std::function<void(EngineConfig&)>& edit,
                         const std::string& needle) {
  EngineConfig config;
  edit(config);
  expect_error_mentioning([&] { config.validate(); }, needle);
}

TEST(EngineConfig, DefaultsMatchNanoVllm) {
  const EngineConfig config;
  EXPECT_EQ(config.max_num_batched_tokens, 16384);
  EXPECT_EQ(config.max_num_seqs, 512);
  EXPECT_EQ(config.max_model_len, 4096);
  EXPECT_FLOAT_EQ(config.gpu_memory_utilization, 0.9f);
  EXPECT_EQ(config.tensor_parallel_size, 1);
  EXPECT_FALSE(config.enforce_eager);
  EXPECT_EQ(config.kvcache_block_size, 256);
  EXPECT_EQ(config.num_kvcache_blocks, -1);
  EXPECT_TRUE(config.enable_prefix_caching);
  EXPECT_EQ(config.device, "auto");
  EXPECT_EQ(config.dtype, "auto");
  EXPECT_EQ(config.load_format, "safetensors");
  EXPECT_NO_THROW(config.validate());
}

TEST(EngineConfig, RejectsEachInvalidField) {
  expect_config_error([](EngineConfig& c) { c.max_num_batched_tokens = 0; },
                      "max_num_batched_tokens");
  expect_config_error([](EngineConfig& c) { c.max_num_seqs = 0; }, "max_num_seqs");
  expect_config_error([](EngineConfig& c) { c.max_model_len = 0; }, "max_model_len");
  expect_config_error([](EngineConfig& c) { c.gpu_memory_utilization = 0.0f; },
                      "gpu_memory_utilization");
  expect_config_error([](EngineConfig& c) { c.gpu_memory_utilization = 1.5f; },
                      "gpu_memory_utilization");
  expect_config_error([](EngineConfig& c) { c.tensor_parallel_size = 0; }, "tensor_parallel_size");
  expect_config_error([](EngineConfig& c) { c.tensor_parallel_size = 9; }, "tensor_parallel_size");
  expect_config_error([](EngineConfig& c) { c.kvcache_block_size = 0; }, "kvcache_block_size");
  expect_config_error([](EngineConfig& c) { c.num_kvcache_blocks = 0; }, "num_kvcache_blocks");
  expect_config_error([](EngineConfig& c) { c.num_kvcache_blocks = -2; }, "num_kvcache_blocks");
  expect_config_error([](EngineConfig& c) { c.device = "tpu"; }, "device");
  expect_config_error([](EngineConfig& c) { c.dtype = "int8"; }, "dtype");
  expect_config_error([](EngineConfig& c) { c.load_format = "gguf"; }, "load_format");
}

TEST(EngineConfig, MaxModelLenClampedToModelPositions) {
  EngineConfig config;
  config.max_model_len = 4096;
  EXPECT_EQ(config.resolved_max_model_len(40960), 4096);
  EXPECT_EQ(config.resolved_max_model_len(2048), 2048);
}

}  // namespace
}  // namespace nanovllm
