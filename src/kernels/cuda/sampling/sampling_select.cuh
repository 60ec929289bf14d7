// Device building blocks of the sampling and logprobs kernels: CTAs of kSelectThreads threads
// walking a row (or a range of its groups of 4 tokens), block reductions, and a radix select on
// the 64-bit rank key that finds the kept set of top-k (by count) or top-p (by fixed-point mass)
// without sorting the vocabulary.
//
// A radix select walks the key from its top byte down. Each pass builds a 256-bin histogram
// (token count, and mass in mass mode) of the tokens whose key matches the digits chosen so far,
// picks the bin holding the cut, and stops as soon as the whole bin is known to be kept. Once
// the tokens at or above the chosen prefix fit in shared memory, the pass that reads them also
// copies their keys there, and later passes (and the race) read only that copy.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/sampling_math.h"

namespace nanovllm::cuda::select {

constexpr int kSelectThreads = 512;
constexpr int kSelectWarps = kSelectThreads / 32;
constexpr int kCandidateCapacity = 4096;  // keys kept in shared memory (32 KiB)
constexpr int kBins = 256;
constexpr unsigned kFullMask = 0xffffffffu;
// Distinct digits of a warp merged before its lanes fall back to one atomic each.
constexpr int kAggregateRounds = 3;
constexpr uint32_t kUnknownCount = 0xffffffffu;

// Progress of one radix select; written by warp 0 between barriers, read by every thread.
struct SelectState {
  unsigned long long prefix;       // key digits chosen so far; bits below them are zero
  unsigned long long above_value;  // count or mass of the universe above the prefix's range
  unsigned long long limit;        // count mode: k; mass mode: the top-p threshold
  unsigned long long result;       // the threshold key, once done
  uint32_t above_count;            // universe tokens above the prefix's range
  uint32_t range_count;            // universe tokens within it (kUnknownCount before a pass)
  int shift;                       // bit position of the next pass's digit
  int done;
  int limit_pending;  // mass mode: the threshold comes from the first pass's total
};

struct SelectShared {
  unsigned long long candidates[kCandidateCapacity];  // rank keys
  unsigned long long mass[kBins];
  uint32_t count[kBins];
  uint32_t num_candidates;
  int compacted;  // candidates hold every universe token with key >= the prefix at that time
  SelectState state;
  unsigned long long reduce_u64[kSelectWarps];
  double reduce_f64[kSelectWarps];
};

// What a select looks for. The universe is the tokens with key >= floor (universe_count of
// them); the answer t makes the kept set the universe tokens with key >= t.
struct SelectQuery {
  bool by_mass = false;
  unsigned long long floor = 0;
  uint32_t universe_count = 0;
  unsigned long long count = 0;  // count mode: keep the `count` largest keys (1..universe_count)
  float top_p = 1.0f;            // mass mode
  unsigned long long first_key = 0;  // mass mode: the universe's largest key
  float max_logit = 0.0f;            // mass mode: the weights' m and 1 / T
  float inv_temperature = 1.0f;
};

__device__ __forceinline__ unsigned lane_id() {
  return threadIdx.x & 31u;
}

__device__ __forceinline__ unsigned long long warp_max_u64(unsigned long long value) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    const unsigned long long other = __shfl_xor_sync(kFullMask, value, offset);
    value = other > value ? other : value;
  }
  return value;
}

__device__ __forceinline__ unsigned long long warp_sum_u64(unsigned long long value) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

// Block-wide max of a 64-bit key over one word of scratch per warp; every thread gets the result.
__device__ __forceinline__ unsigned long long block_max_u64(
    unsigned long long value, unsigned long long (&scratch)[kSelectWarps]) {
  value = warp_max_u64(value);
  if (lane_id() == 0) scratch[threadIdx.x / 32] = value;
  __syncthreads();
  unsigned long long total = 0;
  for (int w = 0; w < kSelectWarps; ++w) total = scratch[w] > total ? scratch[w] : total;
  __syncthreads();  // the scratch may be reused right away
  return total;
}

__device__ __forceinline__ unsigned long long block_max_u64(unsigned long long value,
                                                            SelectShared& sh) {
  return block_max_u64(value, sh.reduce_u64);
}

__device__ __forceinline__ unsigned long long block_sum_u64(unsigned long long value,
                                                            SelectShared& sh) {
  value = warp_sum_u64(value);
  if (lane_id() == 0) sh.reduce_u64[threadIdx.x / 32] = value;
  __syncthreads();
  unsigned long long total = 0;
  for (int w = 0; w < kSelectWarps; ++w) total += sh.reduce_u64[w];
  __syncthreads();
  return total;
}

// Block-wide sum of doubles, added in a fixed order (deterministic).
__device__ __forceinline__ double block_sum_f64(double value, SelectShared& sh) {
  for (int offset = 16; offset > 0; offset >>= 1)
    value += __shfl_xor_sync(kFullMask, value, offset);
  if (lane_id() == 0) sh.reduce_f64[threadIdx.x / 32] = value;
  __syncthreads();
  double total = 0.0;
  for (int w = 0; w < kSelectWarps; ++w) total += sh.reduce_f64[w];
  __syncthreads();
  return total;
}

__device__ __forceinline__ float block_max_f32(float value, SelectShared& sh) {
  for (int offset = 16; offset > 0; offset >>= 1) {
    value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  }
  if (lane_id() == 0) sh.reduce_f64[threadIdx.x / 32] = value;
  __syncthreads();
  float total = -__builtin_huge_valf();
  for (int w = 0; w < kSelectWarps; ++w) total = fmaxf(total, static_cast<float>(sh.reduce_f64[w]));
  __syncthreads();
  return total;
}

__device__ __forceinline__ int num_groups_of(int vocab) {
  return (vocab + 3) / 4;
}

// Calls f(group, logits[4], n) for the groups of 4 tokens 4 * group .. 4 * group + n - 1 of a
// row with group_begin <= group < group_end, n = 0 for a thread past the end; every thread makes
// the same number of calls, so f may use warp collectives. Aligned rows are read with float4
// loads.
template <typename F>
__device__ __forceinline__ void for_each_group_in(const float* row, int vocab, int group_begin,
                                                  int group_end, F&& f) {
  const bool aligned = (reinterpret_cast<uintptr_t>(row) & 15u) == 0;
  for (int base = group_begin; base < group_end; base += kSelectThreads) {
    const int group = base + static_cast<int>(threadIdx.x);
    const int token = 4 * group;
    const int n = group < group_end ? min(4, vocab - token) : 0;
    float logits[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (n == 4 && aligned) {
      const float4 v = __ldg(reinterpret_cast<const float4*>(row + token));
      logits[0] = v.x;
      logits[1] = v.y;
      logits[2] = v.z;
      logits[3] = v.w;
    } else {
      for (int j = 0; j < n; ++j) logits[j] = __ldg(row + token + j);
    }
    f(group, logits, n);
  }
}

// The whole row, group by group (see for_each_group_in).
template <typename F>
__device__ __forceinline__ void for_each_group(const float* row, int vocab, F&& f) {
  for_each_group_in(row, vocab, 0, num_groups_of(vocab), static_cast<F&&>(f));
}

// The largest rank key this thread sees among groups [group_begin, group_end) (0 for none).
__device__ __forceinline__ unsigned long long thread_max_key(const float* row, int vocab,
                                                             int group_begin, int group_end) {
  unsigned long long best = 0;
  for_each_group_in(row, vocab, group_begin, group_end,
                    [&](int group, const float(&logits)[4], int n) {
                      for (int j = 0; j < n; ++j) {
                        const unsigned long long key = sampling::rank_key(logits[j], 4 * group + j);
                        best = key > best ? key : best;
                      }
                    });
  return best;
}

// The row's largest rank key (0 for an empty row).
__device__ __forceinline__ unsigned long long row_max_key(const float* row, int vocab,
                                                          SelectShared& sh) {
  return block_max_u64(thread_max_key(row, vocab, 0, num_groups_of(vocab)), sh);
}

// Adds one token per valid lane to the histograms. Lanes with the same digit are merged (one
// atomic per digit and warp) for the first few digits; the rest add on their own. All 32 lanes
// must call it together.
__device__ __forceinline__ void histogram_add(bool valid, uint32_t digit, unsigned long long mass,
                                              bool with_mass, SelectShared& sh) {
  const unsigned lane = lane_id();
  unsigned pending = __ballot_sync(kFullMask, valid);
  for (int round = 0; round < kAggregateRounds && pending != 0; ++round) {
    const int leader = __ffs(pending) - 1;
    const uint32_t leader_digit = __shfl_sync(kFullMask, digit, leader);
    const bool mine = ((pending >> lane) & 1u) && digit == leader_digit;
    const unsigned group = __ballot_sync(kFullMask, mine);
    if (with_mass) {
      const unsigned long long sum = warp_sum_u64(mine ? mass : 0ull);
      if (static_cast<int>(lane) == leader) atomicAdd(&sh.mass[leader_digit], sum);
    }
    if (static_cast<int>(lane) == leader) atomicAdd(&sh.count[leader_digit], __popc(group));
    pending &= ~group;
  }
  if ((pending >> lane) & 1u) {
    atomicAdd(&sh.count[digit], 1u);
    if (with_mass) atomicAdd(&sh.mass[digit], mass);
  }
}

// Appends the keys of the lanes that want it to sh.candidates. All 32 lanes call it together.
__device__ __forceinline__ void append_candidate(bool want, unsigned long long key,
                                                 SelectShared& sh) {
  const unsigned mask = __ballot_sync(kFullMask, want);
  if (mask == 0) return;
  const unsigned lane = lane_id();
  const int leader = __ffs(mask) - 1;
  uint32_t base = 0;
  if (static_cast<int>(lane) == leader) base = atomicAdd(&sh.num_candidates, __popc(mask));
  base = __shfl_sync(kFullMask, base, leader);
  if (want) {
    const uint32_t index = base + __popc(mask & ((1u << lane) - 1u));
    if (index < kCandidateCapacity) sh.candidates[index] = key;
  }
}

// Warp 0 reads the histograms of a pass and moves the select one digit down (or ends it).
__device__ __forceinline__ void scan_histogram(const SelectQuery& query, SelectShared& sh,
                                               bool compacted_now) {
  SelectState& st = sh.state;
  const unsigned lane = lane_id();
  const int shift = st.shift;

  // Lane L owns bins 8L .. 8L + 7; bins above it belong to higher lanes.
  unsigned long long lane_value = 0;
  uint32_t lane_count = 0;
  for (int b = 8 * lane; b < 8 * static_cast<int>(lane) + 8; ++b) {
    lane_count += sh.count[b];
    lane_value += query.by_mass ? sh.mass[b] : sh.count[b];
  }
  unsigned long long value_suffix = lane_value;  // lanes >= L
  uint32_t count_suffix = lane_count;
  for (int offset = 1; offset < 32; offset <<= 1) {
    const unsigned long long v = __shfl_down_sync(kFullMask, value_suffix, offset);
    const uint32_t c = __shfl_down_sync(kFullMask, count_suffix, offset);
    if (lane + offset < 32) {
      value_suffix += v;
      count_suffix += c;
    }
  }
  unsigned long long limit = st.limit;
  if (st.limit_pending) {  // the first mass pass saw the whole universe
    const unsigned long long total = __shfl_sync(kFullMask, value_suffix, 0);
    limit = sampling::top_p_threshold(query.top_p, total);
  }

  // The cut lies in the lowest nonempty bin whose tokens above stay below the limit.
  unsigned long long above_value = st.above_value + (value_suffix - lane_value);
  uint32_t above_count = st.above_count + (count_suffix - lane_count);
  int chosen = -1;
  unsigned long long chosen_above_value = 0;
  uint32_t chosen_above_count = 0;
  for (int b = 8 * static_cast<int>(lane) + 7; b >= 8 * static_cast<int>(lane); --b) {
    if (sh.count[b] > 0 && above_value < limit) {
      chosen = b;
      chosen_above_value = above_value;
      chosen_above_count = above_count;
    }
    above_value += query.by_mass ? sh.mass[b] : sh.count[b];
    above_count += sh.count[b];
  }
  const unsigned has = __ballot_sync(kFullMask, chosen >= 0);
  const int owner = has != 0 ? __ffs(has) - 1 : 0;
  if (static_cast<int>(lane) != owner) return;

  if (compacted_now && sh.num_candidates <= kCandidateCapacity) sh.compacted = 1;
  st.limit = limit;
  st.limit_pending = 0;
  if (limit == 0 && query.by_mass) {  // top-p keeps only the first token
    st.done = 1;
    st.result = query.first_key;
    return;
  }
  if (chosen < 0) {  // unreachable while the counts are consistent: keep the whole range
    st.done = 1;
    st.result = st.prefix;
    return;
  }
  const uint32_t bin_count = sh.count[chosen];
  const unsigned long long prefix = st.prefix | (static_cast<unsigned long long>(chosen) << shift);
  const bool whole_bin_kept = query.by_mass
                                  ? (bin_count == 1 || chosen_above_value + sh.mass[chosen] < limit)
                                  : chosen_above_value + bin_count == limit;
  st.prefix = prefix;
  st.above_value = chosen_above_value;
  st.above_count = chosen_above_count;
  st.range_count = bin_count;
  st.shift = shift - 8;
  if (whole_bin_kept || shift == 0) {
    st.done = 1;
    st.result = prefix;
  }
}

// One radix select over the row (or its copy in shared memory); returns the threshold key.
// Every thread of the block calls it; it leaves sh.compacted set when the copy was made.
__device__ __forceinline__ unsigned long long radix_select(const float* row, int vocab,
                                                           const SelectQuery& query,
                                                           SelectShared& sh) {
  __syncthreads();  // earlier readers of the state are done
  if (threadIdx.x == 0) {
    SelectState& st = sh.state;
    st.prefix = 0;
    st.above_value = 0;
    st.limit = query.by_mass ? 0 : query.count;
    st.result = 0;
    st.above_count = 0;
    st.range_count = query.universe_count;
    st.shift = 56;
    st.done = 0;
    st.limit_pending = query.by_mass ? 1 : 0;
  }
  __syncthreads();

  for (;;) {
    const int shift = sh.state.shift;
    const unsigned long long prefix = sh.state.prefix;
    const bool from_copy = sh.compacted != 0;
    const bool compact_now = !from_copy && static_cast<unsigned long long>(sh.state.above_count) +
                                                   sh.state.range_count <=
                                               kCandidateCapacity;
    const unsigned long long high_mask = shift >= 56 ? 0ull : ~0ull << (shift + 8);
    for (int b = threadIdx.x; b < kBins; b += kSelectThreads) {
      sh.count[b] = 0;
      sh.mass[b] = 0;
    }
    if (compact_now && threadIdx.x == 0) sh.num_candidates = 0;
    __syncthreads();

    const auto visit = [&](bool valid, unsigned long long key, float logit) {
      valid = valid && key >= query.floor;
      if (compact_now) append_candidate(valid && key >= prefix, key, sh);
      const bool in_range = valid && (key & high_mask) == prefix;
      const uint32_t digit = static_cast<uint32_t>(key >> shift) & 0xffu;
      unsigned long long mass = 0;
      if (query.by_mass && in_range) {
        mass = sampling::fixed_weight(
            sampling::token_weight(logit, query.max_logit, query.inv_temperature));
      }
      histogram_add(in_range, digit, mass, query.by_mass, sh);
    };
    if (from_copy) {
      const int num =
          static_cast<int>(min(sh.num_candidates, static_cast<uint32_t>(kCandidateCapacity)));
      for (int base = 0; base < num; base += kSelectThreads) {
        const int i = base + static_cast<int>(threadIdx.x);
        const bool valid = i < num;
        const unsigned long long key = valid ? sh.candidates[i] : 0ull;
        visit(valid, key, sampling::logit_of_key(key));
      }
    } else {
      for_each_group(row, vocab, [&](int group, const float(&logits)[4], int n) {
        for (int j = 0; j < 4; ++j) {
          const bool valid = j < n;
          visit(valid, valid ? sampling::rank_key(logits[j], 4 * group + j) : 0ull, logits[j]);
        }
      });
    }
    __syncthreads();
    if (threadIdx.x < 32) scan_histogram(query, sh, compact_now);
    __syncthreads();
    if (sh.state.done) {
      const unsigned long long result = sh.state.result;
      return result > query.floor ? result : query.floor;
    }
  }
}

}  // namespace nanovllm::cuda::select
