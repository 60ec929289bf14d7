// Writes each token's k and v heads into its paged-cache slot: one block per token.
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

template <typename T, int kWidth>
__global__ void store_kv_kernel(const T* qkv, int64_t qkv_stride, int64_t q_size, int64_t kv_size,
                                const int32_t* slot_mapping, int64_t num_slots, T* k_cache,
                                T* v_cache) {
  start_after_prior_kernels();
  const int64_t token = blockIdx.x;
  const int32_t slot = slot_mapping[token];
  // -1 marks a token whose KV is not stored; a kernel cannot throw, so a slot past the cache
  // is skipped too rather than written out of bounds. The whole block returns together.
  if (slot < 0 || slot >= num_slots) return;
  const T* k = qkv + token * qkv_stride + q_size;  // [num_kv_heads * head_dim]
  const T* v = k + kv_size;                        // [num_kv_heads * head_dim]
  // Slot s of a [num_blocks, block_size, num_kv_heads, head_dim] cache starts at s * kv_size.
  T* k_dst = k_cache + static_cast<int64_t>(slot) * kv_size;
  T* v_dst = v_cache + static_cast<int64_t>(slot) * kv_size;
  for (int64_t i = static_cast<int64_t>(threadIdx.x) * kWidth; i < kv_size;
       i += static_cast<int64_t>(blockDim.x) * kWidth) {
    copy_elements<T, kWidth>(k + i, k_dst + i);
    copy_elements<T, kWidth>(v + i, v_dst + i);
  }
}

}  // namespace

void store_kv(const StoreKvArgs& args, cudaStream_t stream) {
  const int64_t q_size = static_cast<int64_t>(args.num_heads) * args.head_dim;
  const int64_t kv_size = static_cast<int64_t>(args.num_kv_heads) * args.head_dim;
  if (args.tokens == 0 || kv_size == 0) return;
  NVLLM_CHECK_LE(args.tokens, int64_t{INT32_MAX});
  dispatch_float_dtype(args.dtype, "store_kv", [&](auto tag) {
    using T = decltype(tag);
    const T* qkv = static_cast<const T*>(args.qkv);
    T* k_cache = static_cast<T*>(args.k_cache);
    T* v_cache = static_cast<T*>(args.v_cache);
    const auto grid = static_cast<unsigned>(args.tokens);
    if (vectorizable<T>({args.qkv, args.k_cache, args.v_cache},
                        {args.qkv_stride, q_size, kv_size})) {
      constexpr int kWidth = kVecWidth<T>;
      launch_kernel(store_kv_kernel<T, kWidth>, grid, threads_for(kv_size / kWidth), 0, stream, qkv,
                    args.qkv_stride, q_size, kv_size, args.slot_mapping, args.num_slots, k_cache,
                    v_cache);
    } else {
      launch_kernel(store_kv_kernel<T, 1>, grid, threads_for(kv_size), 0, stream, qkv,
                    args.qkv_stride, q_size, kv_size, args.slot_mapping, args.num_slots, k_cache,
                    v_cache);
    }
  });
}

}  // namespace nanovllm::cuda
