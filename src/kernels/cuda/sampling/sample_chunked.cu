// The chunked sampling path, two kernels over a grid of (chunk, row):
//   1. chunk_max_kernel: each chunk's largest rank key;
//   2. chunk_draw_kernel: every CTA folds its row's chunk maxima into the row's largest key.
//      Greedy rows: chunk 0 writes its token. Untruncated random rows: each chunk races over its
//      tokens, and the last chunk to finish takes the best of their keys. Rows with top-k /
//      top-p: chunk 0 runs the per-row draw, the other chunks leave.
// The maximum of rank keys is exact and order-free, so every row draws the token the per-row
// kernel draws.
#include <algorithm>
#include <cmath>

#include "kernels/cuda/runtime/launch.cuh"
#include "kernels/cuda/sampling/sample_chunked.h"
#include "kernels/cuda/sampling/sample_draw.cuh"
#include "kernels/cuda/sampling/sampling_select.cuh"
#include "kernels/sampling_math.h"
#include "nanovllm/sampling_params.h"

namespace nanovllm::cuda {
namespace {

constexpr float kGreedyTemperature = SamplingParams::kGreedyTemperature;
// Chunks per row: their maxima and winners are folded by one warp in a few loads per lane.
constexpr int64_t kMaxChunks = 128;
// Groups of 4 tokens per chunk at least: smaller chunks cost more in reductions than they save.
constexpr int64_t kMinChunkGroups = 256;
// Chunk CTAs per SM that fit at once (the kernels' launch bounds), so that a plan of at most
// kCtasPerSm * num_sms CTAs runs in one wave.
constexpr int64_t kCtasPerSm = 2;

// The workspace: per (row, chunk) its largest key and its race winner, per row a count of the
// chunks done racing.
struct ChunkLayout {
  int chunks;
  int groups_per_chunk;
  unsigned long long* chunk_max;     // [rows, chunks]
  unsigned long long* chunk_winner;  // [rows, chunks]
  unsigned int* chunks_done;         // [rows]
};

ChunkLayout layout_of(void* workspace, int64_t rows, const ChunkPlan& plan) {
  const size_t slots = static_cast<size_t>(rows) * static_cast<size_t>(plan.chunks);
  auto* keys = static_cast<unsigned long long*>(workspace);
  return {plan.chunks, plan.groups_per_chunk, keys, keys + slots,
          reinterpret_cast<unsigned int*>(keys + 2 * slots)};
}

__device__ __forceinline__ int chunk_begin(const ChunkLayout& layout, int chunk) {
  return chunk * layout.groups_per_chunk;
}

__device__ __forceinline__ int chunk_end(const ChunkLayout& layout, int chunk, int vocab) {
  return min(chunk_begin(layout, chunk) + layout.groups_per_chunk, select::num_groups_of(vocab));
}

// The largest of keys[0, count) (0 when empty), on every lane of the calling warp. L2 loads, as
// the keys may come from other CTAs of the running kernel.
__device__ __forceinline__ unsigned long long warp_max_of(const unsigned long long* keys,
                                                          int count) {
  unsigned long long best = 0;
  for (int i = static_cast<int>(select::lane_id()); i < count; i += 32) {
    const unsigned long long key = __ldcg(keys + i);
    best = key > best ? key : best;
  }
  return select::warp_max_u64(best);
}

__global__ void __launch_bounds__(select::kSelectThreads)
    chunk_max_kernel(SamplingArgs args, ChunkLayout layout) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  __shared__ unsigned long long scratch[select::kSelectWarps];
  const int chunk = static_cast<int>(blockIdx.x);
  const int64_t r = blockIdx.y;
  const int vocab = static_cast<int>(args.vocab);
  const unsigned long long best = select::block_max_u64(
      select::thread_max_key(args.logits + r * args.vocab, vocab, chunk_begin(layout, chunk),
                             chunk_end(layout, chunk, vocab)),
      scratch);
  if (threadIdx.x == 0) {
    layout.chunk_max[r * layout.chunks + chunk] = best;
    if (chunk == 0) layout.chunks_done[r] = 0;  // chunk_draw_kernel counts from zero
  }
}

__global__ void __launch_bounds__(select::kSelectThreads, kCtasPerSm)
    chunk_draw_kernel(SamplingArgs args, ChunkLayout layout) {
  NVLLM_TIMELINE_SCOPE();
  start_after_prior_kernels();
  __shared__ select::SelectShared sh;
  __shared__ int last_chunk;
  const int chunk = static_cast<int>(blockIdx.x);
  const int64_t r = blockIdx.y;
  const int vocab = static_cast<int>(args.vocab);
  const float* row = args.logits + r * args.vocab;
  const int64_t slots = r * layout.chunks;
  // Every warp folds the maxima on its own: the same loads, so the same key, and no barrier.
  const unsigned long long max_key = warp_max_of(layout.chunk_max + slots, layout.chunks);

  const float max_logit = sampling::logit_of_key(max_key);
  const float temperature = args.temperature[r];
  if (sampling::all_nan(max_key) || temperature < kGreedyTemperature || !isfinite(max_logit)) {
    if (chunk == 0 && threadIdx.x == 0) {
      args.token_ids[r] = sampling::all_nan(max_key) ? -1 : sampling::token_of_key(max_key);
    }
    return;
  }
  const draw::RowDraw rd{max_logit, sampling::reciprocal(temperature),
                         static_cast<uint64_t>(args.seed[r]), args.position[r]};
  const int32_t top_k = args.top_k[r];
  const float top_p = args.top_p[r];
  if (draw::uses_top_k(top_k, vocab) || draw::uses_top_p(top_p)) {
    if (chunk != 0) return;
    if (threadIdx.x == 0) sh.compacted = 0;
    __syncthreads();
    const int32_t token = draw::draw_token(row, vocab, max_key, top_k, top_p, rd, sh);
    if (threadIdx.x == 0) args.token_ids[r] = token;
    return;
  }

  const unsigned long long winner = draw::race_key_over_groups(
      row, vocab, chunk_begin(layout, chunk), chunk_end(layout, chunk, vocab), 0, rd, sh);
  if (threadIdx.x == 0) {
    layout.chunk_winner[slots + chunk] = winner;
    __threadfence();  // the winner is visible to the chunk that sees this one counted
    const unsigned int done = atomicAdd(layout.chunks_done + r, 1u);
    last_chunk = done == static_cast<unsigned int>(layout.chunks - 1);
  }
  __syncthreads();
  if (!last_chunk || threadIdx.x >= 32) return;
  __threadfence();
  const unsigned long long best = warp_max_of(layout.chunk_winner + slots, layout.chunks);
  if (threadIdx.x == 0) args.token_ids[r] = sampling::token_of_key(best);
}

}  // namespace

ChunkPlan plan_chunks(int64_t rows, int64_t vocab, int num_sms) {
  ChunkPlan plan;
  if (rows <= 0 || vocab <= 0 || num_sms <= 0) return plan;
  const int64_t num_groups = (vocab + 3) / 4;
  const int64_t chunks =
      std::min({kMaxChunks, kCtasPerSm * num_sms / rows, num_groups / kMinChunkGroups});
  if (chunks < 2) return plan;
  // Equal ranges, rounded up; the count is taken again so that no range is empty.
  const int64_t per_chunk = (num_groups + chunks - 1) / chunks;
  plan.groups_per_chunk = static_cast<int>(per_chunk);
  plan.chunks = static_cast<int>((num_groups + per_chunk - 1) / per_chunk);
  return plan;
}

size_t chunked_workspace_bytes(int64_t rows, const ChunkPlan& plan) {
  if (plan.chunks < 2 || rows <= 0) return 0;
  const size_t slots = static_cast<size_t>(rows) * static_cast<size_t>(plan.chunks);
  return 2 * slots * sizeof(unsigned long long) + static_cast<size_t>(rows) * sizeof(unsigned int);
}

void sample_chunked(const SamplingArgs& args, const ChunkPlan& plan, void* workspace,
                    cudaStream_t stream) {
  NVLLM_CHECK_MSG(
      plan.chunks > 1 && plan.chunks <= kMaxChunks && args.rows > 0 && args.rows <= 65535,
      "chunked sampling of {} rows in {} chunks", args.rows, plan.chunks);
  NVLLM_CHECK_MSG(workspace != nullptr, "chunked sampling needs {} bytes of workspace",
                  chunked_workspace_bytes(args.rows, plan));
  const ChunkLayout layout = layout_of(workspace, args.rows, plan);
  const dim3 grid(static_cast<unsigned>(plan.chunks), static_cast<unsigned>(args.rows));
  launch_kernel(chunk_max_kernel, grid, select::kSelectThreads, 0, stream, args, layout);
  launch_kernel(chunk_draw_kernel, grid, select::kSelectThreads, 0, stream, args, layout);
}

}  // namespace nanovllm::cuda
