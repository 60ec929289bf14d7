// The fused decode kernel (fused_decode.h): one CTA per SM; warps 0..6 consume, warp 7 lane 0
// produces.
//
// The producer walks the CTA's share of every weight matrix in the order the consumers use
// them (per layer: its rows of qkv_proj, o_proj, the gate rows, the up rows, down_proj) and
// copies them, a stage of whole rows at a time, into the shared-memory ring. The consumers
// run the layers phase by phase:
//   1. residual += previous MLP output; x = RMSNorm(residual); qkv rows = x @ W^T
//   2. attention (fused_decode_attention.cuh)
//   3. x = attention output; o_proj rows
//   4. residual += o; x = RMSNorm(residual); gate and up rows; act = SiLU(gate) * up
//   5. x = act; down_proj rows -> the MLP output
// A phase's outputs go out as tagged words (fused_decode_sync.cuh) in buffers of their own per
// layer, and the next phase polls the words it needs: no CTA waits for one it does not read
// from. Each CTA keeps the whole residual stream of the batch in shared memory and updates it
// itself, so it never travels.
//
// The projections run on the tensor cores (mma_top_rows.cuh): x rows are the MMA's A rows,
// 8 weight rows its B columns; a stage's (8-row tile, 32-wide k step) pieces are dealt to the
// warps, each keeping its partial sums in shared memory, and one fixed-order sum over the
// warps per phase gives the outputs (deterministic).
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>

#include "core/check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/fused_decode.h"
#include "kernels/cuda/fused_decode_attention.cuh"
#include "kernels/cuda/fused_decode_sync.cuh"
#include "kernels/cuda/mma_top_rows.cuh"

namespace nanovllm::cuda {
namespace fused {
namespace {

constexpr int kMaxStages = 16;
constexpr int kMinStageBytes = 24 << 10;
constexpr int kMaxStageRows = 32;  // weight rows of a stage: up to kTiles MMA tiles of 8
constexpr int kTiles = kMaxStageRows / 8;
constexpr int kStepElems = 32;  // k elements of one (tile, step) piece: 4 lanes x 8
constexpr size_t kScratchAlign = 256;

// Where things are: shared memory (bytes from its start) and the global scratch, whose first
// words hold the launch counter (tags are 2 * counter + 1) and the CTAs done with the launch,
// followed by one block of tagged words per layer.
struct Layout {
  int residual = 0;      // T [rows][hidden]
  int x = 0;             // T [rows][max k], or the attention phase's AttentionShared
  int reduce = 0;        // f32 [kConsumerWarps][kFusedDecodeMaxRows]; then the launch's tag
  int gate = 0;          // f32 [rows][row_capacity]: this CTA's gate outputs, rounded
  int partial = 0;       // f32 [kConsumerWarps][rows][row_capacity]: a projection's warp sums
  int row_capacity = 0;  // the most rows of one matrix a CTA takes
  int ring = 0;
  int stage_bytes = 0;
  int num_stages = 0;
  int shared_bytes = 0;
  int num_splits = 1;  // attention splits provided for
  // Tagged words of a layer, bytes from the start of its block.
  size_t qkv = 0;          // [rows][qkv width / 2]: pairs of T
  size_t attn = 0;         // [rows][q width / 2]: pairs of T (rows of one attention split)
  size_t partial_out = 0;  // [rows][kv_heads][splits][group][head_dim]: f32
  size_t stats = 0;        // [rows][kv_heads][splits][group][2]: f32
  size_t proj = 0;         // [rows][hidden / 2]: o_proj output
  size_t act = 0;          // [rows][intermediate / 2]
  size_t mlp = 0;          // [rows][hidden / 2]: down_proj output
  size_t first_layer = kScratchAlign;
  size_t layer_bytes = 0;
  size_t scratch_bytes = 0;
};

size_t align_up(size_t value, size_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

// The current device's multiprocessors and shared memory per block, queried once per device.
struct DeviceLimits {
  int multiprocessors = 0;
  int shared_memory = 0;
};
DeviceLimits device_limits() {
  int device = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  static std::mutex mutex;
  static std::map<int, DeviceLimits> known;
  const std::lock_guard<std::mutex> lock(mutex);
  auto found = known.find(device);
  if (found != known.end()) return found->second;
  DeviceLimits limits;
  NVLLM_CUDA_CHECK(
      cudaDeviceGetAttribute(&limits.multiprocessors, cudaDevAttrMultiProcessorCount, device));
  NVLLM_CUDA_CHECK(cudaDeviceGetAttribute(&limits.shared_memory,
                                          cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  known.emplace(device, limits);
  return limits;
}

// Rows of a matrix a CTA takes: whole pairs (a tagged word holds two outputs).
__host__ __device__ inline int pair_rows(int n, int cta, int num_ctas) {
  return 2 * static_cast<int>(int64_t{n / 2} * cta / num_ctas);
}

// num_stages 0: the shape does not fit.
Layout make_layout(const FusedDecodeShape& s, int num_ctas, int shared_limit) {
  Layout layout;
  const size_t elem = 2;  // bf16 / f16
  const size_t word = sizeof(uint64_t);
  const int group = s.num_heads / s.num_kv_heads;
  const int q_width = s.num_heads * s.head_dim;
  const int qkv_width = (s.num_heads + 2 * s.num_kv_heads) * s.head_dim;
  const int max_k = std::max({s.hidden, q_width, s.intermediate});
  const int max_n = std::max({qkv_width, s.hidden, s.intermediate});
  layout.num_splits = attention_max_splits(s.rows, s.num_kv_heads, group, num_ctas);
  const size_t attention =
      s.head_dim == 64 ? AttentionShared<__nv_bfloat16, 64>::bytes(group, layout.num_splits)
                       : AttentionShared<__nv_bfloat16, 128>::bytes(group, layout.num_splits);
  layout.row_capacity = pair_rows(max_n, 1, num_ctas) + 2;
  size_t offset = 2 * kMaxStages * sizeof(uint64_t);
  layout.residual = static_cast<int>(offset);
  offset = align_up(offset + s.rows * s.hidden * elem, 128);
  layout.x = static_cast<int>(offset);
  offset = align_up(offset + std::max(s.rows * max_k * elem, attention), 128);
  layout.reduce = static_cast<int>(offset);
  offset += kConsumerWarps * kFusedDecodeMaxRows * sizeof(float) + 16;
  layout.gate = static_cast<int>(offset);
  offset += s.rows * layout.row_capacity * sizeof(float);
  layout.partial = static_cast<int>(offset);
  offset = align_up(offset + kConsumerWarps * s.rows * layout.row_capacity * sizeof(float), 128);
  layout.ring = static_cast<int>(offset);
  // A stage holds at least a whole tile of the widest rows.
  layout.stage_bytes =
      static_cast<int>(align_up(std::max<size_t>(kMinStageBytes, 8 * max_k * elem), 128));
  const int room = shared_limit - layout.ring;
  layout.num_stages = std::clamp(room / layout.stage_bytes, 0, kMaxStages);
  if (layout.num_stages < 2) layout.num_stages = 0;
  layout.shared_bytes = layout.ring + layout.num_stages * layout.stage_bytes;

  size_t at = 0;
  const auto take = [&](size_t words) {
    const size_t start = at;
    at = align_up(at + words * word, kScratchAlign);
    return start;
  };
  const size_t partials = size_t{1} * s.rows * s.num_kv_heads * layout.num_splits * group;
  layout.qkv = take(size_t{1} * s.rows * qkv_width / 2);
  layout.attn = take(size_t{1} * s.rows * q_width / 2);
  layout.partial_out = take(partials * s.head_dim);
  layout.stats = take(partials * 2);
  layout.proj = take(size_t{1} * s.rows * s.hidden / 2);
  layout.act = take(size_t{1} * s.rows * s.intermediate / 2);
  layout.mlp = take(size_t{1} * s.rows * s.hidden / 2);
  layout.layer_bytes = at;
  layout.scratch_bytes = layout.first_layer + s.num_layers * layout.layer_bytes;
  return layout;
}

// This CTA's rows [first, last) of a matrix of n rows.
struct RowRange {
  int first;
  int last;
};
__device__ __forceinline__ RowRange cta_rows(int n) {
  return {pair_rows(n, blockIdx.x, gridDim.x), pair_rows(n, blockIdx.x + 1, gridDim.x)};
}

// Weight rows of k elements in one stage: whole tiles of 8, at most kMaxStageRows.
template <typename T>
__device__ __forceinline__ int rows_per_stage(const Layout& layout, int k) {
  return min(kMaxStageRows, layout.stage_bytes / (k * static_cast<int>(sizeof(T)))) & ~7;
}

template <typename T>
__device__ void produce(const FusedDecodeArgs& args, const Layout& layout, const WeightRing& ring) {
  const uint64_t policy = l2_evict_first_policy();
  RingCursor cursor;
  const auto push = [&](const void* weight, int64_t first_row_of_matrix, RowRange rows, int k) {
    const int per_stage = rows_per_stage<T>(layout, k);
    const T* base = static_cast<const T*>(weight) + first_row_of_matrix * k;
    for (int row = rows.first; row < rows.last; row += per_stage) {
      const int count = min(per_stage, rows.last - row);
      ring.push(cursor, base + int64_t{row} * k, static_cast<uint32_t>(count * k * sizeof(T)),
                policy);
    }
  };
  const FusedDecodeShape& s = args.shape;
  const int q_width = s.num_heads * s.head_dim;
  const int qkv_rows = q_width + 2 * s.num_kv_heads * s.head_dim;
  const RowRange qkv = cta_rows(qkv_rows);
  const RowRange hidden = cta_rows(s.hidden);
  const RowRange inter = cta_rows(s.intermediate);
  for (int l = 0; l < s.num_layers; ++l) {
    const FusedDecodeLayer& layer = args.layers[l];
    push(layer.qkv_proj, 0, qkv, s.hidden);
    push(layer.o_proj, 0, hidden, q_width);
    push(layer.gate_up_proj, 0, inter, s.hidden);
    push(layer.gate_up_proj, s.intermediate, inter, s.hidden);
    push(layer.down_proj, 0, hidden, s.intermediate);
  }
}

// This CTA's rows of a weight [n, k] against x [rows][k] (shared), as the ring delivers them:
// warp w's sums go to partial[w][m][row - range.first] (reduce_rows adds them up).
template <typename T>
__device__ void gemv_rows(const WeightRing& ring, RingCursor& cursor, const Layout& layout,
                          const T* x, int rows, int k, RowRange range, float* partial,
                          const PhaseClock& clock, int wait_event) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int g = lane / 4;  // A row (x row) and B column (weight row of a tile)
  const int t = lane % 4;  // which 8 elements of a 32-wide step
  const int per_stage = rows_per_stage<T>(layout, k);
  const int steps = k / kStepElems;
  const int capacity = layout.row_capacity;
  const T* x_row = x + min(g, rows - 1) * k;  // rows past the batch repeat one (unused)
  for (int first = range.first; first < range.last; first += per_stage) {
    const int count = min(per_stage, range.last - first);
    const int tiles = (count + 7) / 8;
    const uint64_t wait_start = clock.entries != nullptr ? PhaseClock::now() : 0;
    const T* weight = reinterpret_cast<const T*>(ring.wait(cursor));
    if (clock.entries != nullptr) clock.add(wait_event, PhaseClock::now() - wait_start);
    const T* weight_row[kTiles];  // this lane's B column of each tile; rows past count unused
#pragma unroll
    for (int tile = 0; tile < kTiles; ++tile) {
      weight_row[tile] = weight + min(tile * 8 + g, count - 1) * k;
    }
    // Warp w takes steps w, w + kConsumerWarps, ... of every tile; two accumulators per tile
    // (the two MMAs of a step) halve the dependency chain.
    float acc[kTiles][2][4] = {};
#pragma unroll 2
    for (int step = warp; step < steps; step += kConsumerWarps) {
      const int column = (step * 4 + t) * 8;
      const uint4 a = *reinterpret_cast<const uint4*>(x_row + column);
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        if (tile >= tiles) break;
        const uint4 w = *reinterpret_cast<const uint4*>(weight_row[tile] + column);
        mma_top_rows<T>(acc[tile][0], a.x, a.y, w.x, w.y);
        mma_top_rows<T>(acc[tile][1], a.z, a.w, w.z, w.w);
      }
    }
    ring.release(cursor, lane);
    if (g < rows) {
#pragma unroll
      for (int tile = 0; tile < kTiles; ++tile) {
        if (tile >= tiles) break;
        const int row = tile * 8 + 2 * t;  // C columns 2t, 2t + 1 of row g
        float* out = partial + (warp * rows + g) * capacity + first - range.first + row;
        if (row < count) out[0] = acc[tile][0][0] + acc[tile][1][0];
        if (row + 1 < count) out[1] = acc[tile][0][1] + acc[tile][1][1];
      }
    }
  }
}

// store(m, row, value of row, value of row + 1) for each pair of this CTA's rows: the warps'
// partial sums added in a fixed order. Brackets itself with consumer barriers.
template <typename Store>
__device__ void reduce_rows(const float* partial, int rows, int capacity, RowRange range,
                            Store&& store) {
  consumer_sync();
  const int pairs = (range.last - range.first) / 2;
  for (int i = static_cast<int>(threadIdx.x); i < rows * pairs; i += kConsumerThreads) {
    const int m = i / pairs;
    const int p = i % pairs;
    float value0 = 0.0f, value1 = 0.0f;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) {
      const float* sums = partial + (w * rows + m) * capacity + 2 * p;
      value0 += sums[0];
      value1 += sums[1];
    }
    store(m, range.first + 2 * p, value0, value1);
  }
  consumer_sync();
}

// x [rows][width] (shared) from tagged words of pairs, once they arrive.
template <typename T>
__device__ void load_tagged(T* x, const uint64_t* words, int rows, int width, uint32_t tag) {
  auto* pairs = reinterpret_cast<uint32_t*>(x);
  take_tagged(
      rows * width / 2, tag, [&](int i) { return words + i; },
      [&](int i, uint32_t pair) { pairs[i] = pair; });
  consumer_sync();
}

// residual[m] = round(residual[m] + add[m]) (add null: as it is), then x[m] =
// RMSNorm(residual[m]) * weight, rounded as add_rms_norm() does. add may be x: each thread
// reads and writes only its own vectors.
template <typename T, int kRows>
__device__ void add_rms_norm_rows(T* residual, const T* add, const T* weight, float eps, T* x,
                                  int rows, int hidden, float* reduce) {
  const int warp = static_cast<int>(threadIdx.x) / 32;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  const int vectors = hidden / 8;
  float sums[kRows];
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
    sums[m] = 0.0f;
    if (m >= rows) break;
    for (int v = static_cast<int>(threadIdx.x); v < vectors; v += kConsumerThreads) {
      uint4* slot = reinterpret_cast<uint4*>(residual + m * hidden) + v;
      float r[8];
      unpack8<T>(*slot, r);
      if (add != nullptr) {
        float a[8];
        unpack8<T>(reinterpret_cast<const uint4*>(add + m * hidden)[v], a);
#pragma unroll
        for (int e = 0; e < 8; ++e) r[e] = round_to<T>(a[e] + r[e]);
        *slot = pack8<T>(r);
      }
#pragma unroll
      for (int e = 0; e < 8; ++e) sums[m] += r[e] * r[e];
    }
  }
#pragma unroll
  for (int m = 0; m < kRows; ++m) {
    if (m >= rows) break;
    const float total = warp_sum(sums[m]);
    if (lane == 0) reduce[warp * kFusedDecodeMaxRows + m] = total;
  }
  consumer_sync();
  for (int m = 0; m < rows; ++m) {
    float total = 0.0f;
#pragma unroll
    for (int w = 0; w < kConsumerWarps; ++w) total += reduce[w * kFusedDecodeMaxRows + m];
    const float inv_rms = inverse_rms(total, hidden, eps);
    for (int v = static_cast<int>(threadIdx.x); v < vectors; v += kConsumerThreads) {
      float r[8], w[8];
      unpack8<T>(reinterpret_cast<const uint4*>(residual + m * hidden)[v], r);
      unpack8<T>(reinterpret_cast<const uint4*>(weight)[v], w);
#pragma unroll
      for (int e = 0; e < 8; ++e) r[e] = rms_normalize<T>(r[e], inv_rms, w[e]);
      reinterpret_cast<uint4*>(x + m * hidden)[v] = pack8<T>(r);
    }
  }
  consumer_sync();
}

template <typename T, int kHeadDim, int kRows>
__device__ void consume(const FusedDecodeArgs& args, const Layout& layout, const WeightRing& ring,
                        unsigned char* smem) {
  const FusedDecodeShape& s = args.shape;
  const int rows = s.rows;
  const int hidden = s.hidden;
  const int inter = s.intermediate;
  const int q_width = s.num_heads * s.head_dim;
  const int qkv_width = q_width + 2 * s.num_kv_heads * s.head_dim;
  const int capacity = layout.row_capacity;
  T* residual = reinterpret_cast<T*>(smem + layout.residual);
  T* x = reinterpret_cast<T*>(smem + layout.x);
  float* reduce = reinterpret_cast<float*>(smem + layout.reduce);
  float* gate = reinterpret_cast<float*>(smem + layout.gate);
  float* partial = reinterpret_cast<float*>(smem + layout.partial);
  auto* scratch = static_cast<unsigned char*>(args.scratch);
  auto* counters = reinterpret_cast<unsigned*>(scratch);  // [0]: launches, [1]: CTAs done
  const RowRange qkv_range = cta_rows(qkv_width);
  const RowRange hidden_range = cta_rows(hidden);
  const RowRange inter_range = cta_rows(inter);

  // This launch's tag: odd, so never the zero of a word not written yet.
  auto* shared_tag = reinterpret_cast<uint32_t*>(reduce + kConsumerWarps * kFusedDecodeMaxRows);
  if (threadIdx.x == 0) *shared_tag = 2 * __ldcg(counters) + 1;
  uint64_t* const timeline =
      args.timeline == nullptr || threadIdx.x != 0
          ? nullptr
          : args.timeline + blockIdx.x * (1 + int64_t{s.num_layers} * kFusedDecodeEvents);
  PhaseClock clock{timeline};
  clock.stamp(0);

  // The residual stream starts as the embeddings (an id outside the table: zeros).
  const int vectors = hidden / 8;
  for (int i = static_cast<int>(threadIdx.x); i < rows * vectors; i += kConsumerThreads) {
    const int m = i / vectors;
    const int id = args.input_ids[m];
    uint4 value = make_uint4(0, 0, 0, 0);
    if (id >= 0 && id < args.vocab) {
      value = __ldg(reinterpret_cast<const uint4*>(static_cast<const T*>(args.embed_tokens) +
                                                   int64_t{id} * hidden) +
                    i % vectors);
    }
    reinterpret_cast<uint4*>(residual)[i] = value;
  }
  consumer_sync();
  const uint32_t tag = *shared_tag;

  RingCursor cursor;
  uint64_t* previous_mlp = nullptr;
  for (int l = 0; l < s.num_layers; ++l) {
    const FusedDecodeLayer& layer = args.layers[l];
    auto* words =
        reinterpret_cast<uint64_t*>(scratch + layout.first_layer + l * layout.layer_bytes);
    const auto at = [&](size_t offset) { return words + offset / sizeof(uint64_t); };
    uint64_t* const qkv = at(layout.qkv);
    uint64_t* const proj = at(layout.proj);
    uint64_t* const act = at(layout.act);
    uint64_t* const mlp = at(layout.mlp);
    const AttentionWords attention{qkv, at(layout.attn), at(layout.partial_out), at(layout.stats),
                                   tag};
    if (timeline != nullptr) clock.entries = timeline + 1 + int64_t{l} * kFusedDecodeEvents;

    // 1. input norm and the q/k/v projection.
    if (previous_mlp != nullptr) load_tagged(x, previous_mlp, rows, hidden, tag);
    add_rms_norm_rows<T, kRows>(residual, previous_mlp != nullptr ? x : nullptr,
                                static_cast<const T*>(layer.input_norm), args.eps, x, rows, hidden,
                                reduce);
    clock.stamp(kQkvInput);
    gemv_rows<T>(ring, cursor, layout, x, rows, hidden, qkv_range, partial, clock, kQkvRingWait);
    reduce_rows(partial, rows, capacity, qkv_range, [&](int m, int row, float v0, float v1) {
      store_tagged(qkv + (int64_t{m} * qkv_width + row) / 2, pack_pair(v0, v1, T{}), tag);
    });
    clock.stamp(kQkvDone);

    // 2. attention.
    attention_phase<T, kHeadDim>(args, layer, attention, layout.num_splits, smem + layout.x, clock);
    clock.stamp(kAttnDone);

    // 3. output projection.
    load_tagged(x, attention.out, rows, q_width, tag);
    clock.stamp(kOInput);
    gemv_rows<T>(ring, cursor, layout, x, rows, q_width, hidden_range, partial, clock, kORingWait);
    reduce_rows(partial, rows, capacity, hidden_range, [&](int m, int row, float v0, float v1) {
      store_tagged(proj + (int64_t{m} * hidden + row) / 2, pack_pair(v0, v1, T{}), tag);
    });
    clock.stamp(kODone);

    // 4. post-attention norm, gate and up projections, SiLU * up.
    load_tagged(x, proj, rows, hidden, tag);
    add_rms_norm_rows<T, kRows>(residual, x, static_cast<const T*>(layer.post_norm), args.eps, x,
                                rows, hidden, reduce);
    clock.stamp(kMlpInput);
    gemv_rows<T>(ring, cursor, layout, x, rows, hidden, inter_range, partial, clock, kMlpRingWait);
    reduce_rows(partial, rows, capacity, inter_range, [&](int m, int row, float v0, float v1) {
      float* g = gate + m * capacity + row - inter_range.first;
      g[0] = round_to<T>(v0);
      g[1] = round_to<T>(v1);
    });
    gemv_rows<T>(ring, cursor, layout, x, rows, hidden, inter_range, partial, clock, kMlpRingWait);
    reduce_rows(partial, rows, capacity, inter_range, [&](int m, int row, float v0, float v1) {
      const float* g = gate + m * capacity + row - inter_range.first;
      const uint32_t pair = pack_pair(silu_times<T>(g[0], round_to<T>(v0)),
                                      silu_times<T>(g[1], round_to<T>(v1)), T{});
      store_tagged(act + (int64_t{m} * inter + row) / 2, pair, tag);
    });
    clock.stamp(kMlpDone);

    // 5. down projection; the last layer's also goes to hidden_out.
    load_tagged(x, act, rows, inter, tag);
    clock.stamp(kDownInput);
    gemv_rows<T>(ring, cursor, layout, x, rows, inter, hidden_range, partial, clock, kDownRingWait);
    const bool last = l + 1 == s.num_layers;
    reduce_rows(partial, rows, capacity, hidden_range, [&](int m, int row, float v0, float v1) {
      const uint32_t pair = pack_pair(v0, v1, T{});
      store_tagged(mlp + (int64_t{m} * hidden + row) / 2, pair, tag);
      if (last) static_cast<uint32_t*>(args.hidden_out)[(int64_t{m} * hidden + row) / 2] = pair;
    });
    clock.stamp(kDownDone);
    previous_mlp = mlp;
  }
  if (blockIdx.x == 0) {
    for (int i = static_cast<int>(threadIdx.x); i < rows * vectors; i += kConsumerThreads) {
      reinterpret_cast<uint4*>(args.residual_out)[i] = reinterpret_cast<const uint4*>(residual)[i];
    }
  }
  // The last CTA out moves the launch counter on (every CTA read it before writing anything).
  if (threadIdx.x == 0 && atomicAdd(counters + 1, 1u) == gridDim.x - 1) {
    counters[1] = 0;
    counters[0] = (tag - 1) / 2 + 1;
  }
}

template <typename T, int kHeadDim, int kRows>
__global__ void __launch_bounds__(kThreads, 1)
    fused_decode_kernel(const __grid_constant__ FusedDecodeArgs args, const Layout layout) {
  extern __shared__ __align__(128) unsigned char smem[];
  auto* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + kMaxStages;
  const WeightRing ring{smem + layout.ring, full, empty, layout.stage_bytes, layout.num_stages};
  if (threadIdx.x == 0) {
    for (int s = 0; s < layout.num_stages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], kConsumerWarps);
    }
    fence_mbarrier_init();
  }
  __syncthreads();
  if (threadIdx.x >= kConsumerThreads) {
    if (threadIdx.x == kConsumerThreads) produce<T>(args, layout, ring);
    return;
  }
  consume<T, kHeadDim, kRows>(args, layout, ring, smem);
}

template <typename T, int kHeadDim, int kRows>
void launch(const FusedDecodeArgs& args, const Layout& layout, int num_ctas, cudaStream_t stream) {
  const auto kernel = fused_decode_kernel<T, kHeadDim, kRows>;
  NVLLM_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        layout.shared_bytes));
  // Cooperative: every CTA is resident at once, which CTAs polling each other's words need.
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(num_ctas));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = static_cast<size_t>(layout.shared_bytes);
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = 1;
  NVLLM_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args, layout));
}

template <typename T, int kHeadDim>
void launch_rows(const FusedDecodeArgs& args, const Layout& layout, int num_ctas,
                 cudaStream_t stream) {
  if (args.shape.rows == 1) {
    launch<T, kHeadDim, 1>(args, layout, num_ctas, stream);
  } else {
    launch<T, kHeadDim, kFusedDecodeMaxRows>(args, layout, num_ctas, stream);
  }
}

template <typename T>
void launch_head_dim(const FusedDecodeArgs& args, const Layout& layout, int num_ctas,
                     cudaStream_t stream) {
  if (args.shape.head_dim == 64) {
    launch_rows<T, 64>(args, layout, num_ctas, stream);
  } else {
    launch_rows<T, 128>(args, layout, num_ctas, stream);
  }
}

}  // namespace
}  // namespace fused

namespace fused {
namespace {

// The shape's layout on the current device, or none where fused_decode_supported() says no.
std::optional<Layout> layout_for(const FusedDecodeShape& s) {
  if (s.dtype != DType::kBF16 && s.dtype != DType::kF16) return std::nullopt;
  if (s.head_dim != 64 && s.head_dim != 128) return std::nullopt;
  if (s.num_heads <= 0 || s.num_kv_heads <= 0 || s.num_heads % s.num_kv_heads != 0) {
    return std::nullopt;
  }
  if (s.num_heads / s.num_kv_heads > kMaxGroup) return std::nullopt;
  if (s.rows < 1 || s.rows > kFusedDecodeMaxRows) return std::nullopt;
  if (s.num_layers < 1 || s.num_layers > kFusedDecodeMaxLayers) return std::nullopt;
  if (s.block_size < kChunkKeys || s.block_size % kChunkKeys != 0) return std::nullopt;
  // The projections take k in 32-wide steps; hidden also sizes 16-byte vectors of the norm.
  if (s.hidden <= 0 || s.hidden % kStepElems != 0 || s.intermediate <= 0 ||
      s.intermediate % kStepElems != 0) {
    return std::nullopt;
  }
  const DeviceLimits limits = device_limits();
  const Layout layout = make_layout(s, limits.multiprocessors, limits.shared_memory);
  if (layout.num_stages == 0) return std::nullopt;
  return layout;
}

}  // namespace
}  // namespace fused

bool fused_decode_supported(const FusedDecodeShape& shape) {
  return fused::layout_for(shape).has_value();
}

size_t fused_decode_scratch_bytes(const FusedDecodeShape& shape) {
  const fused::DeviceLimits limits = fused::device_limits();
  size_t bytes = 0;
  for (int rows = 1; rows <= kFusedDecodeMaxRows; ++rows) {
    FusedDecodeShape sized = shape;
    sized.rows = rows;
    bytes = std::max(
        bytes,
        fused::make_layout(sized, limits.multiprocessors, limits.shared_memory).scratch_bytes);
  }
  return bytes;
}

void fused_decode(const FusedDecodeArgs& args, cudaStream_t stream) {
  const std::optional<fused::Layout> layout = fused::layout_for(args.shape);
  NVLLM_CHECK_MSG(layout.has_value(),
                  "fused decode: unsupported shape ({} layers, {} rows, hidden {}, "
                  "intermediate {}, {} heads over {} kv heads of {})",
                  args.shape.num_layers, args.shape.rows, args.shape.hidden,
                  args.shape.intermediate, args.shape.num_heads, args.shape.num_kv_heads,
                  args.shape.head_dim);
  NVLLM_CHECK(args.scratch != nullptr && args.hidden_out != nullptr &&
              args.residual_out != nullptr && args.embed_tokens != nullptr);
  const int num_ctas = fused::device_limits().multiprocessors;
  if (args.shape.dtype == DType::kBF16) {
    fused::launch_head_dim<__nv_bfloat16>(args, *layout, num_ctas, stream);
  } else {
    fused::launch_head_dim<__half>(args, *layout, num_ctas, stream);
  }
}

}  // namespace nanovllm::cuda
