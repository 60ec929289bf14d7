// Per-head RMSNorm of q and k followed by neox rotary embedding, in place. One block per token,
// one warp per head at a time. Lane l owns the rotation pairs (i, i + head_dim / 2) for
// i = l, l + 32, ...; pairs rule out 16-byte vectors, but the lanes of a warp still read
// consecutive elements, so every access is coalesced.
#include "kernels/cuda/block_reduce.cuh"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/elementwise_ops.h"
#include "kernels/cuda/vec.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kWarpsPerBlock = 4;

template <typename T>
__global__ void qk_norm_rope_kernel(T* qkv, int64_t qkv_stride, int num_heads, int num_kv_heads,
                                    int head_dim, const T* q_norm, const T* k_norm,
                                    const int32_t* positions, const float* cos_sin,
                                    int64_t max_positions, float eps) {
  const int64_t token = blockIdx.x;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int half = head_dim / 2;
  const int32_t position = positions[token];
  // A kernel cannot throw: a position outside the table zeroes the heads instead of reading
  // past the table.
  const bool valid = position >= 0 && position < max_positions;
  const float* cos = cos_sin + (valid ? static_cast<int64_t>(position) : 0) * head_dim;
  const float* sin = cos + half;

  // q heads then k heads: adjacent in the row.
  for (int h = warp; h < num_heads + num_kv_heads; h += kWarpsPerBlock) {
    T* head = qkv + token * qkv_stride + static_cast<int64_t>(h) * head_dim;
    const T* weight = h < num_heads ? q_norm : k_norm;

    float sum_squares = 0.0f;
    for (int i = lane; i < half; i += 32) {
      const float a = to_float(head[i]);
      const float b = to_float(head[i + half]);
      sum_squares += a * a + b * b;
    }
    // The loop bounds are the same for every lane of the warp, so all 32 lanes get here.
    const float mean_square = warp_sum(sum_squares) / static_cast<float>(head_dim);
    const float inv_rms = 1.0f / sqrtf(mean_square + eps);

    for (int i = lane; i < half; i += 32) {
      if (!valid) {
        head[i] = from_float<T>(0.0f);
        head[i + half] = from_float<T>(0.0f);
        continue;
      }
      // HF's q_norm / k_norm output is rounded to dtype (weight * normed.to(dtype)); the
      // rotation is then done in fp32 with the fp32 table and rounded once.
      const float a = round_to<T>(round_to<T>(to_float(head[i]) * inv_rms) * to_float(weight[i]));
      const float b =
          round_to<T>(round_to<T>(to_float(head[i + half]) * inv_rms) * to_float(weight[i + half]));
      head[i] = from_float<T>(a * cos[i] - b * sin[i]);
      head[i + half] = from_float<T>(b * cos[i] + a * sin[i]);
    }
  }
}

}  // namespace

void qk_norm_rope(const QkNormRopeArgs& args, cudaStream_t stream) {
  if (args.tokens == 0) return;
  NVLLM_CHECK_LE(args.tokens, int64_t{INT32_MAX});
  NVLLM_CHECK_MSG(args.head_dim > 0 && args.head_dim % 2 == 0,
                  "qk_norm_rope: head_dim {} must be positive and even", args.head_dim);
  dispatch_float_dtype(args.dtype, "qk_norm_rope", [&](auto tag) {
    using T = decltype(tag);
    qk_norm_rope_kernel<T><<<static_cast<unsigned>(args.tokens), kWarpsPerBlock * 32, 0, stream>>>(
        static_cast<T*>(args.qkv), args.qkv_stride, args.num_heads, args.num_kv_heads,
        args.head_dim, static_cast<const T*>(args.q_norm), static_cast<const T*>(args.k_norm),
        args.positions, args.cos_sin, args.max_positions, args.eps);
    NVLLM_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace nanovllm::cuda
