// The experts' down GEMM over moe_align's tiles, the routing weight in the epilogue
// (moe_grouped_gemm.cuh), in bf16 and f16 at the decode and prefill tile shapes.
#include "core/check.h"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/moe/moe_grouped_gemm.cuh"

namespace nanovllm::cuda {
namespace {

template <typename T>
void launch_down(const MoeGemmArgs& args, const void* act, const float* weights, const void* down,
                 void* weighted, cudaStream_t stream) {
  moe::GemmParams<T> p{};
  p.a = static_cast<const T*>(act);
  p.a_stride = args.intermediate;
  p.weight = static_cast<const T*>(down);
  p.route_weights = weights;
  p.sorted_pairs = args.map.sorted_pairs;
  p.tile_experts = args.map.tile_experts;
  p.num_tiles = args.map.num_tiles;
  p.out = static_cast<T*>(weighted);
  p.top_k = 1;
  p.n = static_cast<int>(args.hidden);
  p.k = static_cast<int>(args.intermediate);
  p.max_tiles = static_cast<int>(args.map.max_tiles);
  // The CTA orders of moe_gate_up, for the same reasons.
  if (args.tiles == MoeTiles::kPrefill) {
    moe::launch_grouped_gemm<T, moe::PrefillDownShape, false>(p, false, stream);
  } else if (args.tiles == MoeTiles::kDecodeWide) {
    moe::launch_grouped_gemm<T, moe::DecodeWideDownShape, false>(p, true, stream);
  } else if (args.pairs >= moe::kShallowDownFromPairs) {
    moe::launch_grouped_gemm<T, moe::DecodeDownShallowShape, false>(p, true, stream);
  } else {
    moe::launch_grouped_gemm<T, moe::DecodeDownShape, false>(p, true, stream);
  }
}

}  // namespace

void moe_down(const MoeGemmArgs& args, const void* act, const float* weights, const void* down,
              void* weighted, cudaStream_t stream) {
  moe::check_gemm_args(args, "moe_down");
  NVLLM_CHECK_MSG(aligned_to(act, 16) && aligned_to(down, 16) && aligned_to(weighted, 16),
                  "moe_down: operands must be 16-byte aligned");
  if (args.pairs == 0) return;
  if (args.dtype == DType::kBF16) {
    launch_down<__nv_bfloat16>(args, act, weights, down, weighted, stream);
  } else {
    launch_down<__half>(args, act, weights, down, weighted, stream);
  }
}

}  // namespace nanovllm::cuda
