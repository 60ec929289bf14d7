// The sampling rule both backends follow, so a seeded request draws the same token on the CPU
// and the GPU from the same logits, whatever else is in the batch. Host and device code.
//
// Row inputs: logits l[V] (f32), temperature T, top_k K, top_p P, seed S, position n.
// - Order: tokens rank by logit descending, then id ascending; -0 counts as +0 and NaN ranks
//   below everything (rank_key below is that order as one integer).
// - Greedy (T < SamplingParams::kGreedyTemperature, or the largest logit is not finite): the
//   first token in that order (-1 when every logit is NaN).
// - Otherwise, with m the largest logit, t = 1 / T (f32, rounded to nearest) and
//   w_v = expf((l_v - m) * t) (NaN -> 0):
//   1. top-k (0 < K < V): keep the first K tokens in order.
//   2. top-p (P < 1): over the kept tokens in order, with q_v = fixed_weight(w_v) and Q their sum,
//      keep token v while the q of the kept tokens before it is below (uint64)(P * Q) (double),
//      and always the first. Integer sums make the cut independent of summation order.
//   3. Draw by an exponential race (Gumbel-max): the kept token with the largest
//      gumbel_score = fmaf(l_v - m, t, -logf(-logf(u_v))) (NaN -> -inf), lowest id on ties,
//      where u_v = uniform_from_word(random_word(S, n, v)).
// Every step is a pure function of the row, so the only differences between backends come from
// their expf/logf, which may differ in the last bit (a tie at the top-p cut or between the two
// best scores is then resolved differently; rare).
#pragma once

#include <math.h>

#include <cstdint>

#if defined(__CUDACC__)
#define NVLLM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define NVLLM_HOST_DEVICE inline
#endif

namespace nanovllm::sampling {

// Vocabularies hold 1 to 2^23 tokens, so the top-p fixed-point sums cannot overflow.
inline constexpr int64_t kMaxVocabulary = int64_t{1} << 23;

// Philox4x32-10 (Salmon et al., SC'11): four 32-bit outputs of a 128-bit counter under a
// 64-bit key.
struct Philox4 {
  uint32_t x[4];
};

NVLLM_HOST_DEVICE uint32_t mul_hi32(uint32_t a, uint32_t b) {
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
}

NVLLM_HOST_DEVICE Philox4 philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                        uint32_t k0, uint32_t k1) {
  constexpr uint32_t kMul0 = 0xD2511F53u, kMul1 = 0xCD9E8D57u;
  constexpr uint32_t kWeyl0 = 0x9E3779B9u, kWeyl1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = mul_hi32(kMul0, c0), lo0 = kMul0 * c0;
    const uint32_t hi1 = mul_hi32(kMul1, c2), lo1 = kMul1 * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return {{c0, c1, c2, c3}};
}

// The Philox block holding the random words of tokens 4 * group .. 4 * group + 3 at position n
// under seed S: counter (group, n, 0, 0), key S.
NVLLM_HOST_DEVICE Philox4 random_block(uint64_t seed, int32_t position, uint32_t group) {
  return philox4x32_10(group, static_cast<uint32_t>(position), 0u, 0u, static_cast<uint32_t>(seed),
                       static_cast<uint32_t>(seed >> 32));
}

// The random 32-bit word of token v: word v % 4 of block v / 4.
NVLLM_HOST_DEVICE uint32_t random_word(uint64_t seed, int32_t position, int32_t token) {
  return random_block(seed, position, static_cast<uint32_t>(token) >> 2).x[token & 3];
}

// A uniform float in (0, 1) from the top 23 bits of a word: (k + 0.5) / 2^23, exact in f32
// (it needs 24 significant bits), so never 0 or 1.
NVLLM_HOST_DEVICE float uniform_from_word(uint32_t word) {
  return static_cast<float>(word >> 9) * 0x1p-23f + 0x1p-24f;
}

// -logf(-logf(u)): the Gumbel noise added to a token's scaled logit, in about [-2.82, 16.64].
NVLLM_HOST_DEVICE float gumbel_from_word(uint32_t word) {
  const float u = uniform_from_word(word);
  return -logf(-logf(u));
}

// 1 / T rounded to nearest on both sides (whatever the device code's division flags).
NVLLM_HOST_DEVICE float reciprocal(float temperature) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(temperature);
#else
  return 1.0f / temperature;
#endif
}

// w_v = expf((l_v - m) * t) in [0, 1]; NaN logits weigh 0.
NVLLM_HOST_DEVICE float token_weight(float logit, float max_logit, float inv_temperature) {
  const float weight = expf((logit - max_logit) * inv_temperature);
  return weight == weight ? weight : 0.0f;
}

// A weight in [0, 1] as a 40-bit fixed-point integer; a vocabulary of 2^23 tokens sums below 2^63.
NVLLM_HOST_DEVICE uint64_t fixed_weight(float weight) {
  return static_cast<uint64_t>(weight * 0x1p40f);
}

// The top-p cut: tokens are kept while the q before them is below this.
NVLLM_HOST_DEVICE uint64_t top_p_threshold(float top_p, uint64_t total) {
  return static_cast<uint64_t>(static_cast<double>(top_p) * static_cast<double>(total));
}

// The race score of a token; NaN (a NaN logit) loses to everything.
NVLLM_HOST_DEVICE float gumbel_score(float logit, float max_logit, float inv_temperature,
                                     uint32_t word) {
  const float score = fmaf(logit - max_logit, inv_temperature, gumbel_from_word(word));
  return score == score ? score : -__builtin_huge_valf();
}

// A token whose scaled logit (l_v - m) * t is below cull_bound(best) scores below `best` (a score
// already reached by a kept token) and below the first token's score (at least the smallest
// Gumbel noise, about -2.82), so it cannot win the race: its noise need not be drawn. The bound
// leaves a margin of over 1 for rounding above the largest noise (about 16.64).
NVLLM_HOST_DEVICE float cull_bound(float best_score) {
  return (best_score > -3.0f ? best_score : -3.0f) - 18.0f;
}

NVLLM_HOST_DEVICE uint32_t float_bits(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t bits;
  __builtin_memcpy(&bits, &value, sizeof(bits));
  return bits;
#endif
}

NVLLM_HOST_DEVICE float bits_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float value;
  __builtin_memcpy(&value, &bits, sizeof(value));
  return value;
#endif
}

// The logit as an unsigned key whose integer order is the rule's order: NaN is 0, below -inf
// (0x007fffff); -0 and +0 are the same key.
NVLLM_HOST_DEVICE uint32_t orderable_logit(float logit) {
  if (logit != logit) return 0u;
  if (logit == 0.0f) logit = 0.0f;
  const uint32_t bits = float_bits(logit);
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The inverse of orderable_logit (a NaN for key 0, +0 for a zero).
NVLLM_HOST_DEVICE float logit_from_orderable(uint32_t key) {
  if (key == 0u) return bits_float(0x7fc00000u);
  return bits_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// The whole ranking key: larger means earlier (logit descending, then id ascending). Distinct
// tokens have distinct keys, and every key is above 0.
NVLLM_HOST_DEVICE uint64_t rank_key(float logit, int32_t token) {
  return (static_cast<uint64_t>(orderable_logit(logit)) << 32) |
         static_cast<uint32_t>(~static_cast<uint32_t>(token));
}

NVLLM_HOST_DEVICE int32_t token_of_key(uint64_t key) {
  return static_cast<int32_t>(~static_cast<uint32_t>(key));
}

NVLLM_HOST_DEVICE float logit_of_key(uint64_t key) {
  return logit_from_orderable(static_cast<uint32_t>(key >> 32));
}

// Whether the largest key of a row says every logit is NaN.
NVLLM_HOST_DEVICE bool all_nan(uint64_t max_key) {
  return (max_key >> 32) == 0;
}

}  // namespace nanovllm::sampling
