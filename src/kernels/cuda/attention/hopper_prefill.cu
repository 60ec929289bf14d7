// HopperPrefillAttention (hopper_prefill.h): the plan of a batch's work list on the host, its
// upload, and the kernels' parameters over the engine's paged cache.
#include "kernels/cuda/attention/hopper_prefill.h"

#include <flashinfer/attention/scheduler.cuh>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/attention/hopper_prefill_kernels.cuh"
#include "kernels/cuda/runtime/alignment.h"
#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm::cuda {
namespace {

// Query rows a work item covers, as FlashInfer's plan cuts them.
int query_tile_rows(int head_dim) {
  return head_dim == 64 ? 192 : 128;
}

}  // namespace

bool HopperPrefillAttention::PlanKey::same_as(const PlanKey& other) const {
  return cu_seqlens_q == other.cu_seqlens_q && context_lens == other.context_lens &&
         num_heads == other.num_heads && num_kv_heads == other.num_kv_heads &&
         head_dim == other.head_dim && block_size == other.block_size &&
         block_table_stride == other.block_table_stride;
}

HopperPrefillAttention::~HopperPrefillAttention() {
  if (uploaded_ != nullptr) (void)cudaEventDestroy(uploaded_);
  if (device_workspace_ != nullptr) (void)cudaFree(device_workspace_);
  if (host_workspace_ != nullptr) (void)cudaFreeHost(host_workspace_);
}

bool HopperPrefillAttention::supports(const PagedAttentionArgs& args, int compute_capability) {
  // TMA reads q and writes out: 16-byte aligned rows.
  return compute_capability == 90 && args.dtype == DType::kBF16 && args.max_seqlen_q > 1 &&
         (args.head_dim == 64 || args.head_dim == 128) && args.qk_norm_rope.qkv == nullptr &&
         aligned_to(args.qkv, 16) && args.qkv_row_stride % 8 == 0 && aligned_to(args.out, 16) &&
         args.out_row_stride % 8 == 0;
}

void HopperPrefillAttention::reserve(size_t bytes) {
  if (bytes <= workspace_bytes_) return;
  bytes = std::max(bytes, workspace_bytes_ + workspace_bytes_ / 2);
  // The old workspace may still be read by queued kernels and the last upload: cudaFree waits
  // for the device, and the event for the upload.
  if (uploaded_ != nullptr) NVLLM_CUDA_CHECK(cudaEventSynchronize(uploaded_));
  if (device_workspace_ != nullptr) NVLLM_CUDA_CHECK(cudaFree(device_workspace_));
  if (host_workspace_ != nullptr) NVLLM_CUDA_CHECK(cudaFreeHost(host_workspace_));
  device_workspace_ = host_workspace_ = nullptr;
  workspace_bytes_ = 0;
  NVLLM_CUDA_CHECK(cudaMalloc(&device_workspace_, bytes));
  NVLLM_CUDA_CHECK(cudaMallocHost(&host_workspace_, bytes));
  workspace_bytes_ = bytes;
  if (uploaded_ == nullptr) {
    NVLLM_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded_, cudaEventDisableTiming));
  }
}

bool HopperPrefillAttention::plan(const PlanKey& key, cudaStream_t stream) {
  const int num_seqs = static_cast<int>(key.context_lens.size());
  const int num_rows = key.cu_seqlens_q.back();
  int device = 0;
  int num_sms = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  NVLLM_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device));
  // Eight arrays of one int32 per work item (a query tile of a head), each 16-byte aligned,
  // and one of num_sms + 1 CTA starts.
  const int tile = query_tile_rows(key.head_dim);
  const size_t works =
      static_cast<size_t>(key.num_heads) * ((num_rows + tile - 1) / tile + num_seqs);
  reserve(8 * (works * sizeof(int32_t) + 16) + (num_sms + 1) * sizeof(int32_t) + 16);
  // The last plan's upload reads the page-locked buffer asynchronously.
  NVLLM_CUDA_CHECK(cudaEventSynchronize(uploaded_));

  std::vector<int32_t> query_starts = key.cu_seqlens_q;
  std::vector<int32_t> context_lens = key.context_lens;
  // Sequence s's pages are row s of the block table.
  std::vector<int32_t> page_list_starts(num_seqs + 1);
  for (int s = 0; s <= num_seqs; ++s) page_list_starts[s] = s * key.block_table_stride;
  flashinfer::PrefillPlanSM90Info info;
  NVLLM_CUDA_CHECK(flashinfer::PrefillSM90Plan<int32_t>(
      /*float_buffer=*/nullptr, 0, device_workspace_, host_workspace_, workspace_bytes_, info,
      query_starts.data(), page_list_starts.data(), context_lens.data(), num_rows, num_seqs,
      key.num_heads, key.num_kv_heads, key.head_dim, key.head_dim, key.block_size,
      /*causal=*/true, /*enable_cuda_graph=*/false, /*sizeof_dtype_o=*/2, stream));
  NVLLM_CUDA_CHECK(cudaEventRecord(uploaded_, stream));
  offsets_ = {info.qo_tile_indices_offset, info.qo_indptr_offset,  info.kv_indptr_offset,
              info.qo_len_offset,          info.kv_len_offset,     info.head_indices_offset,
              info.batch_indices_offset,   info.work_indptr_offset};
  // One schedule shared by all heads (past ~4096 tiles a head) is a kernel variant not built.
  return !info.same_schedule_for_all_heads;
}

bool HopperPrefillAttention::run(const PagedAttentionArgs& args, const int32_t* host_cu_seqlens_q,
                                 const int32_t* host_context_lens, cudaStream_t stream) {
  NVLLM_CHECK(supports(args, 90));
  for (int s = 0; s < args.num_seqs; ++s) {
    const int q_len = host_cu_seqlens_q[s + 1] - host_cu_seqlens_q[s];
    if (q_len > 0 && host_context_lens[s] < q_len) return false;  // rows with no keys to see
  }
  PlanKey key;
  key.cu_seqlens_q.assign(host_cu_seqlens_q, host_cu_seqlens_q + args.num_seqs + 1);
  key.context_lens.assign(host_context_lens, host_context_lens + args.num_seqs);
  key.num_heads = args.num_heads;
  key.num_kv_heads = args.num_kv_heads;
  key.head_dim = args.head_dim;
  key.block_size = args.block_size;
  key.block_table_stride = args.block_table_stride;
  if (!has_plan_ || !key.same_as(planned_)) {
    has_plan_ = false;
    plan_fits_ = plan(key, stream);
    planned_ = std::move(key);
    has_plan_ = true;
  }
  if (!plan_fits_) return false;

  using Bf16 = cutlass::bfloat16_t;
  const auto work_array = [&](int i) {
    return reinterpret_cast<int32_t*>(static_cast<char*>(device_workspace_) + offsets_[i]);
  };
  const int64_t kv_row = static_cast<int64_t>(args.num_kv_heads) * args.head_dim;
  hopper_prefill::Params p{};
  p.q_ptr = static_cast<Bf16*>(const_cast<void*>(args.qkv));
  p.k_ptr = static_cast<Bf16*>(const_cast<void*>(args.k_cache));
  p.v_ptr = static_cast<Bf16*>(const_cast<void*>(args.v_cache));
  p.o_ptr = static_cast<Bf16*>(args.out);
  p.lse_ptr = nullptr;
  p.qo_tile_indices = work_array(0);
  p.qo_indptr = work_array(1);
  p.kv_indptr = work_array(2);
  p.qo_lens = work_array(3);
  p.kv_lens = work_array(4);
  p.head_indices = work_array(5);
  p.batch_indices = work_array(6);
  p.work_indptr = work_array(7);
  p.kv_indices = const_cast<int32_t*>(args.block_tables);
  p.additional_params.sm_scale = args.scale;
  p.additional_params.logits_soft_cap = 0.0f;
  p.q_stride_n = args.qkv_row_stride;
  p.q_stride_h = args.head_dim;
  p.o_stride_n = args.out_row_stride;
  p.o_stride_h = args.head_dim;
  p.k_stride_n = p.v_stride_n = kv_row;
  p.k_stride_h = p.v_stride_h = args.head_dim;
  p.k_page_stride = p.v_page_stride = kv_row * args.block_size;
  p.nnz_qo = args.num_tokens;
  p.num_qo_heads = args.num_heads;
  p.num_kv_heads = args.num_kv_heads;
  p.group_size = args.num_heads / args.num_kv_heads;
  p.page_size = args.block_size;
  p.window_left = -1;
  p.causal = true;
  // Blocks of whole 128-key tiles: K/V tiles by TMA through the block table.
  const int64_t num_slots = args.num_blocks * args.block_size;
  if (args.head_dim == 128 && args.block_size % 128 == 0 && num_slots > 0 &&
      num_slots <= INT32_MAX) {
    NVLLM_CUDA_CHECK(hopper_prefill::launch_head_dim_128_paged_tma(p, num_slots, stream));
    return true;
  }
  NVLLM_CUDA_CHECK(args.head_dim == 64 ? hopper_prefill::launch_head_dim_64(p, stream)
                                       : hopper_prefill::launch_head_dim_128(p, stream));
  return true;
}

}  // namespace nanovllm::cuda
