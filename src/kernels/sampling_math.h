// The sampling rule both backends follow, so a seeded request draws the same token on the CPU
// and the GPU from the same logits, whatever else is in the batch. Host and device code.
//
// Row inputs: logits l[V] (f32), temperature T, top_k K, top_p P, seed S, position n.
// - Order: tokens rank by logit descending, then id ascending; NaN ranks as -inf.
// - Greedy (T < SamplingParams::kGreedyTemperature, or no finite logit): the first token in
//   that order (-1 when every logit is NaN).
// - Otherwise, with m the largest logit and w_v = expf((l_v - m) * (1 / T)) (NaN -> 0):
//   1. top-k (0 < K < V): keep the first K tokens in order.
//   2. top-p (P < 1): over the kept tokens in order, with q_v = fixed_weight(w_v) and Q their sum,
//      keep token v while the q of the kept tokens before it is below (uint64)(P * Q) (double),
//      and always the first. Integer sums make the cut independent of summation order.
//   3. Draw by an exponential race (Gumbel-max): the kept token with the largest
//      (l_v - m) * (1 / T) - logf(-logf(u_v)), lowest id on ties, where u_v = uniform(S, n, v).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define NVLLM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define NVLLM_HOST_DEVICE inline
#endif

namespace nanovllm::sampling {

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

// The random 32-bit word of token v at position n under seed S: word v % 4 of the Philox block
// with counter (v / 4, n, 0, 0) and key S.
NVLLM_HOST_DEVICE uint32_t random_word(uint64_t seed, int32_t position, int32_t token) {
  const Philox4 block = philox4x32_10(static_cast<uint32_t>(token) >> 2,
                                      static_cast<uint32_t>(position), 0u, 0u,
                                      static_cast<uint32_t>(seed),
                                      static_cast<uint32_t>(seed >> 32));
  return block.x[token & 3];
}

// A uniform float in (0, 1) from the top 24 bits of a word: (k + 0.5) / 2^24, exact in f32.
NVLLM_HOST_DEVICE float uniform_from_word(uint32_t word) {
  return static_cast<float>(word >> 8) * 0x1p-24f + 0x1p-25f;
}

// -logf(-logf(u)): the Gumbel noise added to a token's scaled logit.
NVLLM_HOST_DEVICE float gumbel_from_word(uint32_t word) {
  const float u = uniform_from_word(word);
  return -logf(-logf(u));
}

// A weight in [0, 1] as a 40-bit fixed-point integer; a vocabulary of 2^23 tokens sums below 2^63.
NVLLM_HOST_DEVICE uint64_t fixed_weight(float weight) {
  return static_cast<uint64_t>(weight * 0x1p40f);
}

// The logit as an unsigned key whose integer order is the logit order (NaN as -inf).
NVLLM_HOST_DEVICE uint32_t orderable_logit(float logit) {
  if (logit != logit) logit = -__builtin_huge_valf();
  uint32_t bits;
  __builtin_memcpy(&bits, &logit, sizeof(bits));
  return (bits & 0x80000000u) ? ~bits : (bits | 0x80000000u);
}

// The whole ranking key: larger means earlier (logit descending, then id ascending).
NVLLM_HOST_DEVICE uint64_t rank_key(float logit, int32_t token) {
  return (static_cast<uint64_t>(orderable_logit(logit)) << 32) |
         static_cast<uint32_t>(~static_cast<uint32_t>(token));
}

}  // namespace nanovllm::sampling
