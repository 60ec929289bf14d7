// The CUDA backend's fused q/k norm + rotary + KV store against the CPU backend running the two
// ops it fuses (qk_norm_rope, then store_kv) on the same inputs, in f32, bf16 and f16.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "core/buffer.h"
#include "cuda_test_util.h"
#include "kernels/backend.h"

namespace nanovllm::test {
namespace {

class CudaFusedOpsTest : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { NVLLM_REQUIRE_CUDA(); }
  std::mt19937 rng_{7};
};

TEST_P(CudaFusedOpsTest, QkNormRopeStoreKvEqualsTheTwoOps) {
  const DType dtype = GetParam();
  auto gpu = make_cuda_backend(dtype);
  auto cpu = make_cpu_backend(2);
  // Decode-like (1 token) and prefill-like batches; Qwen3-0.6B heads, GQA 4, head counts that
  // leave a warp's heads part-filled (9 + 2 x 3 and 32 + 2 x 4), odd head_dim.
  for (const auto& [dims, tokens] : {std::pair{AttentionDims{16, 8, 128}, int64_t{1}},
                                     std::pair{AttentionDims{16, 8, 128}, int64_t{37}},
                                     std::pair{AttentionDims{8, 2, 64}, int64_t{13}},
                                     std::pair{AttentionDims{9, 3, 128}, int64_t{29}},
                                     std::pair{AttentionDims{32, 4, 128}, int64_t{100}},
                                     std::pair{AttentionDims{3, 1, 6}, int64_t{5}}}) {
    const int64_t width = dims.qkv_size();
    const int64_t num_blocks = 7, block_size = 16, max_positions = 300;
    const std::vector<float> qkv = round_to(dtype, random_floats(tokens * width, rng_, -2, 2));
    const std::vector<float> q_norm = round_to(dtype, random_floats(dims.head_dim, rng_, 0.5, 1.5));
    const std::vector<float> k_norm = round_to(dtype, random_floats(dims.head_dim, rng_, 0.5, 1.5));
    const int64_t cache_elements = num_blocks * block_size * dims.kv_size();
    const std::vector<float> k_init = round_to(dtype, random_floats(cache_elements, rng_));
    const std::vector<float> v_init = round_to(dtype, random_floats(cache_elements, rng_));
    const std::vector<float> table = rotary_table(max_positions, dims.head_dim);
    std::vector<int32_t> positions(tokens), slots(num_blocks * block_size);
    std::uniform_int_distribution<int32_t> position(0, max_positions - 1);
    for (int32_t& p : positions) p = position(rng_);
    std::iota(slots.begin(), slots.end(), 0);
    std::shuffle(slots.begin(), slots.end(), rng_);
    slots.resize(tokens);
    slots[tokens / 2] = -1;  // a skipped row

    const std::initializer_list<int64_t> cache_shape = {num_blocks, block_size, dims.num_kv_heads,
                                                        dims.head_dim};
    OwnedTensor c_qkv = host_floats({tokens, width}, qkv);
    OwnedTensor c_qn = host_floats({dims.head_dim}, q_norm);
    OwnedTensor c_kn = host_floats({dims.head_dim}, k_norm);
    OwnedTensor c_pos = host_ints({tokens}, positions);
    OwnedTensor c_table = host_floats({max_positions, dims.head_dim}, table);
    OwnedTensor c_slots = host_ints({tokens}, slots);
    OwnedTensor c_k = host_floats(cache_shape, k_init);
    OwnedTensor c_v = host_floats(cache_shape, v_init);
    AttentionMetadata c_meta;
    c_meta.slot_mapping = c_slots.tensor;
    cpu->qk_norm_rope(c_qkv.tensor, c_qn.tensor, c_kn.tensor, c_pos.tensor, c_table.tensor, 1e-6f,
                      dims);
    cpu->store_kv(c_qkv.tensor, {c_k.tensor, c_v.tensor}, c_meta, dims);

    DeviceTensor g_qkv = upload_floats(*gpu, dtype, {tokens, width}, qkv);
    DeviceTensor g_qn = upload_floats(*gpu, dtype, {dims.head_dim}, q_norm);
    DeviceTensor g_kn = upload_floats(*gpu, dtype, {dims.head_dim}, k_norm);
    DeviceTensor g_pos = upload_ints(*gpu, {tokens}, positions);
    DeviceTensor g_table = upload_floats(*gpu, DType::kF32, {max_positions, dims.head_dim}, table);
    DeviceTensor g_slots = upload_ints(*gpu, {tokens}, slots);
    DeviceTensor g_k = upload_floats(*gpu, dtype, cache_shape, k_init);
    DeviceTensor g_v = upload_floats(*gpu, dtype, cache_shape, v_init);
    AttentionMetadata g_meta;
    g_meta.slot_mapping = g_slots.tensor();
    gpu->qk_norm_rope_store_kv(g_qkv.tensor(), g_qn.tensor(), g_kn.tensor(), g_pos.tensor(),
                               g_table.tensor(), 1e-6f, dims, {g_k.tensor(), g_v.tensor()}, g_meta);

    const std::string what = std::string(dtype_label(dtype)) + " heads " +
                             std::to_string(dims.num_heads) + "/" +
                             std::to_string(dims.num_kv_heads) + " d " +
                             std::to_string(dims.head_dim) + " tokens " + std::to_string(tokens);
    const double tolerance = relative_tolerance(dtype);
    expect_relative_error(download_floats(*gpu, g_qkv.tensor()), values_of(c_qkv.tensor), tolerance,
                          "qkv " + what);
    expect_relative_error(download_floats(*gpu, g_k.tensor()), values_of(c_k.tensor), tolerance,
                          "k cache " + what);
    // v is copied, never rounded: exact.
    EXPECT_EQ(download_floats(*gpu, g_v.tensor()), values_of(c_v.tensor)) << "v cache " << what;
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaFusedOpsTest,
                         ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_label(info.param)); });

}  // namespace
}  // namespace nanovllm::test
