// bf16/f16 prefill attention over the paged cache, FlashAttention-2 style on tensor cores:
// a CTA takes 64 query rows of one head of one sequence (16 per warp), streams 64-key tiles of
// K and V through a cp.async double buffer (warp w fetches the tile's 16-key chunk w through
// the block table), and keeps S = q k^T, the online softmax and O = P v in registers.
// Query row i of a sequence with q_len rows sits at position context - q_len + i and sees keys
// [0, position]: the prefix already in the cache (prefix-cache hits, earlier chunks of a
// chunked prefill) and the causal part of this step's tokens.
#include <cmath>

#include "core/check.h"
#include "kernels/cuda/attention/attention_launch.cuh"
#include "kernels/cuda/attention/attention_mma.cuh"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda::attention {
namespace {

constexpr int kPrefillWarps = 4;
constexpr int kBlockM = 16 * kPrefillWarps;          // query rows per CTA
constexpr int kBlockN = kChunkKeys * kPrefillWarps;  // keys per tile: one chunk per warp
constexpr int kTileChunks = kBlockN / kChunkKeys;

template <int kHeadDim>
struct PrefillLayout {
  static constexpr int kStages = kHeadDim == 128 ? 2 : 3;  // key tiles in flight
  static constexpr int kRow = smem_row_elems<kHeadDim>();
  static constexpr int kTileElems = kBlockN * kRow;   // K or V of one tile
  static constexpr int kStageElems = 2 * kTileElems;  // K, then V
  static constexpr int kQElems = kBlockM * kRow;

  template <typename T>
  static constexpr size_t smem_bytes() {
    return static_cast<size_t>(kQElems + kStages * kStageElems) * sizeof(T);
  }
};

// grid (ceil(max_seqlen_q / kBlockM), num_heads, num_seqs), block kPrefillWarps warps.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kPrefillWarps * 32)
    attention_prefill_kernel(const PagedAttentionArgs args) {
  start_after_prior_kernels();
  using Layout = PrefillLayout<kHeadDim>;
  extern __shared__ __align__(128) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);  // [kBlockM][kRow]
  T* ring = sq + Layout::kQElems;      // [kStages][K, V][kBlockN][kRow]

  // The tiles at the end of a sequence see the most keys: launch them first.
  const int m_tile = gridDim.x - 1 - blockIdx.x;
  const int q_head = blockIdx.y;
  const int seq = blockIdx.z;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int q_begin = args.cu_seqlens_q[seq];
  const int q_len = args.cu_seqlens_q[seq + 1] - q_begin;
  const int row0 = m_tile * kBlockM;
  if (row0 >= q_len) return;  // uniform over the CTA
  const int context = args.context_lens[seq];
  const int first_position = context - q_len;  // of query row 0
  const int rows = min(kBlockM, q_len - row0);
  const int key_end = first_position + row0 + rows;  // the last row sees keys [0, key_end)
  const int num_tiles = (key_end + kBlockN - 1) / kBlockN;
  const int kv_head = q_head / (args.num_heads / args.num_kv_heads);

  const PagedHead<T> head{static_cast<const T*>(args.k_cache),
                          static_cast<const T*>(args.v_cache),
                          args.block_tables + static_cast<int64_t>(seq) * args.block_table_stride,
                          args.block_size,
                          static_cast<int64_t>(args.num_kv_heads) * kHeadDim,
                          static_cast<int64_t>(kv_head) * kHeadDim};
  // Warp w fetches chunk w of tile t; keys past the context are zero-filled.
  const auto load = [&](int t) {
    T* sk = ring + (t % Layout::kStages) * Layout::kStageElems + warp * kChunkKeys * Layout::kRow;
    const int first = t * kBlockN + warp * kChunkKeys;
    const int block = first < context ? head.block_of(first) : 0;
    load_chunk_async<T, kHeadDim>(sk, sk + Layout::kTileElems, head, block, first, context, lane);
  };
#pragma unroll
  for (int t = 0; t < Layout::kStages - 1; ++t) {
    if (t < num_tiles) load(t);
    cp_async_commit();
  }

  // q tile, while the first tiles are in flight: rows past the sequence are zero (their
  // results are never written).
  constexpr int kPieces = kHeadDim / 8;
  const T* q_src = static_cast<const T*>(args.qkv) +
                   static_cast<int64_t>(q_begin + row0) * args.qkv_row_stride +
                   static_cast<int64_t>(q_head) * kHeadDim;
  for (int i = threadIdx.x; i < kBlockM * kPieces; i += blockDim.x) {
    const int r = i / kPieces;
    const int piece = i % kPieces;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < rows) {
      value = *reinterpret_cast<const uint4*>(
          q_src + static_cast<int64_t>(r) * args.qkv_row_stride + piece * 8);
    }
    *reinterpret_cast<uint4*>(sq + r * Layout::kRow + piece * 8) = value;
  }
  __syncthreads();
  uint32_t qa[kHeadDim / 16][4];
  load_q_fragments<T, kHeadDim>(qa, sq + warp * 16 * Layout::kRow, lane);

  // This lane's rows a = lane / 4 and b = a + 8 of the warp's 16.
  const int warp_first_position = first_position + row0 + warp * 16;
  const int position_a = warp_first_position + lane / 4;
  const int position_b = position_a + 8;
  float o[kHeadDim / 8][4];
#pragma unroll
  for (int i = 0; i < kHeadDim / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float max_a = -INFINITY;  // scaled log2-domain scores
  float max_b = -INFINITY;
  float sum_a = 0.0f;  // this lane's columns; summed over the quad at the end
  float sum_b = 0.0f;
  const float scale_log2 = args.scale * kLog2e;

  for (int t = 0; t < num_tiles; ++t) {
    cp_async_wait<Layout::kStages - 2>();  // tile t has landed (this thread's copies)
    __syncthreads();  // ... and everyone's; everyone is done with tile t - 1's slot
    if (t + Layout::kStages - 1 < num_tiles) load(t + Layout::kStages - 1);
    cp_async_commit();

    const int key_base = t * kBlockN;
    if (key_base > warp_first_position + 15) continue;  // every key is after every row

    const T* sk = ring + (t % Layout::kStages) * Layout::kStageElems;
    const T* sv = sk + Layout::kTileElems;
    float s[kTileChunks][2][4] = {};
#pragma unroll
    for (int c = 0; c < kTileChunks; ++c) {
      qk_chunk<T, kHeadDim>(s[c], qa, sk + c * kChunkKeys * Layout::kRow, lane);
    }

    // Scale, then mask keys after each row's position (tiles crossing the diagonal only).
    const bool needs_mask = key_base + kBlockN - 1 > warp_first_position;
    float tile_max_a = -INFINITY;
    float tile_max_b = -INFINITY;
#pragma unroll
    for (int c = 0; c < kTileChunks; ++c) {
#pragma unroll
      for (int n = 0; n < 2; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int key = key_base + c * kChunkKeys + n * 8 + (lane % 4) * 2 + e % 2;
          const int position = e < 2 ? position_a : position_b;
          float x = s[c][n][e] * scale_log2;
          if (needs_mask && key > position) x = -INFINITY;
          s[c][n][e] = x;
        }
        tile_max_a = fmaxf(tile_max_a, fmaxf(s[c][n][0], s[c][n][1]));
        tile_max_b = fmaxf(tile_max_b, fmaxf(s[c][n][2], s[c][n][3]));
      }
    }
    const float new_max_a = fmaxf(max_a, quad_max(tile_max_a));
    const float new_max_b = fmaxf(max_b, quad_max(tile_max_b));
    const float base_a = new_max_a == -INFINITY ? 0.0f : new_max_a;
    const float base_b = new_max_b == -INFINITY ? 0.0f : new_max_b;
    const float correction_a = exp2f(max_a - base_a);  // 0 while nothing has been seen
    const float correction_b = exp2f(max_b - base_b);
    max_a = new_max_a;
    max_b = new_max_b;
    float tile_sum_a = 0.0f;
    float tile_sum_b = 0.0f;
#pragma unroll
    for (int c = 0; c < kTileChunks; ++c) {
#pragma unroll
      for (int n = 0; n < 2; ++n) {
        s[c][n][0] = exp2f(s[c][n][0] - base_a);
        s[c][n][1] = exp2f(s[c][n][1] - base_a);
        s[c][n][2] = exp2f(s[c][n][2] - base_b);
        s[c][n][3] = exp2f(s[c][n][3] - base_b);
        tile_sum_a += s[c][n][0] + s[c][n][1];
        tile_sum_b += s[c][n][2] + s[c][n][3];
      }
    }
    sum_a = sum_a * correction_a + tile_sum_a;
    sum_b = sum_b * correction_b + tile_sum_b;
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      o[d][0] *= correction_a;
      o[d][1] *= correction_a;
      o[d][2] *= correction_b;
      o[d][3] *= correction_b;
    }
#pragma unroll
    for (int c = 0; c < kTileChunks; ++c) {
      // P of chunk c in the A layout: keys 0..7 are C tile 0, keys 8..15 C tile 1.
      const uint32_t pa[4] = {
          MmaType<T>::pack(s[c][0][0], s[c][0][1]), MmaType<T>::pack(s[c][0][2], s[c][0][3]),
          MmaType<T>::pack(s[c][1][0], s[c][1][1]), MmaType<T>::pack(s[c][1][2], s[c][1][3])};
      pv_chunk<T, kHeadDim>(o, pa, sv + c * kChunkKeys * Layout::kRow, lane);
    }
  }
  cp_async_wait<0>();

  sum_a = quad_sum(sum_a);
  sum_b = quad_sum(sum_b);
  const float inv_a = sum_a > 0.0f ? 1.0f / sum_a : 0.0f;
  const float inv_b = sum_b > 0.0f ? 1.0f / sum_b : 0.0f;
  const int row_a = row0 + warp * 16 + lane / 4;
  const int row_b = row_a + 8;
  T* out = static_cast<T*>(args.out) + static_cast<int64_t>(q_head) * kHeadDim + (lane % 4) * 2;
  T* out_a = out + static_cast<int64_t>(q_begin + row_a) * args.out_row_stride;
  T* out_b = out + static_cast<int64_t>(q_begin + row_b) * args.out_row_stride;
#pragma unroll
  for (int d = 0; d < kHeadDim / 8; ++d) {
    if (row_a < q_len) {
      *reinterpret_cast<uint32_t*>(out_a + d * 8) =
          MmaType<T>::pack(o[d][0] * inv_a, o[d][1] * inv_a);
    }
    if (row_b < q_len) {
      *reinterpret_cast<uint32_t*>(out_b + d * 8) =
          MmaType<T>::pack(o[d][2] * inv_b, o[d][3] * inv_b);
    }
  }
}

template <typename T, int kHeadDim>
void launch_typed(const PagedAttentionArgs& args, cudaStream_t stream) {
  const auto kernel = attention_prefill_kernel<T, kHeadDim>;
  const size_t smem = PrefillLayout<kHeadDim>::template smem_bytes<T>();
  NVLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const dim3 grid((args.max_seqlen_q + kBlockM - 1) / kBlockM, args.num_heads, args.num_seqs);
  launch_kernel(kernel, grid, kPrefillWarps * 32, smem, stream, args);
}

template <typename T>
void launch_head_dim(const PagedAttentionArgs& args, cudaStream_t stream) {
  switch (args.head_dim) {
    case 64:
      return launch_typed<T, 64>(args, stream);
    case 128:
      return launch_typed<T, 128>(args, stream);
    default:
      NVLLM_CHECK_MSG(false, "prefill attention: unsupported head_dim {}", args.head_dim);
  }
}

}  // namespace

void launch_attention_prefill(const PagedAttentionArgs& args, cudaStream_t stream) {
  switch (args.dtype) {
    case DType::kBF16:
      return launch_head_dim<__nv_bfloat16>(args, stream);
    case DType::kF16:
      return launch_head_dim<__half>(args, stream);
    default:
      NVLLM_CHECK_MSG(false, "prefill attention: unsupported dtype {}", dtype_name(args.dtype));
  }
}

}  // namespace nanovllm::cuda::attention
