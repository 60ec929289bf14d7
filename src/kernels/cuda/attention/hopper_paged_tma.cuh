// FlashInfer's sm90 prefill kernel with K/V tiles brought in by TMA through the block table, for
// blocks that hold whole tiles (block_size a multiple of the tile's keys). FlashInfer's paged
// mainloop gathers K/V row by row with cp.async from a producer warpgroup; its TMA mainloop
// serves only K/V laid out contiguously per sequence. This one derives from the latter and
// changes where a tile comes from: the K and V descriptors span every slot of the cache
// ([slots, kv heads, head_dim]), and key tile t of a sequence is the cache's tile
// block_table[t / tiles_per_block] * tiles_per_block + t % tiles_per_block. The pipeline's
// order of loads is the one the kernel's consumers expect (FlashInfer's hopper/mainloop.cuh).
// A whole tile comes in where a sequence's keys end inside it: the slots past the end are
// zeroed first (zero_past_context).
// Device code: include from .cu files only.
#pragma once

#include <flashinfer/attention/hopper/epilogue.cuh>
#include <flashinfer/attention/hopper/mainloop.cuh>
#include <flashinfer/attention/hopper/prefill_sm90.cuh>
#include <flashinfer/attention/hopper/tile_scheduler.cuh>
#include <flashinfer/attention/hopper/utils.cuh>

#include "kernels/cuda/attention/hopper_prefill_kernels.cuh"

namespace nanovllm::cuda::hopper_prefill {

template <typename AdditionalParams, typename Ktraits>
struct PagedTmaMainloop
    : flashinfer::CollectiveMainloop<AdditionalParams, Ktraits, /*CAUSAL=*/true> {
  using Base = flashinfer::CollectiveMainloop<AdditionalParams, Ktraits, true>;
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::SmemLayoutK;
  using typename Base::SmemLayoutQ;
  using typename Base::SmemLayoutV;
  using typename Base::TileShape_PDV;
  using typename Base::TileShape_QKD;

  using DTypeKV = typename Ktraits::DTypeKV;

  struct Arguments {
    typename Base::Arguments tma;  // K and V over every slot of the cache
    const int32_t* block_table;    // a work item's kv_indptr is where its sequence's row starts
    int block_size;                // a multiple of CTA_KV
    DTypeKV* k_cache;              // [slots, kv heads, head_dim], as the descriptors see it
    DTypeKV* v_cache;
  };
  struct Params : Base::Params {
    const int32_t* block_table;
    int block_size;
    DTypeKV* k_cache;
    DTypeKV* v_cache;
  };

  static Params to_underlying_arguments(const Arguments& args) {
    return Params{Base::to_underlying_arguments(args.tma), args.block_table, args.block_size,
                  args.k_cache, args.v_cache};
  }

  // The tile holding a sequence's last key also holds the slots past it, which TMA brings in
  // with the rest and which nothing has written (the cache's other kernels never read them).
  // The mask gives their scores no weight, but 0 x V is NaN where stale V is not finite: the
  // warp zeroes the slots [kv_len, tile_end) of its kv head first. They are the sequence's own
  // (a shared prefix block is full), and every CTA on the tile writes the same zeros.
  CUTLASS_DEVICE static void zero_past_context(const Params& params, const int32_t* pages,
                                               int kv_head, int kv_len, int tile_end) {
    constexpr int kVectorsPerRow = Base::HEAD_DIM_QK * sizeof(DTypeKV) / sizeof(uint4);
    const int rows = tile_end - kv_len;
    if (rows <= 0) return;
    for (int i = static_cast<int>(threadIdx.x % 32); i < rows * kVectorsPerRow; i += 32) {
      const int position = kv_len + i / kVectorsPerRow;
      const int64_t slot =
          static_cast<int64_t>(__ldg(pages + position / params.block_size)) * params.block_size +
          position % params.block_size;
      const int64_t column = (i % kVectorsPerRow) * (sizeof(uint4) / sizeof(DTypeKV));
      const auto zero = [&](DTypeKV* cache, const auto& layout) {
        const int64_t element = slot * cute::get<0>(layout.stride()) +
                                static_cast<int64_t>(kv_head) * cute::get<2>(layout.stride()) +
                                column;
        *reinterpret_cast<uint4*>(cache + element) = make_uint4(0, 0, 0, 0);
      };
      zero(params.k_cache, params.layout_K);
      zero(params.v_cache, params.layout_V);
    }
    // The zeros reach global memory before this warp's TMA loads read it (the async proxy).
    asm volatile("fence.proxy.async.global;\n" ::: "memory");
    __syncwarp();
  }

  // Loads one work item's Q and its key tiles, the last first (where the causal mask falls), K
  // one tile ahead of V: the order of FlashInfer's TMA mainloop, which the consumers follow.
  template <bool LEFT_SLIDING_WINDOW, typename BlockCoord, typename Scheduler,
            typename SharedStorage>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline_k,
                           MainloopPipeline pipeline_v, PipelineState& write_k,
                           PipelineState& write_v, SharedStorage& shared_storage,
                           Scheduler& scheduler, typename Scheduler::Params const& scheduler_params,
                           typename Scheduler::WorkTileInfo& work_tile_info,
                           BlockCoord const& block_coord, int work_idx) {
    static_assert(!LEFT_SLIDING_WINDOW, "no sliding window here");
    using namespace cute;
    Tensor sQ = make_tensor(make_smem_ptr(shared_storage.smem_q.data()), SmemLayoutQ{});
    Tensor sK = make_tensor(make_smem_ptr(shared_storage.smem_k.data()), SmemLayoutK{});
    Tensor sV = make_tensor(make_smem_ptr(shared_storage.smem_v.data()), SmemLayoutV{});
    Tensor mQ = params.tma_load_Q.get_tma_tensor(params.layout_Q.shape());
    Tensor mK = params.tma_load_K.get_tma_tensor(params.layout_K.shape());
    Tensor mV = params.tma_load_V.get_tma_tensor(params.layout_V.shape());
    auto [q_tile, qo_head, kv_head, qo_start, page_list_start, qo_len, kv_len, batch] = block_coord;

    Tensor gQ = flashinfer::get_local_tile_tensor(mQ, select<0, 2>(TileShape_QKD{}), qo_head,
                                                  qo_start, qo_len)(_, _, q_tile);  // (Q, D)
    // Every tile of the cache for this kv head: (KV, D, slots / KV).
    Tensor gK = local_tile(mK(_, _, kv_head), select<1, 2>(TileShape_QKD{}), make_coord(_, _0{}));
    Tensor gV = local_tile(mV(_, _, kv_head), select<2, 1>(TileShape_PDV{}), make_coord(_, _0{}));
    Tensor sQ_x = make_tensor(sQ.data(), make_layout(sQ.layout(), Layout<_1>{}));
    Tensor gQ_x = make_tensor(gQ.data(), make_layout(gQ.layout(), Layout<_1>{}));
    auto [tQgQ, tQsQ] = tma_partition(params.tma_load_Q, _0{}, Layout<_1>{},
                                      group_modes<0, 2>(sQ_x), group_modes<0, 2>(gQ_x));
    auto [tKgK, tKsK] = tma_partition(params.tma_load_K, _0{}, Layout<_1>{}, group_modes<0, 2>(sK),
                                      group_modes<0, 2>(gK));
    auto [tVgV, tVsV] = tma_partition(params.tma_load_V, _0{}, Layout<_1>{}, group_modes<0, 2>(sV),
                                      group_modes<0, 2>(gV));

    const int32_t* pages = params.block_table + page_list_start;
    const int tiles_per_block = params.block_size / Base::CTA_KV;
    const auto cache_tile = [&](int t) {
      return __ldg(pages + t / tiles_per_block) * tiles_per_block + t % tiles_per_block;
    };
    const auto load_k = [&](int t) {
      pipeline_k.producer_acquire(write_k);
      copy(params.tma_load_K.with(*pipeline_k.producer_get_barrier(write_k), /*mcast_mask=*/0),
           tKgK(_, cache_tile(t)), tKsK(_, write_k.index()));
      ++write_k;
    };
    const auto load_v = [&](int t) {
      pipeline_v.producer_acquire(write_v);
      copy(params.tma_load_V.with(*pipeline_v.producer_get_barrier(write_v), /*mcast_mask=*/0),
           tVgV(_, cache_tile(t)), tVsV(_, write_v.index()));
      ++write_v;
    };

    int tile = this->get_num_kv_tiles(params, q_tile, qo_len, kv_len) - 1;
    zero_past_context(params, pages, kv_head, kv_len, (tile + 1) * Base::CTA_KV);
    const int lane_predicate = cute::elect_one_sync();
    if (lane_predicate) load_k(tile);
    // The consumers release Q's shared memory, then Q's TMA goes out.
    cutlass::arch::NamedBarrier::sync(Base::NUM_MMA_THREADS + Ktraits::NUM_PRODUCER_THREADS,
                                      static_cast<int>(flashinfer::NamedBarriers::kQueryEmpty));
    if (lane_predicate) {
      shared_storage.barrier_Q.arrive_and_expect_tx(Base::TmaTransactionBytesQ);
      copy(params.tma_load_Q.with(
               reinterpret_cast<cutlass::arch::ClusterTransactionBarrier::ValueType&>(
                   shared_storage.barrier_Q),
               /*mcast_mask=*/0),
           tQgQ, tQsQ);
    }
    // V shares its shared memory with the last work item's output: wait for its store.
    shared_storage.barrier_O.wait((work_idx + 1) % 2);
    if (lane_predicate) {
#pragma unroll 2
      for (; tile > 0; --tile) {
        load_k(tile - 1);
        load_v(tile);
      }
    }
    scheduler.prefetch_next_work(scheduler_params, work_tile_info);
    if (lane_predicate) load_v(tile);
    scheduler.broadcast_next_work(work_tile_info);
  }
};

// Causal attention over the planned work list of `params` with Traits' tiles (USE_TMA_LOAD_KV),
// K and V read through the block table from a cache of `num_slots` slots.
template <typename Traits>
cudaError_t launch_paged_tma(Params& params, int64_t num_slots, cudaStream_t stream) {
  using Mainloop = PagedTmaMainloop<typename Params::AdditionalParams, Traits>;
  using Epilogue = flashinfer::CollectiveEpilogue<Traits>;
  using Scheduler = flashinfer::BatchPrefillPersistentTileScheduler<int32_t>;
  constexpr int kDim = Traits::HEAD_DIM_QK;
  const int slots = static_cast<int>(num_slots);
  typename Mainloop::Params mainloop_params = Mainloop::to_underlying_arguments(
      {{params.q_ptr,
        flashinfer::get_gmem_layout(params.nnz_qo, params.num_qo_heads, kDim, params.q_stride_n,
                                    params.q_stride_h),
        params.k_ptr,
        flashinfer::get_gmem_layout(slots, params.num_kv_heads, kDim, params.k_stride_n,
                                    params.k_stride_h),
        params.v_ptr,
        flashinfer::get_gmem_layout(slots, params.num_kv_heads, kDim, params.v_stride_n,
                                    params.v_stride_h),
        params.window_left, params.additional_params},
       params.kv_indices,
       static_cast<int>(static_cast<uint32_t>(params.page_size)),
       params.k_ptr,
       params.v_ptr});
  typename Epilogue::Params epilogue_params = Epilogue::to_underlying_arguments(
      {params.o_ptr,
       flashinfer::get_gmem_layout(params.nnz_qo, params.num_qo_heads, kDim, params.o_stride_n,
                                   params.o_stride_h),
       params.lse_ptr, flashinfer::get_lse_gmem_layout(params.nnz_qo, params.num_qo_heads)});
  typename Scheduler::Arguments scheduler_args = {
      params.work_indptr,
      params.head_indices,
      params.qo_tile_indices,
      params.qo_indptr,
      params.kv_indptr,
      params.qo_lens,
      params.kv_lens,
      params.batch_indices,
      cutlass::FastDivmod(params.num_qo_heads / params.num_kv_heads),
      params.num_qo_heads};
  typename Scheduler::Params scheduler_params = Scheduler::to_underlying_arguments(scheduler_args);
  auto* kernel = flashinfer::PrefillWithKVCacheKernel<Mainloop, Epilogue, Traits,
                                                      /*LEFT_SLIDING_WINDOW=*/false,
                                                      /*CAUSAL=*/true, Scheduler>;
  const int smem = static_cast<int>(sizeof(typename Traits::SharedStorage));
  cudaError_t status =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  if (status != cudaSuccess) return status;
  int device = 0, num_sms = 0;
  status = cudaGetDevice(&device);
  if (status != cudaSuccess) return status;
  status = cudaDeviceGetAttribute(&num_sms, cudaDevAttrMultiProcessorCount, device);
  if (status != cudaSuccess) return status;
  void* args[] = {&mainloop_params, &epilogue_params, &scheduler_params};
  return cudaLaunchKernel(reinterpret_cast<void*>(kernel),
                          Scheduler::get_grid_dim(scheduler_args, num_sms),
                          dim3(Traits::NUM_WARPS * 32), args, smem, stream);
}

}  // namespace nanovllm::cuda::hopper_prefill
