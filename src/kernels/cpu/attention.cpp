// Paged causal attention: every query row attends to keys [0, its position] of its sequence,
// read through the sequence's block table. Online softmax over key chunks, fp32 throughout.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"
#include "kernels/cpu/vec.h"

namespace nanovllm::cpu {
namespace {

constexpr int kMaxHeadDim = 512;
constexpr int kHeadTile = 8;   // query heads of one kv head handled together (keys read once)
constexpr int kKeyChunk = 16;  // keys scored before their values are accumulated

// One kv head of one sequence's paged cache.
struct PagedKV {
  const float* k;              // [num_blocks, block_size, num_kv_heads, head_dim]
  const float* v;              // same layout
  const int32_t* block_table;  // [max_blocks_per_seq]
  int64_t block_size;
  int64_t slot_stride;  // floats between consecutive slots: num_kv_heads * head_dim
  int64_t head_offset;  // floats to this kv head within a slot
};

// Softmax(q k^T * scale) v for `count` query heads q [count, head_dim] over keys [0, num_keys);
// writes out [count, head_dim].
void attend(const float* q, int count, int head_dim, const PagedKV& kv, int64_t num_keys,
            float scale, float* out) {
  float running_max[kHeadTile];
  float denominator[kHeadTile];
  alignas(64) float acc[kHeadTile][kMaxHeadDim];
  float scores[kHeadTile][kKeyChunk];
  for (int h = 0; h < count; ++h) {
    running_max[h] = -std::numeric_limits<float>::infinity();
    denominator[h] = 0.0f;
    std::fill(acc[h], acc[h] + head_dim, 0.0f);
  }

  for (int64_t j = 0; j < num_keys;) {
    const int64_t block = kv.block_table[j / kv.block_size];
    const int64_t offset = j % kv.block_size;
    const int n =
        static_cast<int>(std::min<int64_t>({kKeyChunk, kv.block_size - offset, num_keys - j}));
    const int64_t first = (block * kv.block_size + offset) * kv.slot_stride + kv.head_offset;
    const float* keys = kv.k + first;
    const float* values = kv.v + first;
    for (int h = 0; h < count; ++h) {
      const float* q_head = q + static_cast<int64_t>(h) * head_dim;
      float chunk_max = -std::numeric_limits<float>::infinity();
      for (int c = 0; c < n; ++c) {
        scores[h][c] = dot(q_head, keys + c * kv.slot_stride, head_dim) * scale;
        chunk_max = std::max(chunk_max, scores[h][c]);
      }
      const float new_max = std::max(running_max[h], chunk_max);
      const float correction = std::exp(running_max[h] - new_max);  // 0 on the first chunk
      running_max[h] = new_max;
      float* a = acc[h];
      float sum = denominator[h] * correction;
      for (int d = 0; d < head_dim; ++d) a[d] *= correction;
      for (int c = 0; c < n; ++c) {
        const float p = std::exp(scores[h][c] - new_max);
        sum += p;
        const float* v = values + c * kv.slot_stride;
        for (int d = 0; d < head_dim; ++d) a[d] += p * v[d];
      }
      denominator[h] = sum;
    }
    j += n;
  }

  for (int h = 0; h < count; ++h) {
    const float inv = 1.0f / denominator[h];
    float* o = out + static_cast<int64_t>(h) * head_dim;
    for (int d = 0; d < head_dim; ++d) o[d] = acc[h][d] * inv;
  }
}

// Throws unless the metadata describes num_seqs sequences covering all `tokens` rows, each
// with its keys inside its block table and every block inside the cache. Returns the number
// of (query row, key) pairs.
int64_t check_metadata(const AttentionMetadata& m, int64_t tokens, int64_t num_blocks,
                       int64_t block_size) {
  int64_t pairs = 0;
  NVLLM_CHECK_GE(m.num_seqs, 0);
  check_shape(m.cu_seqlens_q, "cu_seqlens_q", DType::kI32, {m.num_seqs + 1});
  check_shape(m.context_lens, "context_lens", DType::kI32, {m.num_seqs});
  check_shape(m.block_tables, "block_tables", DType::kI32, {m.num_seqs, -1});
  const int32_t* cu = m.cu_seqlens_q.data_as<int32_t>();
  const int32_t* context = m.context_lens.data_as<int32_t>();
  const int64_t max_blocks = m.block_tables.size(1);
  NVLLM_CHECK_EQ(cu[0], 0);
  NVLLM_CHECK_MSG(cu[m.num_seqs] == tokens, "cu_seqlens_q ends at {} but qkv has {} rows",
                  cu[m.num_seqs], tokens);
  for (int i = 0; i < m.num_seqs; ++i) {
    const int64_t q_len = cu[i + 1] - cu[i];
    NVLLM_CHECK_MSG(q_len >= 0, "cu_seqlens_q decreases at sequence {}: {} -> {}", i, cu[i],
                    cu[i + 1]);
    NVLLM_CHECK_MSG(context[i] >= q_len, "sequence {} has {} query rows but context length {}", i,
                    q_len, context[i]);
    NVLLM_CHECK_MSG(q_len <= m.max_seqlen_q, "sequence {} has {} query rows, max_seqlen_q is {}", i,
                    q_len, m.max_seqlen_q);
    NVLLM_CHECK_MSG(context[i] <= m.max_seqlen_k, "sequence {} has context {}, max_seqlen_k is {}",
                    i, context[i], m.max_seqlen_k);
    pairs += q_len * context[i];
    const int64_t blocks_needed = (context[i] + block_size - 1) / block_size;
    NVLLM_CHECK_MSG(blocks_needed <= max_blocks,
                    "sequence {} needs {} blocks for context {}, block_tables has {} columns", i,
                    blocks_needed, context[i], max_blocks);
    const int32_t* table = m.block_tables.data_as<int32_t>() + i * max_blocks;
    for (int64_t b = 0; b < blocks_needed; ++b) {
      NVLLM_CHECK_MSG(table[b] >= 0 && table[b] < num_blocks,
                      "block_tables[{}][{}] = {} is outside the cache's {} blocks", i, b, table[b],
                      num_blocks);
    }
  }
  return pairs;
}

}  // namespace

void attention(const Tensor& qkv, const LayerKVCache& cache, const AttentionMetadata& metadata,
               const AttentionDims& dims, float scale, Tensor out, ThreadPool& pool) {
  check_qkv(qkv, dims);
  check_kv_cache(cache, dims);
  NVLLM_CHECK_MSG(dims.head_dim <= kMaxHeadDim, "head_dim {} is over the supported {}",
                  dims.head_dim, kMaxHeadDim);
  const int64_t tokens = qkv.size(0);
  check_shape(out, "attention out", DType::kF32, {tokens, dims.q_size()});
  const int64_t block_size = cache.k.size(1);
  const int64_t pairs = check_metadata(metadata, tokens, cache.k.size(0), block_size);

  const int32_t* cu = metadata.cu_seqlens_q.data_as<int32_t>();
  const int32_t* context = metadata.context_lens.data_as<int32_t>();
  const int32_t* tables = metadata.block_tables.data_as<int32_t>();
  const int64_t max_blocks = metadata.block_tables.size(1);
  const int head_dim = dims.head_dim;
  const int group = dims.num_heads / dims.num_kv_heads;
  const int tiles_per_group = (group + kHeadTile - 1) / kHeadTile;
  const int64_t row_width = dims.qkv_size();
  const float* rows = qkv.data_as<float>();
  float* out_rows = out.data_as<float>();
  const int num_seqs = metadata.num_seqs;

  // One item: one token row, one kv head, up to kHeadTile of the query heads that share it.
  const int64_t items = tokens * dims.num_kv_heads * tiles_per_group;
  const int64_t cost_per_item =
      std::max<int64_t>(1, pairs * dims.q_size() / std::max<int64_t>(items, 1));
  pool.parallel_for(
      items, cost_per_item,
      [&](int64_t begin, int64_t end) {
        for (int64_t item = begin; item < end; ++item) {
          const int64_t t = item / (dims.num_kv_heads * tiles_per_group);
          const int kv_head = static_cast<int>(item / tiles_per_group % dims.num_kv_heads);
          const int tile = static_cast<int>(item % tiles_per_group);
          const int seq =
              static_cast<int>(std::upper_bound(cu + 1, cu + num_seqs + 1, t) - (cu + 1));
          const int64_t q_len = cu[seq + 1] - cu[seq];
          const int64_t position = context[seq] - q_len + (t - cu[seq]);

          const PagedKV kv{cache.k.data_as<float>(),
                           cache.v.data_as<float>(),
                           tables + seq * max_blocks,
                           block_size,
                           dims.kv_size(),
                           static_cast<int64_t>(kv_head) * head_dim};
          const int first_head = kv_head * group + tile * kHeadTile;
          const int count = std::min(kHeadTile, group - tile * kHeadTile);
          attend(rows + t * row_width + static_cast<int64_t>(first_head) * head_dim, count,
                 head_dim, kv, position + 1, scale,
                 out_rows + t * dims.q_size() + static_cast<int64_t>(first_head) * head_dim);
        }
      },
      /*grain=*/1);  // rows differ in length: hand them out one by one
}

}  // namespace nanovllm::cpu
