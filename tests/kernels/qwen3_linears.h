// The linears of the Qwen3 shapes and of Qwen2.5-7B, for the benchmarks that measure them one
// by one.
#pragma once

#include <vector>

namespace nanovllm::bench {

struct Qwen3Shape {
  const char* name;
  int hidden, intermediate, heads, kv_heads;
  int experts = 0;  // a mixture of experts: the router instead of the dense MLP's linears
};

inline constexpr Qwen3Shape kQwen3Shapes[] = {
    {"0.6b", 1024, 3072, 16, 8},       {"4b", 2560, 9728, 32, 8},
    {"8b", 4096, 12288, 32, 8},        {"14b", 5120, 17408, 40, 8},
    {"32b", 5120, 25600, 64, 8},       {"30b-a3b", 2048, 0, 32, 4, 128},
    {"qwen2.5-7b", 3584, 18944, 28, 4}};

struct Linear {
  const char* name;
  int n, k;             // weight [n, k]
  bool logits = false;  // the LM head: f32 out, on the sampled rows only
};

// qkv_proj, o_proj, gate_up_proj and down_proj (or the router) and the LM head of `s`
// (head_dim 128, the vocabulary of 151,936).
inline std::vector<Linear> linears_of(const Qwen3Shape& s) {
  const int q = s.heads * 128;
  const int kv = s.kv_heads * 128;
  if (s.experts > 0) {
    return {{"qkv_proj", q + 2 * kv, s.hidden},
            {"o_proj", s.hidden, q},
            {"router", s.experts, s.hidden},
            {"lm_head", 151936, s.hidden, true}};
  }
  return {{"qkv_proj", q + 2 * kv, s.hidden},
          {"o_proj", s.hidden, q},
          {"gate_up_proj", 2 * s.intermediate, s.hidden},
          {"down_proj", s.hidden, s.intermediate},
          {"lm_head", 151936, s.hidden, true}};
}

}  // namespace nanovllm::bench
