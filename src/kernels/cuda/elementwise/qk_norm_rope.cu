// Per-head RMSNorm of q and k followed by neox rotary embedding, in place, optionally storing
// k and v into the paged cache in the same pass. One warp per (token, head), so even a single
// decode token spreads over many warps. Lane l owns the rotation pairs (i, i + head_dim / 2) for
// i = l, l + 32, ...; pairs rule out 16-byte vectors, but the lanes of a warp still read
// consecutive elements, so every access is coalesced.
#include "kernels/cuda/device/block_reduce.cuh"
#include "kernels/cuda/device/elementwise_math.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

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
  const bool store = args.k_cache != nullptr;
  if (h >= num_heads + (store ? 2 : 1) * num_kv_heads) return;  // uniform over the warp
  const int half = head_dim / 2;
  T* head =
      static_cast<T*>(args.qkv) + token * args.qkv_stride + static_cast<int64_t>(h) * head_dim;

  // Where this token's k or v head goes in the cache, or null.
  T* cached = nullptr;
  if (store && h >= num_heads) {
    const int32_t slot = args.slot_mapping[token];
    if (slot >= 0 && slot < args.num_slots) {
      const bool is_v = h >= num_heads + num_kv_heads;
      const int kv_head = (h - num_heads) % num_kv_heads;
      cached = static_cast<T*>(is_v ? args.v_cache : args.k_cache) +
               (static_cast<int64_t>(slot) * num_kv_heads + kv_head) * head_dim;
    }
  }
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
  const int heads = args.num_heads + (args.k_cache != nullptr ? 2 : 1) * args.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(args.tokens),
                  (heads + kWarpsPerBlock - 1) / kWarpsPerBlock);
  dispatch_float_dtype(args.dtype, "qk_norm_rope", [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(qk_norm_rope_kernel<T>, grid, kWarpsPerBlock * 32, 0, stream, args);
  });
}

}  // namespace nanovllm::cuda
