// The experts' gate_up GEMM over moe_align's tiles, SiLU * up in the epilogue
// (moe_grouped_gemm.cuh), in bf16 and f16 at the decode and prefill tile shapes.
#include "core/check.h"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/moe/moe_grouped_gemm.cuh"

namespace nanovllm::cuda {
namespace {

template <typename T>
void launch_gate_up(const MoeGemmArgs& args, const void* x, int64_t x_stride, const void* gate_up,
                    void* act, cudaStream_t stream) {
  moe::GemmParams<T> p{};
  p.a = static_cast<const T*>(x);
  p.a_stride = x_stride;
  p.weight = static_cast<const T*>(gate_up);
  p.sorted_pairs = args.map.sorted_pairs;
  p.tile_experts = args.map.tile_experts;
  p.num_tiles = args.map.num_tiles;
  p.out = static_cast<T*>(act);
  p.top_k = args.top_k;
  p.n = static_cast<int>(args.intermediate);
  p.k = static_cast<int>(args.hidden);
  p.max_tiles = static_cast<int>(args.map.max_tiles);
  // Decode: the row tiles of one column tile side by side, so that the few tiles of an expert
  // read its weights from DRAM once, together. Prefill: the column tiles of a row tile side by
  // side, so that its gathered x rows and its expert's weights stay in L2 between them.
  if (args.tiles == MoeTiles::kPrefill) {
    moe::launch_grouped_gemm<T, moe::PrefillGateUpShape, true>(p, false, stream);
  } else if (args.tiles == MoeTiles::kDecodeWide) {
    moe::launch_grouped_gemm<T, moe::DecodeWideGateUpShape, true>(p, true, stream);
  } else if (args.pairs < moe::kNarrowGateUpBelowPairs) {
    moe::launch_grouped_gemm<T, moe::DecodeGateUpNarrowShape, true>(p, true, stream);
  } else {
    moe::launch_grouped_gemm<T, moe::DecodeGateUpShape, true>(p, true, stream);
  }
}

}  // namespace

void moe_gate_up(const MoeGemmArgs& args, const void* x, int64_t x_stride, const void* gate_up,
                 void* act, cudaStream_t stream) {
  moe::check_gemm_args(args, "moe_gate_up");
  NVLLM_CHECK_MSG(
      aligned_to(x, 16) && x_stride % 8 == 0 && aligned_to(gate_up, 16) && aligned_to(act, 16),
      "moe_gate_up: operands must be 16-byte aligned, x's rows a multiple of 8 apart");
  if (args.pairs == 0) return;
  if (args.dtype == DType::kBF16) {
    launch_gate_up<__nv_bfloat16>(args, x, x_stride, gate_up, act, stream);
  } else {
    launch_gate_up<__half>(args, x, x_stride, gate_up, act, stream);
  }
}

}  // namespace nanovllm::cuda
