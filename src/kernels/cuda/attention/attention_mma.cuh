// Device building blocks of the tensor-core attention kernels: cp.async loads of 16-key chunks
// of the paged cache into shared memory, and the q k^T and p v products over a chunk
// (device/tensor_core.cuh has the MMA and its fragment layouts).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/device/l2_hints.cuh"
#include "kernels/cuda/device/tensor_core.cuh"

namespace nanovllm::cuda::attention {

constexpr int kChunkKeys = 16;  // keys per cp.async chunk; a chunk never straddles two blocks
constexpr float kLog2e = 1.4426950408889634f;

// Shared-memory row of one key (or query): head_dim elements plus 16 bytes of padding, so the
// 8 rows one ldmatrix reads start in 8 different 16-byte bank groups (no bank conflicts).
template <int kHeadDim>
constexpr int smem_row_elems() {
  return kHeadDim + 8;
}

// One kv head of one sequence in the paged cache.
template <typename T>
struct PagedHead {
  const T* k;                  // [num_blocks, block_size, num_kv_heads, head_dim]
  const T* v;                  // same layout
  const int32_t* block_table;  // [max_blocks_per_seq] of this sequence
  int block_size;
  int64_t slot_stride;  // elements between consecutive slots: num_kv_heads * head_dim
  int64_t head_offset;  // elements to this kv head within a slot

  // Block of the chunk starting at key `first` (which must be < the context length).
  __device__ __forceinline__ int block_of(int first) const {
    return __ldg(block_table + first / block_size);
  }
};

// One warp copies the 16 keys [first, first + 16) of `head` into sk/sv [16][smem_row_elems]:
// keys at or past `valid_end` are zero-filled (their slots may hold anything, even NaN, and a
// zero V row keeps 0 * value out of the output). `block` is head.block_of(first) when
// first < valid_end, and unused otherwise. kReadOnce (decode, which reads every key once a
// step): the keys leave L2 first, so that they do not push out what the step reads again.
template <typename T, int kHeadDim, bool kReadOnce = false>
__device__ __forceinline__ void load_chunk_async(T* sk, T* sv, const PagedHead<T>& head, int block,
                                                 int first, int valid_end, int lane) {
  constexpr int kPieces = kHeadDim / 8;  // 16-byte pieces per key
  constexpr int kPerLane = kChunkKeys * kPieces / 32;
  const int64_t slot0 = static_cast<int64_t>(block) * head.block_size + first % head.block_size;
  const uint64_t policy = kReadOnce ? l2_evict_first_policy() : 0;  // once, not once a piece
#pragma unroll
  for (int j = 0; j < kPerLane; ++j) {
    const int index = lane + 32 * j;  // consecutive lanes take consecutive pieces of a key
    const int key = index / kPieces;
    const int piece = index % kPieces;
    const bool valid = first + key < valid_end;
    const int64_t offset =
        valid ? (slot0 + key) * head.slot_stride + head.head_offset + piece * 8 : 0;
    const int dst = key * smem_row_elems<kHeadDim>() + piece * 8;
    if constexpr (kReadOnce) {
      cp_async_16(sk + dst, head.k + offset, valid, policy);
      cp_async_16(sv + dst, head.v + offset, valid, policy);
    } else {
      cp_async_16(sk + dst, head.k + offset, valid);
      cp_async_16(sv + dst, head.v + offset, valid);
    }
  }
}

// Fragments of A = q [16][kHeadDim] (shared, row-major) for the kHeadDim / 16 k-steps.
template <typename T, int kHeadDim>
__device__ __forceinline__ void load_q_fragments(uint32_t (&qa)[kHeadDim / 16][4], const T* sq,
                                                 int lane) {
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    ldmatrix_x4(qa[kk], sq + (lane % 16) * smem_row_elems<kHeadDim>() + kk * 16 + (lane / 16) * 8);
  }
}

// s[2][4] += q k^T for the 16 keys sk [16][smem_row_elems]: s[0] covers keys 0..7 and s[1]
// keys 8..15, in the C layout.
template <typename T, int kHeadDim>
__device__ __forceinline__ void qk_chunk(float (&s)[2][4], const uint32_t (&qa)[kHeadDim / 16][4],
                                         const T* sk, int lane) {
  // ldmatrix matrices: (keys 0-7, dims +0), (keys 0-7, dims +8), (keys 8-15, +0), (keys 8-15, +8)
  const T* row =
      sk + ((lane / 16) * 8 + lane % 8) * smem_row_elems<kHeadDim>() + (lane / 8 % 2) * 8;
  // Odd k-steps accumulate apart: two chains of dependent MMAs a tile instead of one twice as
  // long (decode at batch 1: +0.25%).
  float odd[2][4] = {};
#pragma unroll
  for (int kk = 0; kk < kHeadDim / 16; ++kk) {
    uint32_t b[4];
    ldmatrix_x4(b, row + kk * 16);
    float(&acc)[2][4] = kk % 2 == 0 ? s : odd;
    MmaType<T>::mma(acc[0], qa[kk], b[0], b[1]);
    MmaType<T>::mma(acc[1], qa[kk], b[2], b[3]);
  }
#pragma unroll
  for (int t = 0; t < 2; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) s[t][i] += odd[t][i];
  }
}

// o[kHeadDim / 8][4] += p v for the 16 keys sv [16][smem_row_elems]; pa is P [16 rows][16 keys]
// in the A layout.
template <typename T, int kHeadDim>
__device__ __forceinline__ void pv_chunk(float (&o)[kHeadDim / 8][4], const uint32_t (&pa)[4],
                                         const T* sv, int lane) {
  // ldmatrix.trans matrices: (keys 0-7, dims +0), (keys 8-15, dims +0), (keys 0-7, dims +8),
  // (keys 8-15, dims +8); transposed they are b0, b1 of dim tile 2i and b0, b1 of tile 2i + 1.
  const T* row =
      sv + ((lane / 8 % 2) * 8 + lane % 8) * smem_row_elems<kHeadDim>() + (lane / 16) * 8;
#pragma unroll
  for (int i = 0; i < kHeadDim / 16; ++i) {
    uint32_t b[4];
    ldmatrix_x4_trans(b, row + i * 16);
    MmaType<T>::mma(o[2 * i], pa, b[0], b[1]);
    MmaType<T>::mma(o[2 * i + 1], pa, b[2], b[3]);
  }
}

// Max and sum over the 4 lanes of a quad (the lanes holding one row of a C fragment).
__device__ __forceinline__ float quad_max(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}

}  // namespace nanovllm::cuda::attention
