// The router of a mixture-of-experts MLP: per row of logits, the softmax in f32 and the top_k
// experts. One warp per row keeps the row's probabilities in shared memory and picks the experts
// one after the other, each the most likely of those after the one before in the order
// (probability descending, id ascending), so that ties go to the lower id as on the CPU.
#include <algorithm>
#include <climits>

#include "kernels/cuda/device/block_reduce.cuh"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

constexpr size_t kRouteSmemBytes = size_t{48} << 10;

// Whether (p, id) comes before (best_p, best_id): more likely, or as likely with a lower id.
__device__ __forceinline__ bool ranks_before(float p, int id, float best_p, int best_id) {
  return p > best_p || (p == best_p && id < best_id);
}

// grid: one warp per row, blockDim.x / 32 rows a CTA; dynamic shared memory: experts floats
// per warp.
template <typename T>
__global__ void moe_route_kernel(const T* logits, int64_t logits_stride, int rows, int experts,
                                 int top_k, bool normalize, float* weights, int32_t* ids) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  extern __shared__ float route_smem[];
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int row = static_cast<int>(blockIdx.x) * static_cast<int>(blockDim.x / 32) + warp;
  if (row >= rows) return;
  float* probs = route_smem + static_cast<int64_t>(warp) * experts;
  const T* src = logits + static_cast<int64_t>(row) * logits_stride;

  float max = -INFINITY;
  for (int e = lane; e < experts; e += 32) {
    const float v = to_float(src[e]);
    probs[e] = v;
    max = fmaxf(max, v);
  }
  max = warp_max(max);
  float sum = 0.0f;
  for (int e = lane; e < experts; e += 32) {
    const float v = expf(probs[e] - max);
    probs[e] = v;
    sum += v;
  }
  sum = warp_sum(sum);
  // As the CPU divides: each probability is exp / sum.
  for (int e = lane; e < experts; e += 32) probs[e] = probs[e] / sum;
  __syncwarp();

  float* row_weights = weights + static_cast<int64_t>(row) * top_k;
  int32_t* row_ids = ids + static_cast<int64_t>(row) * top_k;
  float prev_p = INFINITY;
  int prev_id = -1;
  float chosen = 0.0f;  // the sum of the picks' probabilities, in pick order on every lane
  bool exhausted = false;
  for (int j = 0; j < top_k; ++j) {
    float best_p = -INFINITY;
    int best_id = INT_MAX;
    if (!exhausted) {
      for (int e = lane; e < experts; e += 32) {
        const float p = probs[e];
        // After the previous pick in the order, and before the best so far (NaN never is).
        if (ranks_before(prev_p, prev_id, p, e) && ranks_before(p, e, best_p, best_id)) {
          best_p = p;
          best_id = e;
        }
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        const float other_p = __shfl_xor_sync(0xffffffffu, best_p, offset);
        const int other_id = __shfl_xor_sync(0xffffffffu, best_id, offset);
        if (ranks_before(other_p, other_id, best_p, best_id)) {
          best_p = other_p;
          best_id = other_id;
        }
      }
    }
    if (best_id == INT_MAX) {  // nothing left: NaN probabilities
      exhausted = true;
      best_id = -1;
      best_p = 0.0f;
    } else {
      chosen += best_p;
      prev_p = best_p;
      prev_id = best_id;
    }
    // Lane j % 32 keeps pick j (and rescales it below: its own writes, no barrier needed).
    if (lane == j % 32) {
      row_ids[j] = best_id;
      row_weights[j] = best_p;
    }
  }
  for (int j = lane; j < top_k; j += 32) {
    const float p = row_weights[j];
    row_weights[j] = row_ids[j] < 0 ? 0.0f : round_to<T>(normalize ? p / chosen : p);
  }
}

}  // namespace

void moe_route(const MoeRouteArgs& args, cudaStream_t stream) {
  NVLLM_CHECK_MSG(args.experts >= 1 && args.experts <= kMoeRouteMaxExperts,
                  "moe_route: {} experts, expected 1 to {}", args.experts, kMoeRouteMaxExperts);
  NVLLM_CHECK_MSG(args.top_k >= 1 && args.top_k <= args.experts,
                  "moe_route: top_k {} outside [1, {}]", args.top_k, args.experts);
  NVLLM_CHECK_LE(args.rows, int64_t{INT32_MAX});
  if (args.rows == 0) return;
  const size_t row_bytes = static_cast<size_t>(args.experts) * sizeof(float);
  const int warps = static_cast<int>(std::min<size_t>(4, kRouteSmemBytes / row_bytes));
  const auto grid = static_cast<unsigned>((args.rows + warps - 1) / warps);
  dispatch_float_dtype(args.dtype, "moe_route", [&](auto tag) {
    using T = decltype(tag);
    launch_kernel(moe_route_kernel<T>, grid, warps * 32, row_bytes * warps, stream,
                  static_cast<const T*>(args.logits), args.logits_stride,
                  static_cast<int>(args.rows), static_cast<int>(args.experts), args.top_k,
                  args.normalize, args.weights, args.ids);
  });
}

}  // namespace nanovllm::cuda
