#include "nanovllm/python_random.h"

#include <bit>
#include <vector>

#include "core/check.h"

namespace nanovllm {
namespace {

constexpr int kM = 397;
constexpr uint32_t kMatrixA = 0x9908b0dfU;
constexpr uint32_t kUpperMask = 0x80000000U;
constexpr uint32_t kLowerMask = 0x7fffffffU;

}  // namespace

// Mirrors init_genrand and init_by_array in CPython's Modules/_randommodule.c.
void PythonRandom::init_genrand(uint32_t seed) {
  state_[0] = seed;
  for (int i = 1; i < kN; ++i) {
    state_[i] = 1812433253U * (state_[i - 1] ^ (state_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  index_ = kN;
}

PythonRandom::PythonRandom(uint64_t seed) {
  std::vector<uint32_t> key{static_cast<uint32_t>(seed)};
  if ((seed >> 32) != 0) key.push_back(static_cast<uint32_t>(seed >> 32));
  init_genrand(19650218U);
  const int key_length = static_cast<int>(key.size());
  int i = 1;
  int j = 0;
  for (int k = kN > key_length ? kN : key_length; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1664525U)) + key[j] +
                static_cast<uint32_t>(j);
    ++i;
    ++j;
    if (i >= kN) {
      state_[0] = state_[kN - 1];
      i = 1;
    }
    if (j >= key_length) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    state_[i] = (state_[i] ^ ((state_[i - 1] ^ (state_[i - 1] >> 30)) * 1566083941U)) -
                static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      state_[0] = state_[kN - 1];
      i = 1;
    }
  }
  state_[0] = 0x80000000U;  // the state is never all zeros
}

uint32_t PythonRandom::genrand_uint32() {
  if (index_ >= kN) {
    for (int k = 0; k < kN; ++k) {
      const uint32_t y = (state_[k] & kUpperMask) | (state_[(k + 1) % kN] & kLowerMask);
      state_[k] = state_[(k + kM) % kN] ^ (y >> 1) ^ ((y & 1U) != 0 ? kMatrixA : 0U);
    }
    index_ = 0;
  }
  uint32_t y = state_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680U;
  y ^= (y << 15) & 0xefc60000U;
  y ^= y >> 18;
  return y;
}

uint64_t PythonRandom::getrandbits(int k) {
  NVLLM_CHECK_MSG(k >= 1 && k <= 64, "getrandbits: k must be in [1, 64], got {}", k);
  if (k <= 32) return genrand_uint32() >> (32 - k);
  // CPython fills 32-bit words from the least significant; the last word keeps its top bits.
  const uint64_t low = genrand_uint32();
  const uint64_t high = genrand_uint32() >> (64 - k);
  return (high << 32) | low;
}

int64_t PythonRandom::randint(int64_t a, int64_t b) {
  if (a > b) throw Error(fmt::format("randint: empty range [{}, {}]", a, b));
  const uint64_t n = static_cast<uint64_t>(b) - static_cast<uint64_t>(a) + 1;
  NVLLM_CHECK_MSG(n != 0 && n <= (uint64_t{1} << 63), "randint: range [{}, {}] is too wide", a, b);
  const int k = std::bit_width(n);
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return a + static_cast<int64_t>(r);
}

}  // namespace nanovllm
