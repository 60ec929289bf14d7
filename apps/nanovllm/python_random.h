// CPython's `random` module stream: random.seed(n) for a non-negative integer n, then
// getrandbits / randint, bit for bit, so benchmark workloads match the ones Python scripts build.
#pragma once

#include <array>
#include <cstdint>

namespace nanovllm {

class PythonRandom {
 public:
  // random.seed(seed): MT19937 init_by_array over the 32-bit words of seed, low word first
  // ([0] for 0).
  explicit PythonRandom(uint64_t seed);

  // random.getrandbits(k) for 1 <= k <= 64.
  uint64_t getrandbits(int k);
  // random.randint(a, b): a + _randbelow(b - a + 1), redrawing getrandbits(n.bit_length())
  // until it is below n. Needs a <= b and b - a < 2^63.
  int64_t randint(int64_t a, int64_t b);

 private:
  uint32_t genrand_uint32();
  void init_genrand(uint32_t seed);

  static constexpr int kN = 624;
  std::array<uint32_t, kN> state_{};
  int index_ = kN;
};

}  // namespace nanovllm
