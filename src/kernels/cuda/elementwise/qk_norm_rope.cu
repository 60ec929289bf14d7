// Per-head RMSNorm of q and k followed by neox rotary embedding, in place, optionally storing
// k and v into the paged cache in the same pass. A warp works on whole heads: lane l owns the
// rotation pairs (i, i + head_dim / 2) for i = l, l + 32, ...; pairs rule out 16-byte vectors,
// but the lanes of a warp still read consecutive elements, so every access is coalesced.
// - head_dim 64 or 128 (every model here): a warp takes kHeadsPerWarp heads of a token and
//   loads all of them before any arithmetic, so that enough bytes are in flight to stream
//   prefill's 16k-token batches near memory bandwidth (one head a warp, loading in turn, took
//   758 us for 16,384 tokens of Qwen3-0.6B's heads on an H100, 5x this kernel);
// - other widths: one warp per (token, head).
// Both round as device/head_norm_rope.cuh does, as decode attention's on-the-fly norm does.
#include "kernels/cuda/device/block_reduce.cuh"
#include "kernels/cuda/device/elementwise_math.cuh"
#include "kernels/cuda/device/head_norm_rope.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;
constexpr int kHeadsPerWarp = 4;  // at 16,384 tokens on an H100: 146 us; 2 heads 160, 8 heads 195

// The heads a token's pass covers: q and k, and v when storing.
__host__ __device__ inline int heads_per_token(const QkNormRopeArgs& args) {
  return args.num_heads + (args.k_cache != nullptr ? 2 : 1) * args.num_kv_heads;
}

// Where a token's k or v head goes in the cache, or null (no store, a q head, or a skipped slot).
template <typename T>
__device__ __forceinline__ T* cache_head(const QkNormRopeArgs& args, int64_t token, int h) {
  if (args.k_cache == nullptr || h < args.num_heads) return nullptr;
  const int32_t slot = args.slot_mapping[token];
  if (slot < 0 || slot >= args.num_slots) return nullptr;
  const bool is_v = h >= args.num_heads + args.num_kv_heads;
  const int kv_head = (h - args.num_heads) % args.num_kv_heads;
  return static_cast<T*>(is_v ? args.v_cache : args.k_cache) +
         (static_cast<int64_t>(slot) * args.num_kv_heads + kv_head) * args.head_dim;
}

// grid (tokens, ceil(heads_per_token / (kWarpsPerBlock * kHeadsPerWarp))); warp w of block
// (t, y) takes heads (y * kWarpsPerBlock + w) * kHeadsPerWarp + j of token t, j < kHeadsPerWarp.
template <typename T, int kHeadDim>
__global__ void qk_norm_rope_heads_kernel(const QkNormRopeArgs args) {
  constexpr int kPairs = kHeadDim / 64;
  allow_next_kernel_launch();
  const int64_t token = blockIdx.x;
  const int lane = threadIdx.x % 32;
  const int first_head =
      (static_cast<int>(blockIdx.y) * kWarpsPerBlock + static_cast<int>(threadIdx.x) / 32) *
      kHeadsPerWarp;
  const int heads = min(heads_per_token(args) - first_head, kHeadsPerWarp);
  if (heads <= 0) return;  // uniform over the warp, as is every branch here
  const int num_rotated = args.num_heads + args.num_kv_heads;  // q and k; v heads are only stored
  T* const token_heads = static_cast<T*>(args.qkv) + token * args.qkv_stride;
  // Until wait_for_prior_kernels(), only host-copied metadata (the position) and constants
  // (the rotary table, the norm weights) are read (launch.cuh).
  const int32_t position = args.positions[token];
  // A kernel cannot throw: a position outside the table zeroes the heads instead of reading
  // past the table.
  const bool valid = position >= 0 && position < args.max_positions;
  const float* cos_sin = args.cos_sin + (valid ? static_cast<int64_t>(position) : 0) * kHeadDim;
  HeadNormRopeFactors<kHeadDim> q_factors, k_factors;
  if (first_head < args.num_heads) {
    q_factors.load(static_cast<const T*>(args.q_norm), cos_sin, lane);
  }
  if (first_head + heads > args.num_heads && first_head < num_rotated) {
    k_factors.load(static_cast<const T*>(args.k_norm), cos_sin, lane);
  }
  wait_for_prior_kernels();
  HeadPairs<kHeadDim> pairs[kHeadsPerWarp];
#pragma unroll
  for (int j = 0; j < kHeadsPerWarp; ++j) {
    if (j < heads) pairs[j].load(token_heads + (first_head + j) * kHeadDim, lane);
  }
#pragma unroll
  for (int j = 0; j < kHeadsPerWarp; ++j) {
    if (j >= heads) continue;
    const int h = first_head + j;
    T* const head = token_heads + h * kHeadDim;
    T* const cached = cache_head<T>(args, token, h);
    T first[kPairs], second[kPairs];
    if (h < args.num_heads) {
      normalize_rotate_pairs<T, kHeadDim>(pairs[j], q_factors, valid, args.eps, first, second);
    } else if (h < num_rotated) {
      normalize_rotate_pairs<T, kHeadDim>(pairs[j], k_factors, valid, args.eps, first, second);
    } else {
#pragma unroll
      for (int p = 0; p < kPairs; ++p) {  // exact: T -> float -> T
        first[p] = from_float<T>(pairs[j].a[p]);
        second[p] = from_float<T>(pairs[j].b[p]);
      }
    }
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      const int i = lane + 32 * p;
      if (h < num_rotated) {
        head[i] = first[p];
        head[i + kHeadDim / 2] = second[p];
      }
      if (cached != nullptr) {
        cached[i] = first[p];
        cached[i + kHeadDim / 2] = second[p];
      }
    }
  }
}

// grid (tokens, ceil(heads / kWarpsPerBlock)) with heads = q + k heads, plus the v heads when
// storing; warp w of block y takes head y * kWarpsPerBlock + w.
template <typename T>
__global__ void qk_norm_rope_kernel(const QkNormRopeArgs args) {
  // Until wait_for_prior_kernels(), only host-copied metadata (slots, positions) and constant
  // tables are read, so their latency overlaps the kernel before (launch.cuh).
  allow_next_kernel_launch();
  const int64_t token = blockIdx.x;
  const int lane = threadIdx.x % 32;
  const int h = blockIdx.y * kWarpsPerBlock + threadIdx.x / 32;
  const int num_heads = args.num_heads;
  const int num_kv_heads = args.num_kv_heads;
  const int head_dim = args.head_dim;
  if (h >= heads_per_token(args)) return;  // uniform over the warp
  const int half = head_dim / 2;
  T* head =
      static_cast<T*>(args.qkv) + token * args.qkv_stride + static_cast<int64_t>(h) * head_dim;
  T* cached = cache_head<T>(args, token, h);
  if (h >= num_heads + num_kv_heads) {  // a v head: only stored
    wait_for_prior_kernels();
    if (cached != nullptr) {
      for (int i = lane; i < head_dim; i += 32) cached[i] = head[i];
    }
    return;
  }

  const int32_t position = args.positions[token];
  // A kernel cannot throw: a position outside the table zeroes the heads instead of reading
  // past the table.
  const bool valid = position >= 0 && position < args.max_positions;
  const float* cos = args.cos_sin + (valid ? static_cast<int64_t>(position) : 0) * head_dim;
  const float* sin = cos + half;
  const T* weight = static_cast<const T*>(h < num_heads ? args.q_norm : args.k_norm);
  // The table row and the norm weight, on their way to L1 while the kernel before finishes.
  constexpr int kLineFloats = 128 / sizeof(float);
  constexpr int kLineElems = 128 / sizeof(T);
  for (int i = lane * kLineFloats; i < head_dim; i += 32 * kLineFloats) prefetch_l1(cos + i);
  if (weight != nullptr) {
    for (int i = lane * kLineElems; i < head_dim; i += 32 * kLineElems) prefetch_l1(weight + i);
  }
  wait_for_prior_kernels();

  if (weight == nullptr) {  // no q/k norm: rotary only
    for (int i = lane; i < half; i += 32) {
      T first, second;
      rotate_pair<T>(to_float(head[i]), to_float(head[i + half]), cos[i], sin[i], valid, first,
                     second);
      head[i] = first;
      head[i + half] = second;
      if (cached != nullptr) {
        cached[i] = first;
        cached[i + half] = second;
      }
    }
    return;
  }

  float sum_squares = 0.0f;
  for (int i = lane; i < half; i += 32) {
    const float a = to_float(head[i]);
    const float b = to_float(head[i + half]);
    sum_squares = add_pair_squares(sum_squares, a, b);
  }
  // The loop bounds are the same for every lane of the warp, so all 32 lanes get here.
  const float inv_rms = inverse_rms(warp_sum(sum_squares), head_dim, args.eps);

  for (int i = lane; i < half; i += 32) {
    T first, second;
    normalize_rotate_pair<T>(to_float(head[i]), to_float(head[i + half]), inv_rms,
                             to_float(weight[i]), to_float(weight[i + half]), cos[i], sin[i], valid,
                             first, second);
    head[i] = first;
    head[i + half] = second;
    if (cached != nullptr) {
      cached[i] = first;
      cached[i + half] = second;
    }
  }
}

}  // namespace

void qk_norm_rope(const QkNormRopeArgs& args, cudaStream_t stream) {
  if (args.tokens == 0) return;
  NVLLM_CHECK_LE(args.tokens, int64_t{INT32_MAX});
  NVLLM_CHECK_MSG(args.head_dim > 0 && args.head_dim % 2 == 0,
                  "qk_norm_rope: head_dim {} must be positive and even", args.head_dim);
  const int heads = heads_per_token(args);
  dispatch_float_dtype(args.dtype, "qk_norm_rope", [&](auto tag) {
    using T = decltype(tag);
    const auto launch_heads = [&](auto kernel) {
      constexpr int kHeadsPerBlock = kWarpsPerBlock * kHeadsPerWarp;
      const dim3 grid(static_cast<unsigned>(args.tokens),
                      (heads + kHeadsPerBlock - 1) / kHeadsPerBlock);
      launch_kernel(kernel, grid, kWarpsPerBlock * 32, 0, stream, args);
    };
    if (args.head_dim == 64) return launch_heads(qk_norm_rope_heads_kernel<T, 64>);
    if (args.head_dim == 128) return launch_heads(qk_norm_rope_heads_kernel<T, 128>);
    const dim3 grid(static_cast<unsigned>(args.tokens),
                    (heads + kWarpsPerBlock - 1) / kWarpsPerBlock);
    launch_kernel(qk_norm_rope_kernel<T>, grid, kWarpsPerBlock * 32, 0, stream, args);
  });
}

}  // namespace nanovllm::cuda
