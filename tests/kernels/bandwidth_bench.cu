// Streaming bandwidth and its energy on the data the engine streams. The floors of
// docs/BENCHMARKS.md take the device-to-device copy of constant bytes (copy_bandwidth()), cool;
// the engine streams random bf16 weights and K/V, and on a card at its power limit the joules a
// byte decide the speed. Four passes over a buffer far larger than L2, 16-byte accesses with
// L2's evict-first policy (as decode attention's K/V and the GEMV's weights are read):
// - read: loads into registers, folded into one word a thread so that nothing is optimised away;
// - smem: decode attention's path without its arithmetic: cp.async into a 3-stage ring of 4 KB
//   a warp, read back by ldmatrix, folded likewise;
// - paged: the same over the cache's pattern: a chunk is 16 keys' 256-byte rows of one of 8 kv
//   heads, 2 KB apart, neighbouring warps taking the other heads of those keys;
// - copy: loads and stores (read plus write bytes counted);
// each over constant bytes (0x01, as copy_bandwidth() fills) and over random bf16 values in
// [-1, 1) (fill_random_bf16). Cool: the median of timed passes; sustained: about --seconds of
// passes with NVML's energy counter read beside them (power_meter.h).
//   usage: bandwidth_bench [--seconds S] [--gib N]   (defaults 2 and 4)
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>

#include "cuda_bench_util.h"
#include "kernels/cuda/device/l2_hints.cuh"
#include "kernels/cuda/device/tensor_core.cuh"
#include "power_meter.h"

namespace nanovllm::bench {
namespace {

constexpr int kThreads = 512;
constexpr int kUnroll = 4;  // independent 16-byte loads in flight a thread
// The smem pass: 4 warps a CTA, each with a ring of 3 stages of 256 pieces (4 KB).
constexpr int kRingWarps = 4;
constexpr int kStages = 3;
constexpr int kStagePieces = 256;

__device__ __forceinline__ uint4 load_evict_first(const uint4* p, uint64_t policy) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}

__device__ __forceinline__ void store_evict_first(uint4* p, uint4 v, uint64_t policy) {
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;" ::"l"(p), "r"(v.x),
               "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy)
               : "memory");
}

// src [pieces] is read (and with dst, copied to dst [pieces]) in a grid-stride loop; one word a
// thread into sink [grid * threads].
__global__ void read_kernel(const uint4* __restrict__ src, uint4* __restrict__ dst, size_t pieces,
                            uint32_t* sink) {
  const uint64_t policy = cuda::l2_evict_first_policy();
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  uint32_t folded = 0;
  size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + (kUnroll - 1) * stride < pieces; i += kUnroll * stride) {
    uint4 v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) v[u] = load_evict_first(src + i + u * stride, policy);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (dst != nullptr) store_evict_first(dst + i + u * stride, v[u], policy);
      folded ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
    }
  }
  for (; i < pieces; i += stride) {
    const uint4 v = load_evict_first(src + i, policy);
    if (dst != nullptr) store_evict_first(dst + i, v, policy);
    folded ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  sink[size_t{blockIdx.x} * blockDim.x + threadIdx.x] = folded;
}

// A paged chunk: the 16 keys' rows of one of 8 kv heads at head_dim 128 (256 bytes each), laid
// out as the cache is, [slot][kv head][head_dim], so its rows are 2 KB apart.
constexpr int kPagedHeads = 8;
constexpr int kRowPieces = 16;

// Where piece p (of kStagePieces) of a chunk lies in src: contiguous, or kPaged, chunk c taking
// kv head c % 8 of the 16 slots c / 8 (neighbouring warps read the heads of the same slots).
template <bool kPaged>
__device__ __forceinline__ size_t piece_offset(size_t chunk, int p) {
  if (!kPaged) return chunk * kStagePieces + p;
  const size_t slot = chunk / kPagedHeads * (kStagePieces / kRowPieces) + p / kRowPieces;
  return (slot * kPagedHeads + chunk % kPagedHeads) * kRowPieces + p % kRowPieces;
}

// src [chunks * kStagePieces]: each warp takes chunks in a grid-stride loop through its ring.
template <bool kPaged>
__global__ void __launch_bounds__(kRingWarps * 32)
    smem_kernel(const uint4* __restrict__ src, size_t chunks, uint32_t* sink) {
  __shared__ uint4 rings[kRingWarps][kStages][kStagePieces];
  const uint64_t policy = cuda::l2_evict_first_policy();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint4(&ring)[kStages][kStagePieces] = rings[warp];
  const size_t first = static_cast<size_t>(blockIdx.x) * kRingWarps + warp;
  const size_t stride = static_cast<size_t>(gridDim.x) * kRingWarps;
  auto issue = [&](size_t chunk, int stage) {
    if (chunk < chunks) {
      for (int p = lane; p < kStagePieces; p += 32) {
        cuda::cp_async_16(&ring[stage][p], src + piece_offset<kPaged>(chunk, p), true, policy);
      }
    }
    cuda::cp_async_commit();  // empty groups keep the count of the wait below
  };
  for (int s = 0; s < kStages - 1; ++s) issue(first + s * stride, s);
  uint32_t folded = 0;
  for (size_t k = 0; first + k * stride < chunks; ++k) {
    issue(first + (k + kStages - 1) * stride, static_cast<int>((k + kStages - 1) % kStages));
    cuda::cp_async_wait<kStages - 1>();
    __syncwarp();
    const int stage = static_cast<int>(k % kStages);
    for (int p = 0; p < kStagePieces; p += 32) {
      uint32_t r[4];
      cuda::ldmatrix_x4(r, &ring[stage][p + lane]);
      folded ^= r[0] ^ r[1] ^ r[2] ^ r[3];
    }
    __syncwarp();
  }
  sink[size_t{blockIdx.x} * blockDim.x + threadIdx.x] = folded;
}

enum class Pass { kRead, kSmem, kPaged, kCopy };

const char* pass_name(Pass pass) {
  switch (pass) {
    case Pass::kRead:
      return "read";
    case Pass::kSmem:
      return "smem";
    case Pass::kPaged:
      return "paged";
    case Pass::kCopy:
      return "copy";
  }
  return "?";
}

int run(double seconds, size_t bytes) {
  cudaStream_t stream;
  NVLLM_CUDA_CHECK(cudaStreamCreate(&stream));
  int device = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  cudaDeviceProp prop{};
  NVLLM_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  const PowerMeter meter(device);
  if (!meter.available()) fmt::print("NVML is not available: the cool figures only\n");

  DeviceBuffer src(bytes), dst(bytes);
  const size_t pieces = bytes / sizeof(uint4);
  const int grid = prop.multiProcessorCount * (2048 / kThreads);
  const int ring_grid = prop.multiProcessorCount * 3;  // decode attention's 3 CTAs an SM
  DeviceBuffer sink(static_cast<size_t>(grid) * kThreads * sizeof(uint32_t));
  std::mt19937 rng(0);

  fmt::print("{}, {} GiB buffers, sustained over about {} s\n", prop.name, bytes >> 30, seconds);
  fmt::print("{:<6} {:<12} {:>10} {:>12} {:>7} {:>8} {:>9}\n", "pass", "data", "cool GB/s",
             "sustained", "W", "SM MHz", "pJ/byte");
  for (const bool random : {false, true}) {
    if (random) {
      fill_random_bf16(src.get(), bytes, rng);
    } else {
      NVLLM_CUDA_CHECK(cudaMemset(src.get(), 1, bytes));
    }
    NVLLM_CUDA_CHECK(cudaMemset(dst.get(), 0, bytes));
    NVLLM_CUDA_CHECK(cudaDeviceSynchronize());
    for (const Pass pass : {Pass::kRead, Pass::kSmem, Pass::kPaged, Pass::kCopy}) {
      const double bytes_moved = pass == Pass::kCopy ? 2.0 * bytes : 1.0 * bytes;
      const CapturedOps ops(stream, [&] {
        if (pass == Pass::kSmem || pass == Pass::kPaged) {
          const auto kernel = pass == Pass::kPaged ? smem_kernel<true> : smem_kernel<false>;
          kernel<<<ring_grid, kRingWarps * 32, 0, stream>>>(src.get<uint4>(), pieces / kStagePieces,
                                                            sink.get<uint32_t>());
        } else {
          read_kernel<<<grid, kThreads, 0, stream>>>(
              src.get<uint4>(), pass == Pass::kCopy ? dst.get<uint4>() : nullptr, pieces,
              sink.get<uint32_t>());
        }
        NVLLM_CUDA_CHECK(cudaGetLastError());
      });
      const double cool_ms = time_ms(
          stream, kTimedRuns, [&] { NVLLM_CUDA_CHECK(cudaGraphLaunch(ops.exec(), stream)); });
      const double cool_gbps = bytes_moved / (cool_ms * 1e-3) / 1e9;
      const char* data = random ? "random bf16" : "constant";
      if (!meter.available()) {
        fmt::print("{:<6} {:<12} {:>10.0f}\n", pass_name(pass), data, cool_gbps);
        continue;
      }
      const PowerSample power = meter.measure(ops.exec(), stream, seconds);
      const double gbps = bytes_moved / (power.ms_per_replay * 1e-3) / 1e9;
      fmt::print("{:<6} {:<12} {:>10.0f} {:>12.0f} {:>7.0f} {:>8} {:>9.1f}\n", pass_name(pass),
                 data, cool_gbps, gbps, power.watts, power.sm_mhz,
                 power.millijoules_per_replay() * 1e9 / bytes_moved);
    }
  }
  NVLLM_CUDA_CHECK(cudaStreamDestroy(stream));
  return 0;
}

}  // namespace
}  // namespace nanovllm::bench

int main(int argc, char** argv) {
  double seconds = 2.0;
  size_t gib = 4;
  for (int i = 1; i < argc; ++i) {
    const bool has_value = i + 1 < argc;
    if (std::strcmp(argv[i], "--seconds") == 0 && has_value) {
      seconds = std::atof(argv[++i]);
    } else if (std::strcmp(argv[i], "--gib") == 0 && has_value) {
      gib = std::strtoull(argv[++i], nullptr, 10);
    } else {
      fmt::print(stderr, "usage: bandwidth_bench [--seconds S] [--gib N]\n");
      return 2;
    }
  }
  if (seconds <= 0 || gib < 1 || gib > 64) {
    fmt::print(stderr, "--seconds must be positive and --gib 1 to 64, got {} and {}\n", seconds,
               gib);
    return 2;
  }
  try {
    return nanovllm::bench::run(seconds, gib << 30);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bandwidth_bench: {}\n", e.what());
    return 1;
  }
}
