// bf16/f16 decode attention (one query row per sequence) over the paged cache, built to stream
// K and V at memory bandwidth:
// - one CTA serves the `group` query heads of one kv head (packed as rows of a 16-row MMA tile,
//   the rest zero), so every K/V byte is read once;
// - each of its 4 warps streams its own 16-key chunks through a private cp.async ring of
//   kStages chunks (no CTA-wide barrier in the loop), with an online softmax in registers;
// - with args.qk_norm_rope set, q and this step's k arrive raw: the CTA normalizes and rotates
//   its query heads itself, and the warp that owns this step's key stores it to the cache and
//   into its staged chunk, so no separate qk_norm_rope kernel (and its round trip) runs first;
// - split-KV: blockIdx.x picks a slice of the keys when there are too few (seq, kv head) pairs
//   to fill the GPU; the splits of a (sequence, kv head) run as one thread block cluster: each
//   pushes its partial into the shared memory of the cluster's first CTA, which merges them by
//   log-sum-exp once its mbarrier has counted them all in (no second kernel, no round trip
//   through global memory, no cluster-wide barrier after the loop).
// The launch depends only on num_seqs, the geometry and max_seqlen_k (a bound on the contexts,
// which tunes the split); context lengths are read in-kernel, so a captured launch can be
// replayed for any lengths.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "kernels/cuda/attention/attention_launch.cuh"
#include "kernels/cuda/attention/attention_mma.cuh"
#include "kernels/cuda/device/head_norm_rope.cuh"
#include "kernels/cuda/device/mbarrier.cuh"
#include "kernels/cuda/runtime/launch.cuh"
#include "kernels/cuda/runtime/sm_residency.h"

namespace nanovllm::cuda::attention {
namespace {

constexpr int kDecodeWarps = 4;
// A split takes at least this many 16-key chunks (one per warp), so a short context uses a
// few splits instead of a sliver of keys on every one of them.
constexpr int kMinChunksPerSplit = kDecodeWarps;

// Chunks per split for a context of num_chunks chunks: the decode kernel and the merge agree
// on it, and it depends on the context, not on the launch.
__device__ __forceinline__ int chunks_per_split(int num_chunks, int num_splits) {
  return max((num_chunks + num_splits - 1) / num_splits, kMinChunksPerSplit);
}
constexpr int kMaxGroup = 8;   // query heads per kv head: rows 0..7 of the MMA tile
constexpr int kMaxSplits = 8;  // the portable thread block cluster size
// Contexts up to this many keys count as short for the split-KV factor (decode_num_splits).
constexpr int kShortContext = 4096;

template <int kHeadDim>
struct DecodeLayout {
  // Chunks in each warp's ring. For head_dim 128, 2 rather than 3: 79 instead of 113 KB of
  // shared memory, so that at small batches more CTAs find room beside the kernels before
  // them early and send their chunks sooner (batch-1 +0.5%, the bench workload +0.2%, large
  // batches alike; 1 stage: batch-1 -4%).
  static constexpr int kStages = kHeadDim == 128 ? 2 : 5;
  static constexpr int kRow = smem_row_elems<kHeadDim>();
  static constexpr int kChunkElems = kChunkKeys * kRow;  // K or V of one chunk
  static constexpr int kStageElems = 2 * kChunkElems;    // K, then V
  static constexpr int kWarpElems = kStages * kStageElems;
  static constexpr int kQElems = 16 * kRow;
  // This step's k (normed, rotated) and v head, made by one warp for the warp whose chunk
  // holds that key: [K, V][kHeadDim].
  static constexpr int kNewKeyElems = 2 * kHeadDim;
  // After the loop the ring is reused for the cross-warp merge: per warp and row (of 8) the
  // unnormalized output [kHeadDim], then the row maxima and sums.
  static constexpr int kMergeFloats = kDecodeWarps * kMaxGroup * (kHeadDim + 2);

  template <typename T>
  static constexpr size_t ring_bytes() {
    return static_cast<size_t>(kQElems + kNewKeyElems + kDecodeWarps * kWarpElems) * sizeof(T);
  }
  // With splits, past the ring: the inbox where every split's partial lands in the first CTA
  // of the cluster, its normalized outputs [num_splits][group][kHeadDim] and (max, sum)
  // [num_splits][group], then the mbarrier counting them in.
  static constexpr size_t inbox_bytes(int group, int num_splits) {
    return static_cast<size_t>(num_splits) * group * (kHeadDim + 2) * sizeof(float);
  }
  template <typename T>
  static constexpr size_t smem_bytes(int group, int num_splits) {
    return ring_bytes<T>() +
           (num_splits > 1 ? inbox_bytes(group, num_splits) + sizeof(uint64_t) : 0);
  }
};

// grid (num_splits, num_kv_heads, num_seqs) in clusters of (num_splits, 1, 1), block
// kDecodeWarps warps.
template <typename T, int kHeadDim>
__global__ void __launch_bounds__(kDecodeWarps * 32)
    attention_decode_kernel(const PagedAttentionArgs args, const int num_splits) {
  NVLLM_TIMELINE_SCOPE();
  allow_next_kernel_launch();
  using Layout = DecodeLayout<kHeadDim>;
  static_assert(
      Layout::kMergeFloats * sizeof(float) <= kDecodeWarps * Layout::kWarpElems * sizeof(T),
      "the merge area must fit in the pipeline ring");
  extern __shared__ __align__(128) unsigned char smem[];
  T* sq = reinterpret_cast<T*>(smem);        // [16][kRow]
  T* new_key = sq + Layout::kQElems;         // [K, V][kHeadDim]
  T* ring = new_key + Layout::kNewKeyElems;  // [kDecodeWarps][kStages][K, V][16][kRow]
  const int group = args.num_heads / args.num_kv_heads;
  float* inbox_out = reinterpret_cast<float*>(smem + Layout::template ring_bytes<T>());
  float2* inbox_stats = reinterpret_cast<float2*>(inbox_out + num_splits * group * kHeadDim);
  uint64_t* inbox_full = reinterpret_cast<uint64_t*>(inbox_stats + num_splits * group);

  const int split = blockIdx.x;  // = the rank in the cluster
  const int kv_head = blockIdx.y;
  // CTAs are dispatched in blockIdx order: z follows the sequence order asked for, if any.
  const int seq = args.seq_order != nullptr ? args.seq_order[blockIdx.z] : blockIdx.z;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  // Until wait_for_prior_kernels() this reads only what host copies wrote before the step (the
  // metadata) and keys that earlier steps stored: the kernel before this one stores only this
  // step's keys, positions [context - q_len, context). The block-table reads and the first old
  // chunks' copies so overlap that kernel (launch.cuh). CTAs that start late, as the kernel
  // before ends, wait for these reads before their copies go out, so they are made in one round
  // trip: a decode row is one query row a sequence, so the fused q/k norm's position and cache
  // slot are read at row `seq` before cu_seqlens_q says where the row is (and again where it
  // is elsewhere), and each lane reads one of the sequence's first 32 block-table entries.
  const QkNormRopeArgs& fused = args.qk_norm_rope;
  const bool fuse_qk_norm = fused.qkv != nullptr;
  const int guessed_row = seq < args.num_tokens ? seq : 0;
  int32_t position = fuse_qk_norm ? fused.positions[guessed_row] : 0;
  int32_t new_key_slot = fuse_qk_norm ? fused.slot_mapping[guessed_row] : -1;
  const int32_t* block_table =
      args.block_tables + static_cast<int64_t>(seq) * args.block_table_stride;
  const int32_t lane_block = lane < args.block_table_stride ? __ldg(block_table + lane) : 0;
  const int q_row = args.cu_seqlens_q[seq];
  const int q_len = args.cu_seqlens_q[seq + 1] - q_row;
  const int context = args.context_lens[seq];
  if (q_len == 0) return;  // no query row (uniform over the cluster)
  if (fuse_qk_norm && q_row != guessed_row) {
    position = fused.positions[q_row];
    new_key_slot = fused.slot_mapping[q_row];
  }
  // With splits, the first CTA's inbox counts the other splits' partials in; the cluster
  // barrier (arrived at here, waited for before the first push) orders its set-up before them.
  if (num_splits > 1) {
    if (split == 0 && threadIdx.x == 0) {
      mbarrier_init(inbox_full, 1);
      fence_mbarrier_init();
      mbarrier_arrive_expect_bytes(
          inbox_full, static_cast<uint32_t>(Layout::inbox_bytes(group, num_splits - 1)));
    }
    cluster_arrive();
  }

  // This split's chunks [chunk_begin, chunk_end); warp w takes chunk_begin + w + 4 i.
  const int num_chunks = (context + kChunkKeys - 1) / kChunkKeys;
  const int per_split = chunks_per_split(num_chunks, num_splits);
  const int chunk_begin = min(split * per_split, num_chunks);
  const int chunk_end = min(chunk_begin + per_split, num_chunks);
  const int first_chunk = chunk_begin + warp;
  const int my_chunks =
      first_chunk < chunk_end ? (chunk_end - first_chunk + kDecodeWarps - 1) / kDecodeWarps : 0;

  const PagedHead<T> head{static_cast<const T*>(args.k_cache),
                          static_cast<const T*>(args.v_cache),
                          block_table,
                          args.block_size,
                          static_cast<int64_t>(args.num_kv_heads) * kHeadDim,
                          static_cast<int64_t>(kv_head) * kHeadDim};
  T* my_ring = ring + warp * Layout::kWarpElems;
  const auto first_key = [&](int i) { return (first_chunk + i * kDecodeWarps) * kChunkKeys; };
  // Block of the warp's chunk i (warp-uniform calls: every lane takes part in the shuffle).
  const auto block_of = [&](int i) {
    if (i >= my_chunks) return 0;
    const int entry = first_key(i) / args.block_size;
    const int cached = __shfl_sync(0xffffffffu, lane_block, entry % 32);
    return entry < 32 ? cached : head.block_of(first_key(i));
  };
  const auto load = [&](int i, int block) {
    T* sk = my_ring + (i % Layout::kStages) * Layout::kStageElems;
    load_chunk_async<T, kHeadDim, true>(sk, sk + Layout::kChunkElems, head, block, first_key(i),
                                        context, lane);
  };

  // The first chunks' block ids are fetched together, before any copy is issued; later ones
  // one iteration ahead of their copies, to hide the latency of the block-table read.
  int first_blocks[Layout::kStages];
#pragma unroll
  for (int i = 0; i < Layout::kStages; ++i) first_blocks[i] = block_of(i);
  // One commit group per chunk slot, empty past the end, so wait_group counts stay exact: the
  // ring's first kStages chunks, then one chunk each iteration. The chunks before this step's
  // keys go out first (positions rise with i), the rest after the wait, except with the fused
  // q/k norm at one query row: this kernel makes that row's key itself and patches it into the
  // staged chunk, so every chunk may go out first.
  const bool new_key_made_here = fuse_qk_norm && q_len == 1;
  const auto before_new_keys = [&](int i) {
    return new_key_made_here || first_key(i) + kChunkKeys <= context - q_len;
  };
  int issued = 0;  // slots committed before the wait
#pragma unroll
  for (int i = 0; i < Layout::kStages; ++i) {
    if (issued == i && i < my_chunks && before_new_keys(i)) {
      load(i, first_blocks[i]);
      cp_async_commit();
      issued = i + 1;
    }
  }
  int next_block = block_of(Layout::kStages);

  // The fused q/k norm's weights and rotary factors are constants and metadata: read before
  // the wait too, so that after it only the raw heads are read.
  constexpr int kPairs = kHeadDim / 64;  // rotation pairs per lane
  const bool position_valid = position >= 0 && position < fused.max_positions;
  const float* cos =
      fused.cos_sin + (fuse_qk_norm && position_valid ? int64_t{position} * kHeadDim : 0);
  // Fused, this step's key is made in the split whose chunks hold it, by the first warp
  // without a query head, so that it works beside the warps normalizing those. Without a slot
  // to store it to, the cache is read as it is, as it would be after qk_norm_rope skipped the
  // store.
  const int new_chunk = (context - 1) / kChunkKeys;
  const bool new_key_here = fuse_qk_norm && context > 0 && new_key_slot >= 0 &&
                            new_key_slot < fused.num_slots && new_chunk >= chunk_begin &&
                            new_chunk < chunk_end;
  const bool makes_new_key = new_key_here && warp == group % kDecodeWarps;
  HeadNormRopeFactors<kHeadDim> q_factors, k_factors;
  if (fuse_qk_norm) {
    if (warp < group) q_factors.load(static_cast<const T*>(fused.q_norm), cos, lane);
    if (makes_new_key) k_factors.load(static_cast<const T*>(fused.k_norm), cos, lane);
  }
  wait_for_prior_kernels();
#pragma unroll
  for (int i = 0; i < Layout::kStages; ++i) {
    if (i < issued) continue;
    if (i < my_chunks) load(i, first_blocks[i]);
    cp_async_commit();
  }

  // q tile, while the first chunks are in flight: row g < group is query head
  // kv_head * group + g of the row; the rest are zero.
  constexpr int kPieces = kHeadDim / 8;
  constexpr int kHalf = kHeadDim / 2;
  const T* qkv_row =
      static_cast<const T*>(args.qkv) + static_cast<int64_t>(q_row) * args.qkv_row_stride;
  const T* q_src = qkv_row + static_cast<int64_t>(kv_head) * group * kHeadDim;
  // Rows the q heads do not fill are zero; raw heads are copied, or normalized and rotated by
  // warp r % kDecodeWarps when fused.
  const int copied_rows = fuse_qk_norm ? 0 : group;
  for (int i = threadIdx.x; i < 16 * kPieces; i += blockDim.x) {
    const int r = i / kPieces;
    const int piece = i % kPieces;
    if (fuse_qk_norm && r < group) continue;
    uint4 value = make_uint4(0, 0, 0, 0);
    if (r < copied_rows) value = *reinterpret_cast<const uint4*>(q_src + r * kHeadDim + piece * 8);
    *reinterpret_cast<uint4*>(sq + r * Layout::kRow + piece * 8) = value;
  }
  if (fuse_qk_norm) {
    for (int r = warp; r < group; r += kDecodeWarps) {
      T first[kPairs], second[kPairs];
      normalize_rotate_head<T, kHeadDim>(q_src + r * kHeadDim, q_factors, position_valid, fused.eps,
                                         lane, first, second);
#pragma unroll
      for (int p = 0; p < kPairs; ++p) {
        sq[r * Layout::kRow + lane + 32 * p] = first[p];
        sq[r * Layout::kRow + lane + 32 * p + kHalf] = second[p];
      }
    }
  }

  // This step's key (position context - 1) is made from the raw k head and stored with the v
  // head to the cache and to new_key, from which the warp whose chunk holds it patches it into
  // its staged copy once that lands (the copy may predate the store).
  if (makes_new_key) {
    const T* k_src = qkv_row + static_cast<int64_t>(args.num_heads + kv_head) * kHeadDim;
    const T* v_src =
        qkv_row + static_cast<int64_t>(args.num_heads + args.num_kv_heads + kv_head) * kHeadDim;
    T k_first[kPairs], k_second[kPairs];
    normalize_rotate_head<T, kHeadDim>(k_src, k_factors, position_valid, fused.eps, lane, k_first,
                                       k_second);
    const int64_t offset =
        (static_cast<int64_t>(new_key_slot) * args.num_kv_heads + kv_head) * kHeadDim;
    T* k_cache = static_cast<T*>(fused.k_cache) + offset;
    T* v_cache = static_cast<T*>(fused.v_cache) + offset;
#pragma unroll
    for (int p = 0; p < kPairs; ++p) {
      const int i = lane + 32 * p;
      const T v_first = v_src[i];
      const T v_second = v_src[i + kHalf];
      k_cache[i] = new_key[i] = k_first[p];
      k_cache[i + kHalf] = new_key[i + kHalf] = k_second[p];
      v_cache[i] = new_key[kHeadDim + i] = v_first;
      v_cache[i + kHalf] = new_key[kHeadDim + i + kHalf] = v_second;
    }
  }
  // The iteration of this warp's loop whose chunk holds this step's key; -1: none does.
  const int new_key_iteration = new_key_here && (new_chunk - chunk_begin) % kDecodeWarps == warp
                                    ? (new_chunk - chunk_begin) / kDecodeWarps
                                    : -1;
  const int new_key_row = (context - 1) % kChunkKeys;
  NVLLM_TIMELINE_MARK(0);  // q (and this step's k) normalized and rotated
  __syncthreads();
  uint32_t qa[kHeadDim / 16][4];
  load_q_fragments<T, kHeadDim>(qa, sq, lane);

  // Row lane / 4 of the tile (query head kv_head * group + lane / 4 when below group); rows
  // 8..15 are padding, kept at P = 0.
  float o[kHeadDim / 8][4];
#pragma unroll
  for (int i = 0; i < kHeadDim / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
  float row_max = -INFINITY;  // of scaled log2-domain scores
  float row_sum = 0.0f;       // of this lane's columns; summed over the quad at the end
  const float scale_log2 = args.scale * kLog2e;

  for (int i = 0; i < my_chunks; ++i) {
    cp_async_wait<Layout::kStages - 1>();  // chunk i has landed (this lane's copies)
    __syncwarp();                          // ... and every lane's
    if (i == 0) NVLLM_TIMELINE_MARK(3);    // the first chunk landed
    T* sk = my_ring + (i % Layout::kStages) * Layout::kStageElems;
    if (i == new_key_iteration) {
      T* k_row = sk + new_key_row * Layout::kRow;
#pragma unroll
      for (int p = 0; p < kPairs; ++p) {
        const int d = lane + 32 * p;
        k_row[d] = new_key[d];
        k_row[d + kHalf] = new_key[d + kHalf];
        k_row[Layout::kChunkElems + d] = new_key[kHeadDim + d];
        k_row[Layout::kChunkElems + d + kHalf] = new_key[kHeadDim + d + kHalf];
      }
      __syncwarp();
    }

    float s[2][4] = {};
    qk_chunk<T, kHeadDim>(s, qa, sk, lane);

    // This lane's keys: key0, key0 + 1 (tile 0) and key0 + 8, key0 + 9 (tile 1).
    const int key0 = first_key(i) + (lane % 4) * 2;
    float x[4] = {s[0][0], s[0][1], s[1][0], s[1][1]};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      x[e] = key0 + (e / 2) * 8 + e % 2 < context ? x[e] * scale_log2 : -INFINITY;
    }
    const float chunk_max = quad_max(fmaxf(fmaxf(x[0], x[1]), fmaxf(x[2], x[3])));
    const float new_max = fmaxf(row_max, chunk_max);
    const float base = new_max == -INFINITY ? 0.0f : new_max;
    const float correction = exp2f(row_max - base);  // 0 while nothing has been seen
    float p[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) p[e] = exp2f(x[e] - base);
    row_sum = row_sum * correction + (p[0] + p[1]) + (p[2] + p[3]);
    row_max = new_max;
#pragma unroll
    for (int d = 0; d < kHeadDim / 8; ++d) {
      o[d][0] *= correction;
      o[d][1] *= correction;
    }
    const uint32_t pa[4] = {MmaType<T>::pack(p[0], p[1]), 0u, MmaType<T>::pack(p[2], p[3]), 0u};
    pv_chunk<T, kHeadDim>(o, pa, sk + Layout::kChunkElems, lane);

    // Every lane is done with chunk i's slot: chunk i + kStages takes it.
    __syncwarp();
    const int block = next_block;
    next_block = block_of(i + Layout::kStages + 1);
    if (i + Layout::kStages < my_chunks) load(i + Layout::kStages, block);
    cp_async_commit();
  }
  cp_async_wait<0>();
  row_sum = quad_sum(row_sum);
  NVLLM_TIMELINE_MARK(1);  // this warp's chunks done

  // Merge the 4 warps' partial softmaxes (rows 0..7) through shared memory.
  __syncthreads();                                    // every warp is done with its ring
  float* merge_out = reinterpret_cast<float*>(ring);  // [4][8][kHeadDim]
  float* merge_max = merge_out + kDecodeWarps * kMaxGroup * kHeadDim;  // [4][8]
  float* merge_sum = merge_max + kDecodeWarps * kMaxGroup;             // [4][8]
  const int row = warp * kMaxGroup + lane / 4;
#pragma unroll
  for (int d = 0; d < kHeadDim / 8; ++d) {
    const int column = d * 8 + (lane % 4) * 2;
    merge_out[row * kHeadDim + column] = o[d][0];
    merge_out[row * kHeadDim + column + 1] = o[d][1];
  }
  if (lane % 4 == 0) {
    merge_max[row] = row_max;
    merge_sum[row] = row_sum;
  }
  __syncthreads();

  for (int e = threadIdx.x; e < group * kHeadDim; e += blockDim.x) {
    const int g = e / kHeadDim;
    const int d = e % kHeadDim;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) m = fmaxf(m, merge_max[w * kMaxGroup + g]);
    float sum = 0.0f;
    float acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) {
      const float warp_max = merge_max[w * kMaxGroup + g];
      if (warp_max == -INFINITY) continue;  // a warp without keys
      const float f = exp2f(warp_max - m);
      sum += merge_sum[w * kMaxGroup + g] * f;
      acc += merge_out[(w * kMaxGroup + g) * kHeadDim + d] * f;
    }
    const float value = sum > 0.0f ? acc / sum : 0.0f;  // no keys (context 0): zeros
    if (num_splits == 1) {
      T* out = static_cast<T*>(args.out) + static_cast<int64_t>(q_row) * args.out_row_stride +
               static_cast<int64_t>(kv_head * group + g) * kHeadDim;
      out[d] = MmaType<T>::from_float(value);
      continue;
    }
    // This split's partial goes to its slot of the first CTA's inbox.
    float* slot_out = inbox_out + (split * group + g) * kHeadDim + d;
    const float2 stats = make_float2(sum > 0.0f ? m : -INFINITY, sum);
    float2* slot_stats = inbox_stats + split * group + g;
    if (split == 0) {
      *slot_out = value;
      if (d == 0) *slot_stats = stats;
    } else {
      if (e < blockDim.x) cluster_wait();  // the inbox is set up (first pass of the loop)
      const uint32_t barrier = cluster_address(inbox_full, 0);
      push_to_rank(cluster_address(slot_out, 0), value, barrier);
      if (d == 0) push_to_rank(cluster_address(slot_stats, 0), stats, barrier);
    }
  }
  if (num_splits == 1) return;
  if (split != 0) {
    // Threads without an output of their own (more threads than outputs) still wait, so that
    // every thread of the cluster waits once for its arrival.
    if (threadIdx.x >= group * kHeadDim) cluster_wait();
    return;  // the pushes land by themselves; nothing here is read by another CTA
  }

  // The first CTA: once every split's partial has landed, merge them into the output.
  cluster_wait();
  __syncthreads();  // this CTA's own partial is written
  mbarrier_wait(inbox_full, 0);
  NVLLM_TIMELINE_MARK(2);  // every split's partial landed
  for (int e = threadIdx.x; e < group * kHeadDim; e += blockDim.x) {
    const int g = e / kHeadDim;
    // Every split's values are read at once (unrolled over kMaxSplits), not one after another.
    float2 stats[kMaxSplits];
    float value[kMaxSplits];
    float m = -INFINITY;
#pragma unroll
    for (int r = 0; r < kMaxSplits; ++r) {
      const bool here = r < num_splits;
      stats[r] = here ? inbox_stats[r * group + g] : make_float2(-INFINITY, 0.0f);
      value[r] = here ? inbox_out[(r * group + g) * kHeadDim + e % kHeadDim] : 0.0f;
      m = fmaxf(m, stats[r].x);
    }
    float sum = 0.0f;
    float acc = 0.0f;
#pragma unroll
    for (int r = 0; r < kMaxSplits; ++r) {
      if (stats[r].x == -INFINITY) continue;  // a split without keys (or past num_splits)
      const float weight = exp2f(stats[r].x - m) * stats[r].y;
      sum += weight;
      acc += weight * value[r];
    }
    T* out = static_cast<T*>(args.out) + static_cast<int64_t>(q_row) * args.out_row_stride +
             static_cast<int64_t>(kv_head * group + g) * kHeadDim;
    out[e % kHeadDim] = MmaType<T>::from_float(sum > 0.0f ? acc / sum : 0.0f);
  }
}

template <typename T, int kHeadDim>
void launch_typed(const PagedAttentionArgs& args, int num_splits, cudaStream_t stream) {
  const auto kernel = attention_decode_kernel<T, kHeadDim>;
  const int group = args.num_heads / args.num_kv_heads;
  // Split (small batches), a CTA asks for half an SM's shared memory: the other kernels' CTAs,
  // launched early, then stream their weights in on other SMs than two of these (batch-1 +0.5%).
  const size_t needed = DecodeLayout<kHeadDim>::template smem_bytes<T>(group, num_splits);
  const size_t smem = num_splits > 1 ? half_sm_shared_memory(needed) : needed;
  // The largest any launch asks for, so that the attribute is the same whatever the order.
  const size_t most =
      half_sm_shared_memory(DecodeLayout<kHeadDim>::template smem_bytes<T>(kMaxGroup, kMaxSplits));
  NVLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, most));
  const dim3 grid(num_splits, args.num_kv_heads, args.num_seqs);
  launch_kernel_in_clusters(dim3(num_splits), kernel, grid, kDecodeWarps * 32, smem, stream, args,
                            num_splits);
}

template <typename T>
void launch_head_dim(const PagedAttentionArgs& args, int num_splits, cudaStream_t stream) {
  switch (args.head_dim) {
    case 64:
      return launch_typed<T, 64>(args, num_splits, stream);
    case 128:
      return launch_typed<T, 128>(args, num_splits, stream);
    default:
      NVLLM_CHECK_MSG(false, "decode attention: unsupported head_dim {}", args.head_dim);
  }
}

}  // namespace

int decode_num_splits(const PagedAttentionArgs& args) {
  const int pairs = args.num_seqs * args.num_kv_heads;
  if (args.num_sms <= 0 || pairs <= 0) return 1;
  // Split the keys until the grid has about this many CTAs an SM. A CTA's fixed costs (its
  // metadata, the q tile, the first chunks' latency, the merge) weigh against short contexts,
  // where 1.5 an SM measured fastest; long ones gain from finer pieces, which even out their
  // unequal lengths (3 an SM). On an H200, (4 or 8 kv heads) x 1 to 96 sequences in bands of
  // 1k to 16k keys: within 2% of the best split count, band by band.
  const bool short_contexts = args.max_seqlen_k > 0 && args.max_seqlen_k <= kShortContext;
  const double ctas_per_sm = short_contexts ? 1.5 : 3.0;
  const int splits = static_cast<int>(std::lround(ctas_per_sm * args.num_sms / pairs));
  // Clusters of 7 or 8 measured slower than 6 once the grid holds more than a CTA an SM.
  const int most = pairs * kMaxSplits <= args.num_sms ? kMaxSplits : 6;
  return std::clamp(splits, 1, most);
}

void launch_attention_decode(const PagedAttentionArgs& args, cudaStream_t stream) {
  launch_attention_decode(args, decode_num_splits(args), stream);
}

void launch_attention_decode(const PagedAttentionArgs& passed, int num_splits,
                             cudaStream_t stream) {
  NVLLM_CHECK_MSG(num_splits >= 1 && num_splits <= kMaxSplits,
                  "decode attention: {} splits, outside [1, {}]", num_splits, kMaxSplits);
  // One sequence needs no order: the kernel then reads its metadata without a round trip first.
  PagedAttentionArgs args = passed;
  if (args.num_seqs == 1) args.seq_order = nullptr;
  switch (args.dtype) {
    case DType::kBF16:
      return launch_head_dim<__nv_bfloat16>(args, num_splits, stream);
    case DType::kF16:
      return launch_head_dim<__half>(args, num_splits, stream);
    default:
      NVLLM_CHECK_MSG(false, "decode attention: unsupported dtype {}", dtype_name(args.dtype));
  }
}

}  // namespace nanovllm::cuda::attention
