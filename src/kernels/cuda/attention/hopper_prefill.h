// bf16 prefill attention on Hopper (sm_90) through FlashInfer's sm90 kernels: wgmma from shared
// memory, a producer bringing K/V tiles in through the block table while two consumer
// warpgroups run QK^T, the online softmax and PV, causal masking on the diagonal tiles only,
// persistent CTAs over a work list planned on the host (longest tiles first). At head_dim 128
// with blocks of whole 128-key tiles (the engine's 256) the tiles come by TMA
// (hopper_paged_tma.cuh): 0.95 to 1.08x FlashAttention-3 on one long prompt over three H100
// calls, where FlashInfer's cp.async gather (the other geometries) reached 0.81 to 0.92x.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/cuda/attention/attention.h"

namespace nanovllm::cuda {

// One device's Hopper prefill attention and the workspace of its work list. The plan of a
// batch (which CTA takes which (query tile, head)) depends only on the query lengths, the
// context lengths and the geometry: it is made and uploaded once and reused by every layer's
// call while those stay the same.
class HopperPrefillAttention {
 public:
  HopperPrefillAttention() = default;
  ~HopperPrefillAttention();
  HopperPrefillAttention(const HopperPrefillAttention&) = delete;
  HopperPrefillAttention& operator=(const HopperPrefillAttention&) = delete;

  // Whether the kernels exist for this device and geometry: compute capability 9.0, bf16,
  // max_seqlen_q > 1, head_dim 64 or 128, q and out rows 16-byte aligned. Other batches take
  // paged_attention().
  static bool supports(const PagedAttentionArgs& args, int compute_capability);

  // Runs args given host copies of its cu_seqlens_q [num_seqs + 1] and context_lens
  // [num_seqs]. Returns false, having launched nothing, for a batch these kernels do not
  // serve: a sequence with fewer keys than query rows (decode padding has none), or more work
  // than one schedule per head covers (over about half a million query rows). On the TMA path
  // it writes zeros to a sequence's unused slots in the 128-key tile of its last key (see
  // hopper_paged_tma.cuh): they are the sequence's own, and no other op reads them.
  bool run(const PagedAttentionArgs& args, const int32_t* host_cu_seqlens_q,
           const int32_t* host_context_lens, cudaStream_t stream);

 private:
  struct PlanKey {
    std::vector<int32_t> cu_seqlens_q, context_lens;
    int num_heads = 0, num_kv_heads = 0, head_dim = 0, block_size = 0, block_table_stride = 0;
    bool same_as(const PlanKey& other) const;  // not a defaulted ==: .cu files are C++17
  };
  // Plans the batch of `key` into the workspace (growing it first if needed); false when the
  // plan shares one schedule among all heads, a kernel variant not built.
  bool plan(const PlanKey& key, cudaStream_t stream);
  void reserve(size_t bytes);

  PlanKey planned_;
  bool has_plan_ = false;   // planned_ is the batch in the workspace
  bool plan_fits_ = false;  // ... and these kernels serve it
  // Byte offsets in the workspace of the plan's arrays (FlashInfer's PrefillPlanSM90Info):
  // query tile, query start, page list start, query length, context length, head, batch
  // index of each work item, and each CTA's first work item.
  std::array<int64_t, 8> offsets_{};
  void* device_workspace_ = nullptr;
  void* host_workspace_ = nullptr;  // page-locked: the plan's upload reads it asynchronously
  size_t workspace_bytes_ = 0;
  cudaEvent_t uploaded_ = nullptr;  // the last plan's upload has read host_workspace_
};

}  // namespace nanovllm::cuda
