// Sampling and logprobs on the CPU: the reference implementation of kernels/sampling_math.h's
// rule, row by row, written for clarity (sorts instead of radix selects).
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"
#include "kernels/sampling_math.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::cpu {
namespace {

using sampling::rank_key;

uint64_t row_max_key(const float* logits, int64_t vocab) {
  uint64_t best = 0;
  for (int64_t v = 0; v < vocab; ++v) best = std::max(best, rank_key(logits[v], int32_t(v)));
  return best;
}

// The race over every token; tokens 4j..4j+3 share one Philox block.
int32_t race_over_vocabulary(const float* logits, int64_t vocab, float max_logit,
                             float inv_temperature, uint64_t seed, int32_t position) {
  uint64_t winner = 0;
  float best = -std::numeric_limits<float>::infinity();
  for (int64_t begin = 0; begin < vocab; begin += 4) {
    const int64_t end = std::min(begin + 4, vocab);
    const float bound = sampling::cull_bound(best);
    bool any = false;
    for (int64_t v = begin; v < end; ++v) {
      any = any || !((logits[v] - max_logit) * inv_temperature < bound);
    }
    if (!any) continue;
    const sampling::Philox4 block =
        sampling::random_block(seed, position, static_cast<uint32_t>(begin >> 2));
    for (int64_t v = begin; v < end; ++v) {
      if ((logits[v] - max_logit) * inv_temperature < bound) continue;
      const float score =
          sampling::gumbel_score(logits[v], max_logit, inv_temperature, block.x[v & 3]);
      const uint64_t key = rank_key(score, int32_t(v));
      if (key > winner) {
        winner = key;
        best = score;
      }
    }
  }
  return sampling::token_of_key(winner);
}

// The race over the tokens of `keys` (rank keys, any order).
int32_t race_over_keys(const uint64_t* keys, int64_t count, float max_logit, float inv_temperature,
                       uint64_t seed, int32_t position) {
  uint64_t winner = 0;
  float best = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < count; ++i) {
    const float logit = sampling::logit_of_key(keys[i]);
    if ((logit - max_logit) * inv_temperature < sampling::cull_bound(best)) continue;
    const int32_t token = sampling::token_of_key(keys[i]);
    const float score = sampling::gumbel_score(logit, max_logit, inv_temperature,
                                               sampling::random_word(seed, position, token));
    const uint64_t key = rank_key(score, token);
    if (key > winner) {
      winner = key;
      best = score;
    }
  }
  return sampling::token_of_key(winner);
}

uint64_t fixed_weight_of_key(uint64_t key, float max_logit, float inv_temperature) {
  return sampling::fixed_weight(
      sampling::token_weight(sampling::logit_of_key(key), max_logit, inv_temperature));
}

// How many of keys[0, count) the top-p rule keeps, sorting the keys (descending) as far as it
// reads them: sorted chunks grow geometrically, so a small nucleus costs O(count).
int64_t top_p_kept(uint64_t* keys, int64_t count, float top_p, float max_logit,
                   float inv_temperature) {
  uint64_t total = 0;
  for (int64_t i = 0; i < count; ++i)
    total += fixed_weight_of_key(keys[i], max_logit, inv_temperature);
  const uint64_t threshold = sampling::top_p_threshold(top_p, total);

  int64_t kept = 0, sorted_end = 0;
  uint64_t before = 0;  // q of the kept tokens
  while (kept < count) {
    if (kept > 0 && before >= threshold) break;
    if (kept == sorted_end) {
      const int64_t next_end = std::min(count, std::max<int64_t>(2 * sorted_end, 64));
      std::partial_sort(keys + sorted_end, keys + next_end, keys + count, std::greater<>());
      sorted_end = next_end;
    }
    before += fixed_weight_of_key(keys[kept], max_logit, inv_temperature);
    ++kept;
  }
  return kept;
}

}  // namespace

int32_t sample_row(const float* logits, int64_t vocab, const RowSamplingParams& params,
                   std::vector<uint64_t>& scratch) {
  const uint64_t max_key = row_max_key(logits, vocab);
  if (sampling::all_nan(max_key)) return -1;
  const int32_t first = sampling::token_of_key(max_key);
  const float max_logit = sampling::logit_of_key(max_key);
  if (params.temperature < SamplingParams::kGreedyTemperature || !std::isfinite(max_logit)) {
    return first;
  }
  const float inv_temperature = sampling::reciprocal(params.temperature);
  const bool top_k = params.top_k > 0 && params.top_k < vocab;
  const bool top_p = params.top_p < 1.0f;
  if (!top_k && !top_p) {
    return race_over_vocabulary(logits, vocab, max_logit, inv_temperature, params.seed,
                                params.position);
  }

  scratch.resize(static_cast<size_t>(vocab));
  uint64_t* keys = scratch.data();
  for (int64_t v = 0; v < vocab; ++v) keys[v] = rank_key(logits[v], int32_t(v));
  int64_t kept = vocab;
  if (top_k) {
    kept = params.top_k;
    std::nth_element(keys, keys + kept - 1, keys + vocab, std::greater<>());
  }
  if (top_p) kept = top_p_kept(keys, kept, params.top_p, max_logit, inv_temperature);
  return race_over_keys(keys, kept, max_logit, inv_temperature, params.seed, params.position);
}

RowLogprobs logprobs_row(const float* logits, int64_t vocab, int32_t token, int num_top,
                         int32_t* top_ids, float* top_logprobs, std::vector<uint64_t>& scratch) {
  float max_logit = -std::numeric_limits<float>::infinity();
  for (int64_t v = 0; v < vocab; ++v) max_logit = std::max(max_logit, logits[v]);  // skips NaN
  double sum = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    if (logits[v] > -std::numeric_limits<float>::infinity()) {
      sum += std::exp(static_cast<double>(logits[v]) - max_logit);
    }
  }
  const double log_normalizer = max_logit == -std::numeric_limits<float>::infinity()
                                    ? static_cast<double>(max_logit)
                                    : max_logit + std::log(sum);

  RowLogprobs result;
  if (token >= 0 && token < vocab) {
    const float logit = logits[token];
    result.logprob = static_cast<float>(logit - log_normalizer);
    result.rank = 1;
    for (int64_t v = 0; v < vocab; ++v) result.rank += logits[v] > logit ? 1 : 0;
  }

  if (num_top > 0) {
    scratch.resize(static_cast<size_t>(vocab));
    uint64_t* keys = scratch.data();
    for (int64_t v = 0; v < vocab; ++v) keys[v] = rank_key(logits[v], int32_t(v));
    std::partial_sort(keys, keys + num_top, keys + vocab, std::greater<>());
    for (int i = 0; i < num_top; ++i) {
      const int32_t id = sampling::token_of_key(keys[i]);
      top_ids[i] = id;
      top_logprobs[i] = static_cast<float>(logits[id] - log_normalizer);
    }
  }
  return result;
}

void sample(const Tensor& logits, const SamplingTensors& params, Tensor token_ids,
            ThreadPool& pool) {
  check_tensor(logits, "sample logits", DType::kF32, 2);
  const int64_t rows = logits.size(0);
  const int64_t vocab = logits.size(1);
  check_sampling_vocabulary(vocab);
  check_shape(params.temperature, "sample temperature", DType::kF32, {rows});
  check_shape(params.top_k, "sample top_k", DType::kI32, {rows});
  check_shape(params.top_p, "sample top_p", DType::kF32, {rows});
  check_shape(params.seed, "sample seed", DType::kI64, {rows});
  check_shape(params.position, "sample position", DType::kI32, {rows});
  check_shape(token_ids, "sample token_ids", DType::kI32, {rows});

  const float* data = logits.data_as<float>();
  const float* temperature = params.temperature.data_as<float>();
  const int32_t* top_k = params.top_k.data_as<int32_t>();
  const float* top_p = params.top_p.data_as<float>();
  const int64_t* seed = params.seed.data_as<int64_t>();
  const int32_t* position = params.position.data_as<int32_t>();
  int32_t* out = token_ids.data_as<int32_t>();
  pool.parallel_for(
      rows, vocab,
      [&](int64_t begin, int64_t end) {
        std::vector<uint64_t> scratch;
        for (int64_t r = begin; r < end; ++r) {
          const RowSamplingParams row{temperature[r], top_k[r], top_p[r],
                                      static_cast<uint64_t>(seed[r]), position[r]};
          out[r] = sample_row(data + r * vocab, vocab, row, scratch);
        }
      },
      1);
}

void compute_logprobs(const Tensor& logits, const Tensor& token_ids, int num_top,
                      const LogprobsTensors& out, ThreadPool& pool) {
  check_tensor(logits, "logprobs logits", DType::kF32, 2);
  const int64_t rows = logits.size(0);
  const int64_t vocab = logits.size(1);
  check_sampling_vocabulary(vocab);
  check_logprobs_count(num_top, vocab);
  check_shape(token_ids, "logprobs token_ids", DType::kI32, {rows});
  check_shape(out.logprob, "logprobs logprob", DType::kF32, {rows});
  check_shape(out.rank, "logprobs rank", DType::kI32, {rows});
  if (num_top > 0) {
    check_shape(out.top_ids, "logprobs top_ids", DType::kI32, {rows, num_top});
    check_shape(out.top_logprobs, "logprobs top_logprobs", DType::kF32, {rows, num_top});
  }

  const float* data = logits.data_as<float>();
  const int32_t* tokens = token_ids.data_as<int32_t>();
  float* logprob = out.logprob.data_as<float>();
  int32_t* rank = out.rank.data_as<int32_t>();
  int32_t* top_ids = num_top > 0 ? out.top_ids.data_as<int32_t>() : nullptr;
  float* top_logprobs = num_top > 0 ? out.top_logprobs.data_as<float>() : nullptr;
  pool.parallel_for(
      rows, 2 * vocab,
      [&](int64_t begin, int64_t end) {
        std::vector<uint64_t> scratch;
        for (int64_t r = begin; r < end; ++r) {
          const RowLogprobs row =
              logprobs_row(data + r * vocab, vocab, tokens[r], num_top,
                           top_ids ? top_ids + r * num_top : nullptr,
                           top_logprobs ? top_logprobs + r * num_top : nullptr, scratch);
          logprob[r] = row.logprob;
          rank[r] = row.rank;
        }
      },
      1);
}

void check_sampling_vocabulary(int64_t vocab) {
  NVLLM_CHECK_MSG(vocab > 0 && vocab <= sampling::kMaxVocabulary,
                  "sampling over a vocabulary of {} tokens: expected 1 to {}", vocab,
                  sampling::kMaxVocabulary);
}

void check_logprobs_count(int num_top, int64_t vocab) {
  NVLLM_CHECK_MSG(num_top >= 0 && num_top <= SamplingParams::kMaxLogprobs && num_top <= vocab,
                  "{} top logprobs asked of a vocabulary of {}: expected 0 to {}", num_top, vocab,
                  std::min<int64_t>(SamplingParams::kMaxLogprobs, vocab));
}

}  // namespace nanovllm::cpu
