#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/check.h"

namespace nanovllm {
namespace {

// Descending by logit, ascending by token id on ties; NaN ranks below everything (a strict
// weak order even then).
struct MoreLikely {
  std::span<const float> logits;
  float key(int id) const {
    const float logit = logits[id];
    return std::isnan(logit) ? -std::numeric_limits<float>::infinity() : logit;
  }
  bool operator()(int a, int b) const {
    const float ka = key(a), kb = key(b);
    return ka > kb || (ka == kb && a < b);
  }
};

}  // namespace

double uniform_01(std::mt19937_64& rng) {
  return static_cast<double>(rng() >> 11) * 0x1.0p-53;
}

int argmax_lowest_index(std::span<const float> logits) {
  int best = -1;
  float best_value = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_value || (best == -1 && logits[i] == best_value)) {
      best = static_cast<int>(i);
      best_value = logits[i];
    }
  }
  if (best == -1) throw Error("sampler: every logit is NaN");
  return best;
}

SampleResult Sampler::sample(std::span<const float> logits, const SamplingParams& params,
                             std::mt19937_64& rng) {
  NVLLM_CHECK(!logits.empty());
  SampleResult result;
  result.token_id =
      params.is_greedy() ? argmax_lowest_index(logits) : sample_random(logits, params, rng);
  if (params.logprobs)
    result.logprobs = compute_logprobs(logits, result.token_id, *params.logprobs);
  return result;
}

void Sampler::sample_rows(const float* logits, int vocab, std::span<const Row> rows,
                          std::vector<SampleResult>& out) {
  for (size_t i = 0; i < rows.size(); ++i) {
    const std::span<const float> row(logits + i * static_cast<size_t>(vocab), vocab);
    out.push_back(sample(row, *rows[i].params, *rows[i].rng));
  }
}

int Sampler::sample_random(std::span<const float> logits, const SamplingParams& params,
                           std::mt19937_64& rng) {
  const int vocab = static_cast<int>(logits.size());
  const int top_k = params.top_k > 0 ? std::min(params.top_k, vocab) : vocab;
  const bool use_top_p = params.top_p < 1.0f;
  if (top_k == vocab && !use_top_p) return sample_full_vocabulary(logits, params, rng);

  // Candidate tokens, most likely first when a truncation needs that order.
  candidates_.resize(vocab);
  std::iota(candidates_.begin(), candidates_.end(), 0);
  const MoreLikely more_likely{logits};
  if (top_k < vocab) {
    std::nth_element(candidates_.begin(), candidates_.begin() + top_k, candidates_.end(),
                     more_likely);
    candidates_.resize(top_k);
    std::sort(candidates_.begin(), candidates_.end(), more_likely);
  } else if (use_top_p) {
    std::sort(candidates_.begin(), candidates_.end(), more_likely);
  }

  float max_logit = -std::numeric_limits<float>::infinity();
  for (int id : candidates_) max_logit = std::max(max_logit, logits[id]);
  if (!std::isfinite(max_logit)) return argmax_lowest_index(logits);

  // Unnormalized probabilities exp((logit - max) / temperature).
  const double inv_temperature = 1.0 / params.temperature;
  weights_.resize(candidates_.size());
  double total = 0.0;
  for (size_t i = 0; i < candidates_.size(); ++i) {
    const float logit = logits[candidates_[i]];
    weights_[i] = std::isnan(logit) ? 0.0 : std::exp((logit - max_logit) * inv_temperature);
    total += weights_[i];
  }

  size_t kept = candidates_.size();
  if (use_top_p) {
    // Keep tokens while the mass before them is below top_p (so the token that crosses it is
    // kept, and always the first one), as vLLM's top-p mask does.
    const double threshold = static_cast<double>(params.top_p) * total;
    double before = weights_[0];
    kept = 1;
    while (kept < candidates_.size() && before < threshold) before += weights_[kept++];
    total = 0.0;
    for (size_t i = 0; i < kept; ++i) total += weights_[i];
  }

  const double target = uniform_01(rng) * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < kept; ++i) {
    cumulative += weights_[i];
    if (target < cumulative) return candidates_[i];
  }
  // Rounding left the target at the very top: the last token with any weight.
  for (size_t i = kept; i-- > 0;)
    if (weights_[i] > 0.0) return candidates_[i];
  return candidates_[0];
}

int Sampler::sample_full_vocabulary(std::span<const float> logits, const SamplingParams& params,
                                    std::mt19937_64& rng) {
  // No truncation: the candidates are the vocabulary in id order, nothing to sort.
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float logit : logits) max_logit = std::max(max_logit, logit);
  if (!std::isfinite(max_logit)) return argmax_lowest_index(logits);
  const double inv_temperature = 1.0 / params.temperature;
  weights_.resize(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    weights_[i] = std::isnan(logits[i]) ? 0.0 : std::exp((logits[i] - max_logit) * inv_temperature);
    total += weights_[i];
  }
  const double target = uniform_01(rng) * total;
  double cumulative = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) {
    cumulative += weights_[i];
    if (target < cumulative) return static_cast<int>(i);
  }
  for (size_t i = logits.size(); i-- > 0;)
    if (weights_[i] > 0.0) return static_cast<int>(i);
  return argmax_lowest_index(logits);
}

PositionLogprobs Sampler::compute_logprobs(std::span<const float> logits, int token_id,
                                           int num_top) {
  const int vocab = static_cast<int>(logits.size());
  float max_logit = -std::numeric_limits<float>::infinity();
  for (float logit : logits) max_logit = std::max(max_logit, logit);
  double sum = 0.0;
  for (float logit : logits) sum += std::exp(static_cast<double>(logit) - max_logit);
  const double log_normalizer = max_logit + std::log(sum);
  const auto logprob_of = [&](int id) {
    return static_cast<float>(static_cast<double>(logits[id]) - log_normalizer);
  };

  PositionLogprobs result;
  result.token_id = token_id;
  result.logprob = logprob_of(token_id);
  result.rank = 1;
  for (float logit : logits) result.rank += logit > logits[token_id] ? 1 : 0;

  const int count = std::min(num_top, vocab);
  if (count > 0) {
    candidates_.resize(vocab);
    std::iota(candidates_.begin(), candidates_.end(), 0);
    std::partial_sort(candidates_.begin(), candidates_.begin() + count, candidates_.end(),
                      MoreLikely{logits});
    result.top.reserve(count);
    for (int i = 0; i < count; ++i)
      result.top.push_back({candidates_[i], logprob_of(candidates_[i])});
  }
  return result;
}

}  // namespace nanovllm
