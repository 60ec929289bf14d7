// Helpers for the sampling tests: the rule of kernels/sampling_math.h written out by brute
// force (full sorts, no culling), and Backend::sample / compute_logprobs on host vectors.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <numeric>
#include <vector>

#include "core/buffer.h"
#include "kernels/backend.h"
#include "kernels/sampling_math.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::test {

struct RowRule {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  uint64_t seed = 0;
  int32_t position = 0;
};

// Token ids in the rule's order (logit descending, NaN last, lowest id first on ties).
inline std::vector<int32_t> rule_order(const std::vector<float>& logits) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return sampling::rank_key(logits[a], a) > sampling::rank_key(logits[b], b);
  });
  return order;
}

inline bool rule_is_greedy(const std::vector<float>& logits, const RowRule& rule) {
  const int32_t first = rule_order(logits)[0];
  return rule.temperature < SamplingParams::kGreedyTemperature || !std::isfinite(logits[first]);
}

// The tokens a non-greedy draw may return, in the rule's order.
inline std::vector<int32_t> rule_kept_tokens(const std::vector<float>& logits,
                                             const RowRule& rule) {
  std::vector<int32_t> order = rule_order(logits);
  const int64_t vocab = static_cast<int64_t>(logits.size());
  if (rule.top_k > 0 && rule.top_k < vocab) order.resize(rule.top_k);
  if (rule.top_p < 1.0f) {
    const float max_logit = logits[order[0]];
    const float inv_temperature = sampling::reciprocal(rule.temperature);
    std::vector<uint64_t> q;
    uint64_t total = 0;
    for (int32_t id : order) {
      q.push_back(
          sampling::fixed_weight(sampling::token_weight(logits[id], max_logit, inv_temperature)));
      total += q.back();
    }
    const uint64_t threshold = sampling::top_p_threshold(rule.top_p, total);
    size_t kept = 1;
    uint64_t before = q[0];
    while (kept < order.size() && before < threshold) before += q[kept++];
    order.resize(kept);
  }
  return order;
}

// The token the rule draws (-1 when every logit is NaN).
inline int32_t rule_token(const std::vector<float>& logits, const RowRule& rule) {
  const std::vector<int32_t> order = rule_order(logits);
  if (std::isnan(logits[order[0]])) return -1;
  if (rule_is_greedy(logits, rule)) return order[0];
  const float max_logit = logits[order[0]];
  const float inv_temperature = sampling::reciprocal(rule.temperature);
  uint64_t winner = 0;
  for (int32_t id : rule_kept_tokens(logits, rule)) {
    const float score = sampling::gumbel_score(logits[id], max_logit, inv_temperature,
                                               sampling::random_word(rule.seed, rule.position, id));
    winner = std::max(winner, sampling::rank_key(score, id));
  }
  return sampling::token_of_key(winner);
}

// A backend tensor holding `values` (raw elements of its dtype).
template <typename T>
OwnedTensor backend_tensor(Backend& backend, DType dtype, std::initializer_list<int64_t> shape,
                           const std::vector<T>& values) {
  OwnedTensor owned(dtype, shape, backend.device());
  backend.upload(owned.tensor, values.data());
  return owned;
}

// Backend::sample of logits f32 [rules.size(), vocab].
inline std::vector<int32_t> backend_sample(Backend& backend, const std::vector<float>& logits,
                                           int64_t vocab, const std::vector<RowRule>& rules) {
  const int64_t rows = static_cast<int64_t>(rules.size());
  std::vector<float> temperature, top_p;
  std::vector<int32_t> top_k, position;
  std::vector<int64_t> seed;
  for (const RowRule& rule : rules) {
    temperature.push_back(rule.temperature);
    top_k.push_back(rule.top_k);
    top_p.push_back(rule.top_p);
    seed.push_back(static_cast<int64_t>(rule.seed));
    position.push_back(rule.position);
  }
  OwnedTensor logits_t = backend_tensor(backend, DType::kF32, {rows, vocab}, logits);
  OwnedTensor temperature_t = backend_tensor(backend, DType::kF32, {rows}, temperature);
  OwnedTensor top_k_t = backend_tensor(backend, DType::kI32, {rows}, top_k);
  OwnedTensor top_p_t = backend_tensor(backend, DType::kF32, {rows}, top_p);
  OwnedTensor seed_t = backend_tensor(backend, DType::kI64, {rows}, seed);
  OwnedTensor position_t = backend_tensor(backend, DType::kI32, {rows}, position);
  OwnedTensor out_t = backend_tensor(backend, DType::kI32, {rows}, std::vector<int32_t>(rows, -7));
  const SamplingTensors params{temperature_t.tensor, top_k_t.tensor, top_p_t.tensor, seed_t.tensor,
                               position_t.tensor};
  backend.sample(logits_t.tensor, params, out_t.tensor);
  std::vector<int32_t> out(rows);
  backend.download(out.data(), out_t.tensor);
  backend.synchronize();
  return out;
}

struct BackendLogprobs {
  std::vector<float> logprob;       // [rows]
  std::vector<int32_t> rank;        // [rows]
  std::vector<int32_t> top_ids;     // [rows * num_top]
  std::vector<float> top_logprobs;  // [rows * num_top]
};

// Backend::compute_logprobs of logits f32 [token_ids.size(), vocab]; outputs start poisoned.
inline BackendLogprobs backend_logprobs(Backend& backend, const std::vector<float>& logits,
                                        int64_t vocab, const std::vector<int32_t>& token_ids,
                                        int num_top) {
  const int64_t rows = static_cast<int64_t>(token_ids.size());
  const float nan = std::nanf("");
  OwnedTensor logits_t = backend_tensor(backend, DType::kF32, {rows, vocab}, logits);
  OwnedTensor tokens_t = backend_tensor(backend, DType::kI32, {rows}, token_ids);
  OwnedTensor logprob_t =
      backend_tensor(backend, DType::kF32, {rows}, std::vector<float>(rows, nan));
  OwnedTensor rank_t = backend_tensor(backend, DType::kI32, {rows}, std::vector<int32_t>(rows, -7));
  const int64_t top_size = rows * std::max(num_top, 1);
  OwnedTensor top_ids_t = backend_tensor(backend, DType::kI32, {rows, std::max(num_top, 1)},
                                         std::vector<int32_t>(top_size, -7));
  OwnedTensor top_logprobs_t = backend_tensor(backend, DType::kF32, {rows, std::max(num_top, 1)},
                                              std::vector<float>(top_size, nan));
  const LogprobsTensors out{logprob_t.tensor, rank_t.tensor, top_ids_t.tensor,
                            top_logprobs_t.tensor};
  backend.compute_logprobs(logits_t.tensor, tokens_t.tensor, num_top, out);
  BackendLogprobs result;
  result.logprob.resize(rows);
  result.rank.resize(rows);
  backend.download(result.logprob.data(), logprob_t.tensor);
  backend.download(result.rank.data(), rank_t.tensor);
  if (num_top > 0) {
    result.top_ids.resize(rows * num_top);
    result.top_logprobs.resize(rows * num_top);
    backend.download(result.top_ids.data(), out.top_ids);
    backend.download(result.top_logprobs.data(), out.top_logprobs);
  }
  backend.synchronize();
  return result;
}

// log_softmax of one row in double (NaN logits skipped).
inline std::vector<double> reference_log_softmax(const float* logits, int64_t vocab) {
  double max_logit = -INFINITY;
  for (int64_t v = 0; v < vocab; ++v) {
    if (!std::isnan(logits[v])) max_logit = std::max<double>(max_logit, logits[v]);
  }
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    if (logits[v] > -INFINITY) sum += std::exp(logits[v] - max_logit);
  }
  std::vector<double> out(vocab);
  for (int64_t v = 0; v < vocab; ++v) out[v] = logits[v] - max_logit - std::log(sum);
  return out;
}

}  // namespace nanovllm::test
