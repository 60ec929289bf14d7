// The attention phase of the fused decode kernel (fused_decode.h): decode attention over the
// paged cache with the q/k norm, rotary and the KV store done on the fly, as
// qk_norm_rope_attention() does at decode, spread over the grid's CTAs.
//
// A work item is (row, kv head, split): a CTA takes up to kKeysPerSplit keys of the row, a
// 16-key chunk per warp. Registers only: lane l holds 8 dims of one key, so a warp-wide
// 16-byte load covers 2 keys at head_dim 128. The warp issues its first chunk's loads before
// waiting for this step's q/k/v (they are earlier steps' keys), so their latency hides behind
// that wait. The CTA then normalizes and rotates the group's query heads (and makes this
// step's key where it falls in its split), the warps' partial softmaxes meet in shared
// memory, and the result goes out as tagged words (fused_decode_sync.cuh): the output itself
// for a row of one split; otherwise a partial with its softmax statistics, which split 0's
// CTA merges with the others' into the output.
#pragma once

#include <cstdint>

#include "kernels/cuda/attention_mma.cuh"
#include "kernels/cuda/fused_decode.h"
#include "kernels/cuda/fused_decode_sync.cuh"
#include "kernels/cuda/head_norm_rope.cuh"

namespace nanovllm::cuda::fused {

using attention::kChunkKeys;  // keys per chunk; block sizes are multiples of it
using attention::kLog2e;
constexpr int kMaxGroup = 8;      // query heads per kv head
constexpr int kHeadsPerPass = 2;  // query heads one pass over the keys serves
constexpr int kKeysPerSplit = kConsumerWarps * kChunkKeys;  // a split per this many keys
// Splits of one (row, kv head), times its query heads, at most (what split 0 stages).
constexpr int kMaxSplitHeads = 32;

// This layer's tagged words (fused_decode_sync.cuh) the phase reads and writes.
struct AttentionWords {
  const uint64_t* qkv;  // [rows, (heads + 2 kv_heads) * head_dim / 2]: pairs of T
  uint64_t* out;        // [rows, heads * head_dim / 2]: pairs of T
  uint64_t* partial;    // [rows, kv_heads, splits, group, head_dim]: f32, normalized
  uint64_t* stats;      // [rows, kv_heads, splits, group, 2]: f32 log2 max (-inf: no keys), sum
  uint32_t tag;
};

// The most splits of a (row, kv head) a launch provides for: enough items to give every CTA
// one, within what split 0 can stage to merge.
__host__ __device__ inline int attention_max_splits(int rows, int kv_heads, int group,
                                                    int num_ctas) {
  const int splits = num_ctas / (rows * kv_heads);
  const int most = kMaxSplitHeads / group;
  return splits < 1 ? 1 : splits > most ? most : splits;
}

// Shared memory of the phase, carved out of `base` (it reuses the GEMV input area).
template <typename T, int kHeadDim>
struct AttentionShared {
  float* q;             // [group][kHeadDim]: normalized, rotated, rounded to T
  float* merge_out;     // [kConsumerWarps][group][kHeadDim]
  float2* merge_stats;  // [kConsumerWarps][group]
  float* split_out;     // [max_splits][group][kHeadDim]: split 0's staging of every partial
  float* split_stats;   // [max_splits][group][2]
  T* raw;               // [group + 2][kHeadDim]: the row's raw q heads, k head, v head
  T* new_key;           // [2][kHeadDim]: this step's k (normalized, rotated) and v

  __host__ __device__ static size_t bytes(int group, int max_splits) {
    return sizeof(float) * (1 + kConsumerWarps + max_splits) * group * kHeadDim +
           sizeof(float2) * (kConsumerWarps + max_splits) * group +
           sizeof(T) * (group + 4) * kHeadDim;
  }
  __device__ AttentionShared(unsigned char* base, int group, int max_splits) {
    q = reinterpret_cast<float*>(base);
    merge_out = q + group * kHeadDim;
    merge_stats = reinterpret_cast<float2*>(merge_out + kConsumerWarps * group * kHeadDim);
    split_out = reinterpret_cast<float*>(merge_stats + kConsumerWarps * group);
    split_stats = split_out + max_splits * group * kHeadDim;
    raw = reinterpret_cast<T*>(split_stats + max_splits * group * 2);
    new_key = raw + (group + 2) * kHeadDim;
  }
};

// One work item: the 16-key chunks [chunk_begin, chunk_end) of its row it takes (none past
// the row's splits) and whether it makes this step's key (position context - 1; without a
// slot to store it in, the cache is read as it is).
struct AttentionItem {
  int row, kv_head, split;
  int splits;  // of the row; split >= splits: nothing to do
  int context;
  int chunk_begin, chunk_end;
  bool makes_new_key;

  __device__ AttentionItem(const FusedDecodeArgs& args, int item, int max_splits) {
    const int kv_heads = args.shape.num_kv_heads;
    split = item % max_splits;
    kv_head = (item / max_splits) % kv_heads;
    row = item / (max_splits * kv_heads);
    context = args.context_lens[row];
    splits = min(max((context + kKeysPerSplit - 1) / kKeysPerSplit, 1), max_splits);
    const int num_chunks = (context + kChunkKeys - 1) / kChunkKeys;
    const int per_split = (num_chunks + splits - 1) / splits;
    chunk_begin = min(split * per_split, num_chunks);
    chunk_end = split < splits ? min(chunk_begin + per_split, num_chunks) : chunk_begin;
    const int new_chunk = (context - 1) / kChunkKeys;
    const int slot = args.slot_mapping[row];
    makes_new_key = context > 0 && new_chunk >= chunk_begin && new_chunk < chunk_end && slot >= 0 &&
                    slot < args.num_slots;
  }
};

// Softmax state of one query head over some keys: log2-domain max, sum of exponentials and
// the unnormalized output (8 dims per lane).
struct SoftmaxState {
  float max;
  float sum;
  float out[8];
};

// Folds `other` into `state` (either may have seen no key: max -inf, sum 0).
__device__ __forceinline__ void merge_softmax(SoftmaxState& state, const SoftmaxState& other) {
  const float new_max = fmaxf(state.max, other.max);
  if (new_max == -INFINITY) return;
  const float a = exp2f(state.max - new_max);
  const float b = exp2f(other.max - new_max);
  state.sum = state.sum * a + other.sum * b;
#pragma unroll
  for (int d = 0; d < 8; ++d) state.out[d] = state.out[d] * a + other.out[d] * b;
  state.max = new_max;
}

// A chunk of one (row, kv head)'s keys as one lane holds them: 8 dims (`piece`) of key
// lane / kPieces of each of kLoads loads.
template <typename T, int kHeadDim>
struct KeyChunk {
  static constexpr int kPieces = kHeadDim / 8;  // 16-byte pieces of a head
  static constexpr int kKeysPerLoad = 32 / kPieces;
  static constexpr int kLoads = kChunkKeys / kKeysPerLoad;

  uint4 k[kLoads];
  uint4 v[kLoads];
  int first;  // key

  __device__ __forceinline__ static int key(int first, int i, int lane) {
    return first + i * kKeysPerLoad + lane / kPieces;
  }
  // Keys past the context read as zeros (their slots may hold anything). k_cache and v_cache
  // point at the kv head and the lane's piece.
  __device__ __forceinline__ void load(int first_key, const T* k_cache, const T* v_cache,
                                       const int32_t* block_table, int block_size,
                                       int64_t slot_stride, int context, int lane) {
    first = first_key;
    const int block = __ldg(block_table + first / block_size);
    const int64_t first_slot = int64_t{block} * block_size + first % block_size;
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int at = key(first, i, lane);
      if (at >= context) {
        k[i] = v[i] = make_uint4(0, 0, 0, 0);
      } else {
        const int64_t offset = (first_slot + at - first) * slot_stride;
        k[i] = load_l2(k_cache + offset);
        v[i] = load_l2(v_cache + offset);
      }
    }
  }
  // This step's key (key context - 1), made after the chunk was read: new_key is shared
  // [2][kHeadDim].
  __device__ __forceinline__ void put_new_key(const T* new_key, int context, int lane) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      if (key(first, i, lane) != context - 1) continue;
      k[i] = *reinterpret_cast<const uint4*>(new_key + lane % kPieces * 8);
      v[i] = *reinterpret_cast<const uint4*>(new_key + kHeadDim + lane % kPieces * 8);
    }
  }
};

// Online softmax of `count` (<= kHeadsPerPass) heads of q over one chunk: every score first
// (independent dot products and lane reductions), then one update per head.
template <typename T, int kHeadDim>
__device__ __forceinline__ void attend_chunk(SoftmaxState (&state)[kHeadsPerPass],
                                             const KeyChunk<T, kHeadDim>& chunk, const float* q,
                                             int count, int context, float scale_log2, int lane) {
  using Chunk = KeyChunk<T, kHeadDim>;
  constexpr int kLoads = Chunk::kLoads;
  const int piece = lane % Chunk::kPieces;
  float score[kLoads][kHeadsPerPass];
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    float kf[8];
    unpack8<T>(chunk.k[i], kf);
#pragma unroll
    for (int j = 0; j < kHeadsPerPass; ++j) {
      const float4 qa = *reinterpret_cast<const float4*>(q + j * kHeadDim + piece * 8);
      const float4 qb = *reinterpret_cast<const float4*>(q + j * kHeadDim + piece * 8 + 4);
      const float qf[8] = {qa.x, qa.y, qa.z, qa.w, qb.x, qb.y, qb.z, qb.w};
      score[i][j] = dot8(qf, kf);
    }
  }
#pragma unroll
  for (int offset = Chunk::kPieces / 2; offset > 0; offset /= 2) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
#pragma unroll
      for (int j = 0; j < kHeadsPerPass; ++j) {
        score[i][j] += __shfl_xor_sync(0xffffffffu, score[i][j], offset);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < kLoads; ++i) {
    const bool valid = Chunk::key(chunk.first, i, lane) < context;
#pragma unroll
    for (int j = 0; j < kHeadsPerPass; ++j) {
      score[i][j] = valid ? score[i][j] * scale_log2 : -INFINITY;
    }
  }
#pragma unroll
  for (int j = 0; j < kHeadsPerPass; ++j) {
    if (j >= count) break;
    float chunk_max = score[0][j];
#pragma unroll
    for (int i = 1; i < kLoads; ++i) chunk_max = fmaxf(chunk_max, score[i][j]);
    const float new_max = fmaxf(state[j].max, chunk_max);
    if (new_max == -INFINITY) continue;  // no valid key yet
    const float correction = exp2f(state[j].max - new_max);
    state[j].sum *= correction;
#pragma unroll
    for (int d = 0; d < 8; ++d) state[j].out[d] *= correction;
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const float weight = exp2f(score[i][j] - new_max);  // 0 for keys past the context
      float vf[8];
      unpack8<T>(chunk.v[i], vf);
      state[j].sum += weight;
#pragma unroll
      for (int d = 0; d < 8; ++d) state[j].out[d] = fmaf(weight, vf[d], state[j].out[d]);
    }
    state[j].max = new_max;
  }
}

// The output of `outputs` dims from softmax pieces (max, sum, normalized-or-not output) of
// `pieces` sources: store(e, value of e, value of e + 1) per pair of dims. stats(s, j) gives
// source s's (max, sum) for head j, out(s, e) its output e, divided by its sum unless
// `normalized`. Called by all consumer threads.
template <typename Stats, typename Out, typename Store>
__device__ __forceinline__ void merge_pieces(int pieces, int outputs, int head_dim, bool normalized,
                                             Stats&& stats, Out&& out, Store&& store) {
  for (int e = 2 * static_cast<int>(threadIdx.x); e < outputs; e += 2 * kConsumerThreads) {
    const int j = e / head_dim;
    float max = -INFINITY;
    for (int s = 0; s < pieces; ++s) max = fmaxf(max, stats(s, j).x);
    float sum = 0.0f, acc0 = 0.0f, acc1 = 0.0f;
    if (max != -INFINITY) {
      for (int s = 0; s < pieces; ++s) {
        const float2 piece = stats(s, j);
        if (piece.x == -INFINITY) continue;  // no keys there
        const float f = exp2f(piece.x - max) * (normalized ? piece.y : 1.0f);
        sum += normalized ? f : piece.y * f;
        acc0 += out(s, e) * f;
        acc1 += out(s, e + 1) * f;
      }
    }
    // No keys at all (padding rows): zeros.
    store(e, sum > 0.0f ? acc0 / sum : 0.0f, sum > 0.0f ? acc1 / sum : 0.0f,
          make_float2(sum > 0.0f ? max : -INFINITY, sum));
  }
}

// Runs every work item of this CTA for one layer. Called by all consumer threads.
template <typename T, int kHeadDim>
__device__ void attention_phase(const FusedDecodeArgs& args, const FusedDecodeLayer& layer,
                                const AttentionWords& words, int max_splits,
                                unsigned char* shared_base, const PhaseClock& clock) {
  using Chunk = KeyChunk<T, kHeadDim>;
  constexpr int kPieces = Chunk::kPieces;
  constexpr int kPairs = kHeadDim / 64;
  constexpr int kHalf = kHeadDim / 2;
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int piece = lane % kPieces;
  const int heads = args.shape.num_heads;
  const int kv_heads = args.shape.num_kv_heads;
  const int group = heads / kv_heads;
  const int outputs = group * kHeadDim;
  const int64_t qkv_width = static_cast<int64_t>(heads + 2 * kv_heads) * kHeadDim;
  const int64_t slot_stride = static_cast<int64_t>(kv_heads) * kHeadDim;
  const float scale_log2 = args.scale * kLog2e;
  AttentionShared<T, kHeadDim> shared(shared_base, group, max_splits);

  const int items = args.shape.rows * kv_heads * max_splits;
  for (int index = static_cast<int>(blockIdx.x); index < items;
       index += static_cast<int>(gridDim.x)) {
    const AttentionItem item(args, index, max_splits);
    if (item.split >= item.splits) continue;
    const int row = item.row;
    const int kv_head = item.kv_head;
    const int context = item.context;

    // This warp's first chunk, before this step's q/k/v.
    const int first_chunk = item.chunk_begin + warp;
    const T* k_cache = static_cast<const T*>(layer.k_cache) + kv_head * kHeadDim + piece * 8;
    const T* v_cache = static_cast<const T*>(layer.v_cache) + kv_head * kHeadDim + piece * 8;
    const int32_t* block_table = args.block_tables + int64_t{row} * args.block_table_stride;
    Chunk chunk;
    if (first_chunk < item.chunk_end) {
      chunk.load(first_chunk * kChunkKeys, k_cache, v_cache, block_table, args.shape.block_size,
                 slot_stride, context, lane);
    }

    // The raw heads: q heads of the group, then (for the new key) k and v.
    const uint64_t* qkv_row = words.qkv + row * qkv_width / 2;
    const int raw_heads = group + (item.makes_new_key ? 2 : 0);
    auto* raw = reinterpret_cast<uint32_t*>(shared.raw);  // pairs
    take_tagged(
        raw_heads * kHeadDim / 2, words.tag,
        [&](int i) {
          const int r = i / (kHeadDim / 2);
          const int column = r < group    ? (kv_head * group + r) * kHeadDim
                             : r == group ? (heads + kv_head) * kHeadDim
                                          : (heads + kv_heads + kv_head) * kHeadDim;
          return qkv_row + (column + i % (kHeadDim / 2) * 2) / 2;
        },
        [&](int i, uint32_t pair) { raw[i] = pair; });
    consumer_sync();
    const int position = args.positions[row];
    const bool position_valid = position >= 0 && position < args.max_positions;
    const float* cos = args.cos_sin + (position_valid ? int64_t{position} * kHeadDim : 0);
    for (int task = warp; task < group + (item.makes_new_key ? 1 : 0); task += kConsumerWarps) {
      const bool is_key = task == group;
      T first[kPairs], second[kPairs];
      normalize_rotate_head<T, kHeadDim>(
          shared.raw + task * kHeadDim, static_cast<const T*>(is_key ? layer.k_norm : layer.q_norm),
          cos, position_valid, args.eps, lane, first, second);
#pragma unroll
      for (int p = 0; p < kPairs; ++p) {
        const int i = lane + 32 * p;
        if (!is_key) {
          shared.q[task * kHeadDim + i] = to_float(first[p]);
          shared.q[task * kHeadDim + i + kHalf] = to_float(second[p]);
          continue;
        }
        const T* v = shared.raw + (group + 1) * kHeadDim;
        shared.new_key[i] = first[p];
        shared.new_key[i + kHalf] = second[p];
        shared.new_key[kHeadDim + i] = v[i];
        shared.new_key[kHeadDim + i + kHalf] = v[i + kHalf];
        const int64_t offset = args.slot_mapping[row] * slot_stride + kv_head * kHeadDim;
        T* k_out = static_cast<T*>(layer.k_cache) + offset;
        T* v_out = static_cast<T*>(layer.v_cache) + offset;
        k_out[i] = first[p];
        k_out[i + kHalf] = second[p];
        v_out[i] = v[i];
        v_out[i + kHalf] = v[i + kHalf];
      }
    }
    consumer_sync();
    clock.stamp(kAttnQuery);

    // The group's heads kHeadsPerPass at a time: the first pass uses the chunk already read,
    // every other chunk (and a later pass) reads its keys (again, from L2).
    for (int pass_head = 0; pass_head < group; pass_head += kHeadsPerPass) {
      SoftmaxState state[kHeadsPerPass];
#pragma unroll
      for (int j = 0; j < kHeadsPerPass; ++j) {
        state[j].max = -INFINITY;
        state[j].sum = 0.0f;
#pragma unroll
        for (int d = 0; d < 8; ++d) state[j].out[d] = 0.0f;
      }
      const int count = min(kHeadsPerPass, group - pass_head);
      for (int c = first_chunk; c < item.chunk_end; c += kConsumerWarps) {
        if (c != first_chunk || pass_head != 0) {
          chunk.load(c * kChunkKeys, k_cache, v_cache, block_table, args.shape.block_size,
                     slot_stride, context, lane);
        }
        if (item.makes_new_key) chunk.put_new_key(shared.new_key, context, lane);
        attend_chunk<T, kHeadDim>(state, chunk, shared.q + pass_head * kHeadDim, count, context,
                                  scale_log2, lane);
      }

      // Lanes holding other keys of the same dims; then the warps meet in shared memory.
#pragma unroll
      for (int j = 0; j < kHeadsPerPass; ++j) {
        if (j >= count) break;
#pragma unroll
        for (int offset = kPieces; offset < 32; offset *= 2) {
          SoftmaxState other;
          other.max = __shfl_xor_sync(0xffffffffu, state[j].max, offset);
          other.sum = __shfl_xor_sync(0xffffffffu, state[j].sum, offset);
#pragma unroll
          for (int d = 0; d < 8; ++d) {
            other.out[d] = __shfl_xor_sync(0xffffffffu, state[j].out[d], offset);
          }
          merge_softmax(state[j], other);
        }
        const int head = pass_head + j;
        if (lane < kPieces) {
          float* out = shared.merge_out + (warp * group + head) * kHeadDim + piece * 8;
          *reinterpret_cast<float4*>(out) =
              make_float4(state[j].out[0], state[j].out[1], state[j].out[2], state[j].out[3]);
          *reinterpret_cast<float4*>(out + 4) =
              make_float4(state[j].out[4], state[j].out[5], state[j].out[6], state[j].out[7]);
        }
        if (lane == 0) {
          shared.merge_stats[warp * group + head] = make_float2(state[j].max, state[j].sum);
        }
      }
    }
    consumer_sync();

    // The warps' pieces merged: the output itself for a row of one split, else a partial.
    const int64_t pair = int64_t{row} * kv_heads + kv_head;
    uint64_t* out = words.out + (row * int64_t{heads} * kHeadDim + kv_head * outputs) / 2;
    uint64_t* partial = words.partial + (pair * max_splits + item.split) * outputs;
    uint64_t* partial_stats = words.stats + (pair * max_splits + item.split) * group * 2;
    merge_pieces(
        kConsumerWarps, outputs, kHeadDim, false,
        [&](int w, int j) { return shared.merge_stats[w * group + j]; },
        [&](int w, int e) {
          return shared.merge_out[(w * group + e / kHeadDim) * kHeadDim + e % kHeadDim];
        },
        [&](int e, float value0, float value1, float2 stats) {
          if (item.splits == 1) {
            store_tagged(out + e / 2, pack_pair(value0, value1, T{}), words.tag);
            return;
          }
          store_tagged(partial + e, __float_as_uint(value0), words.tag);
          store_tagged(partial + e + 1, __float_as_uint(value1), words.tag);
          if (e % kHeadDim == 0) {
            store_tagged(partial_stats + e / kHeadDim * 2, __float_as_uint(stats.x), words.tag);
            store_tagged(partial_stats + e / kHeadDim * 2 + 1, __float_as_uint(stats.y), words.tag);
          }
        });

    // Split 0 merges every split's partial (its own too) into the output.
    if (item.splits > 1 && item.split == 0) {
      const uint64_t* partials = words.partial + pair * max_splits * outputs;
      const uint64_t* stats = words.stats + pair * max_splits * group * 2;
      take_tagged(
          item.splits * outputs, words.tag, [&](int i) { return partials + i; },
          [&](int i, uint32_t value) { shared.split_out[i] = __uint_as_float(value); });
      take_tagged(
          item.splits * group * 2, words.tag, [&](int i) { return stats + i; },
          [&](int i, uint32_t value) { shared.split_stats[i] = __uint_as_float(value); });
      consumer_sync();
      merge_pieces(
          item.splits, outputs, kHeadDim, true,
          [&](int s, int j) {
            return make_float2(shared.split_stats[(s * group + j) * 2],
                               shared.split_stats[(s * group + j) * 2 + 1]);
          },
          [&](int s, int e) { return shared.split_out[s * outputs + e]; },
          [&](int e, float value0, float value1, float2) {
            store_tagged(out + e / 2, pack_pair(value0, value1, T{}), words.tag);
          });
    }
    consumer_sync();  // shared memory is reused by the next item
  }
}

}  // namespace nanovllm::cuda::fused
