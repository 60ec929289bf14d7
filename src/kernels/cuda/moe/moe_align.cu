// Groups a batch's (token, slot) pairs by expert for the grouped GEMMs, as vLLM's
// moe_align_block_size does: count the pairs of each expert, turn the counts into tile offsets
// (each expert's run padded to whole tiles), write the expert of every tile and mark the
// padding, then place each pair in its expert's run. A small batch takes one CTA; a large one
// three kernels over chunks of pairs (count each chunk, sum the counts into the map and each
// chunk's first slot of every expert, place each chunk), so that no single SM walks them all.
// The order within a run is whatever the shared-memory atomics give; the GEMMs compute every
// row on its own, so the results do not depend on it.
#include <algorithm>

#include "core/check.h"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/moe/moe_scan.cuh"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kChunkPairs = 4096;  // pairs of a chunk of the large-batch path
constexpr int kChunkThreads = 512;

__device__ __forceinline__ bool is_expert(int e, int experts) {
  return e >= 0 && e < experts;
}

// The map from each expert's count, by the whole CTA: first_tiles [experts] gets each expert's
// first tile, tile_experts and the padding of sorted_pairs are written, *num_tiles is set.
// counts and first_tiles are shared memory; warp_sums 32 ints of it.
__device__ void write_map(const int* counts, int* first_tiles, int* warp_sums, int experts,
                          int tile_rows, int32_t* sorted_pairs, int32_t* tile_experts,
                          int32_t* num_tiles) {
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  for (int e = tid; e < experts; e += threads) {
    first_tiles[e] = (counts[e] + tile_rows - 1) / tile_rows;
  }
  __syncthreads();
  const int total_tiles = moe::block_exclusive_scan(first_tiles, experts, warp_sums);
  for (int e = tid; e < experts; e += threads) {
    const int first = first_tiles[e];
    const int count = counts[e];
    const int tiles = (count + tile_rows - 1) / tile_rows;
    for (int t = 0; t < tiles; ++t) tile_experts[first + t] = e;
    const int begin = first * tile_rows;
    for (int s = begin + count; s < begin + tiles * tile_rows; ++s) sorted_pairs[s] = -1;
  }
  if (tid == 0) *num_tiles = total_tiles;
}

// Small batches: one CTA; dynamic shared memory: 3 * experts ints.
__global__ void moe_align_kernel(const int32_t* ids, int pairs, int experts, int tile_rows,
                                 int32_t* sorted_pairs, int32_t* tile_experts, int32_t* num_tiles) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  extern __shared__ int align_smem[];
  __shared__ int warp_sums[32];
  int* counts = align_smem;              // pairs of each expert
  int* first_tiles = counts + experts;   // the first tile of each expert
  int* cursors = first_tiles + experts;  // the next free slot of each expert
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);

  for (int e = tid; e < experts; e += threads) counts[e] = 0;
  __syncthreads();
  for (int p = tid; p < pairs; p += threads) {
    const int e = ids[p];
    if (is_expert(e, experts)) atomicAdd(&counts[e], 1);
  }
  __syncthreads();
  write_map(counts, first_tiles, warp_sums, experts, tile_rows, sorted_pairs, tile_experts,
            num_tiles);
  for (int e = tid; e < experts; e += threads) cursors[e] = first_tiles[e] * tile_rows;
  __syncthreads();
  for (int p = tid; p < pairs; p += threads) {
    const int e = ids[p];
    if (is_expert(e, experts)) sorted_pairs[atomicAdd(&cursors[e], 1)] = p;
  }
}

// Large batches, 1 of 3: chunk c's count of each expert into chunk_counts [chunks, experts].
// One CTA per chunk; dynamic shared memory: experts ints.
__global__ void moe_align_count_kernel(const int32_t* ids, int pairs, int experts,
                                       int32_t* chunk_counts) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  extern __shared__ int align_smem[];
  const int tid = static_cast<int>(threadIdx.x);
  for (int e = tid; e < experts; e += kChunkThreads) align_smem[e] = 0;
  __syncthreads();
  const int begin = static_cast<int>(blockIdx.x) * kChunkPairs;
  const int end = min(pairs, begin + kChunkPairs);
  for (int p = begin + tid; p < end; p += kChunkThreads) {
    const int e = ids[p];
    if (is_expert(e, experts)) atomicAdd(&align_smem[e], 1);
  }
  __syncthreads();
  int32_t* out = chunk_counts + static_cast<int64_t>(blockIdx.x) * experts;
  for (int e = tid; e < experts; e += kChunkThreads) out[e] = align_smem[e];
}

// 2 of 3, one CTA: the map from the chunks' counts summed, then chunk_counts[c, e] becomes
// chunk c's first slot of expert e. Dynamic shared memory: 2 * experts ints.
__global__ void moe_align_scan_kernel(int chunks, int experts, int tile_rows, int32_t* chunk_counts,
                                      int32_t* sorted_pairs, int32_t* tile_experts,
                                      int32_t* num_tiles) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  extern __shared__ int align_smem[];
  __shared__ int warp_sums[32];
  int* counts = align_smem;
  int* first_tiles = counts + experts;
  const int tid = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  for (int e = tid; e < experts; e += threads) {
    int sum = 0;
#pragma unroll 8
    for (int c = 0; c < chunks; ++c) sum += chunk_counts[static_cast<int64_t>(c) * experts + e];
    counts[e] = sum;
  }
  __syncthreads();
  write_map(counts, first_tiles, warp_sums, experts, tile_rows, sorted_pairs, tile_experts,
            num_tiles);
  for (int e = tid; e < experts; e += threads) {
    int slot = first_tiles[e] * tile_rows;
    for (int c = 0; c < chunks; ++c) {
      int32_t* count = chunk_counts + static_cast<int64_t>(c) * experts + e;
      const int n = *count;
      *count = slot;
      slot += n;
    }
  }
}

// 3 of 3: chunk c's pairs into their slots. One CTA per chunk; dynamic shared memory: experts
// ints.
__global__ void moe_align_place_kernel(const int32_t* ids, int pairs, int experts,
                                       const int32_t* chunk_counts, int32_t* sorted_pairs) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  extern __shared__ int align_smem[];
  const int tid = static_cast<int>(threadIdx.x);
  const int32_t* first = chunk_counts + static_cast<int64_t>(blockIdx.x) * experts;
  for (int e = tid; e < experts; e += kChunkThreads) align_smem[e] = first[e];
  __syncthreads();
  const int begin = static_cast<int>(blockIdx.x) * kChunkPairs;
  const int end = min(pairs, begin + kChunkPairs);
  for (int p = begin + tid; p < end; p += kChunkThreads) {
    const int e = ids[p];
    if (is_expert(e, experts)) sorted_pairs[atomicAdd(&align_smem[e], 1)] = p;
  }
}

int64_t chunks_of(int64_t pairs) {
  return (pairs + kChunkPairs - 1) / kChunkPairs;
}

}  // namespace

int moe_tile_rows(MoeTiles tiles) {
  switch (tiles) {
    case MoeTiles::kDecode:
      return 16;
    case MoeTiles::kDecodeWide:
      return 32;
    case MoeTiles::kPrefill:
      break;
  }
  return 128;
}

int64_t moe_max_tiles(int64_t pairs, int64_t experts, int tile_rows) {
  // Each expert in use pads its run by less than one tile.
  return (pairs + tile_rows - 1) / tile_rows + std::min(pairs, experts);
}

int64_t moe_align_scratch_ints(int64_t pairs, int64_t experts) {
  return pairs > 2 * kChunkPairs ? chunks_of(pairs) * experts : 0;
}

void moe_align(const int32_t* ids, int64_t pairs, int64_t experts, const MoeTileMap& map,
               cudaStream_t stream) {
  NVLLM_CHECK_MSG(map.sorted_pairs != nullptr && map.tile_experts != nullptr &&
                      map.num_tiles != nullptr && map.tile_rows > 0,
                  "moe_align: no map to write");
  NVLLM_CHECK_MSG(experts >= 1 && experts <= kMoeMaxExperts,
                  "moe_align: {} experts, expected 1 to {}", experts, kMoeMaxExperts);
  NVLLM_CHECK_LE(pairs, int64_t{INT32_MAX} / 4);
  NVLLM_CHECK_MSG(map.max_tiles >= moe_max_tiles(pairs, experts, map.tile_rows),
                  "moe_align: room for {} tiles, {} pairs may need {}", map.max_tiles, pairs,
                  moe_max_tiles(pairs, experts, map.tile_rows));
  const size_t expert_ints = static_cast<size_t>(experts) * sizeof(int);
  if (moe_align_scratch_ints(pairs, experts) == 0) {
    // Small batches: fewer threads, so that the barriers cost less.
    const int threads = pairs <= 512 ? 256 : 1024;
    launch_kernel(moe_align_kernel, 1, threads, 3 * expert_ints, stream, ids,
                  static_cast<int>(pairs), static_cast<int>(experts), map.tile_rows,
                  map.sorted_pairs, map.tile_experts, map.num_tiles);
    return;
  }
  NVLLM_CHECK_MSG(map.align_scratch != nullptr, "moe_align: no scratch for {} pairs", pairs);
  const auto chunks = static_cast<unsigned>(chunks_of(pairs));
  launch_kernel(moe_align_count_kernel, chunks, kChunkThreads, expert_ints, stream, ids,
                static_cast<int>(pairs), static_cast<int>(experts), map.align_scratch);
  launch_kernel(moe_align_scan_kernel, 1, 1024, 2 * expert_ints, stream, static_cast<int>(chunks),
                static_cast<int>(experts), map.tile_rows, map.align_scratch, map.sorted_pairs,
                map.tile_experts, map.num_tiles);
  launch_kernel(moe_align_place_kernel, chunks, kChunkThreads, expert_ints, stream, ids,
                static_cast<int>(pairs), static_cast<int>(experts), map.align_scratch,
                map.sorted_pairs);
}

}  // namespace nanovllm::cuda
