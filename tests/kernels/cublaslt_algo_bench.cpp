// How far cuBLASLt's first heuristic choice is from the best algorithm it has, at decode sizes
// (16 to 256 rows) and prefill sizes of the Qwen3 shapes' linears: every algorithm of the
// heuristic's top 32, and up to 256 rows split-K variants (2 to 16 slices) of its distinct tiles
// and the heuristic's first choice for the rows rounded up to 128 and to 256, each timed in a
// graph of back-to-back calls over weight copies that L2 cannot hold; bf16, fp32 accumulation.
// With --power, the heuristic's first four and the fastest are then each replayed for about 2 s
// with their power read from NVML: sustained, the GPU may run at its power limit, where the
// fastest algorithm is the one that spends the fewest joules, not the one fastest on a cool GPU.
//   usage: cublaslt_algo_bench [--power] [--rows R,R,...] [SHAPE...]
//          (rows 1 to 65,536; shapes 0.6b 4b 8b 14b 32b 30b-a3b qwen2.5-7b; default: all, rows
//          16 to 256)
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda_bench_util.h"
#include "kernels/cuda/runtime/cuda_check.h"
#include "power_meter.h"
#include "qwen3_linears.h"

namespace nanovllm {
namespace {

using namespace bench;

constexpr int kDefaultRows[] = {16, 32, 64, 128, 256};
constexpr size_t kWorkspaceBytes = size_t{32} << 20;
constexpr int kMaxRows = 65536;
constexpr int kMaxDecodeRows = 256;  // past this no split-K or rounded-rows candidates
constexpr double kPowerSeconds = 2.0;

// The attribute's value, or -1 where this cuBLASLt does not report it.
template <typename T>
int64_t algo_config(const cublasLtMatmulAlgo_t& algo,
                    cublasLtMatmulAlgoConfigAttributes_t attribute) {
  T value{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attribute, &value, sizeof(value), &written) !=
      CUBLAS_STATUS_SUCCESS) {
    return -1;
  }
  return static_cast<int64_t>(value);
}

std::string describe(const cublasLtMatmulAlgo_t& algo) {
  return "id " + std::to_string(algo_config<int>(algo, CUBLASLT_ALGO_CONFIG_ID)) + " tile " +
         std::to_string(algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) + " stages " +
         std::to_string(algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)) + " splitK " +
         std::to_string(algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) +
         " reduction " +
         std::to_string(algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)) +
         " swizzle " +
         std::to_string(algo_config<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)) +
         " cluster " +
         std::to_string(algo_config<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

int run(cudaStream_t stream, const cudaDeviceProp& properties, std::vector<std::string> wanted,
        std::vector<int> all_rows, const PowerMeter* meter) {
  std::mt19937 rng(1);
  const double bandwidth = copy_bandwidth(stream);
  std::printf("%s: copy %.0f GB/s\n", properties.name, bandwidth);
  cublasLtHandle_t handle;
  NVLLM_CUBLAS_CHECK(cublasLtCreate(&handle));
  DeviceBuffer workspace(kWorkspaceBytes);
  const int max_rows = *std::max_element(all_rows.begin(), all_rows.end());
  for (const Qwen3Shape& shape : kQwen3Shapes) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), shape.name) == wanted.end()) {
      continue;
    }
    for (const Linear& l : linears_of(shape)) {
      if (l.logits) continue;
      const size_t weight_bytes = size_t{2} * l.n * l.k;
      const int copies = static_cast<int>(
          std::clamp<size_t>((kMinBytesPerRun + weight_bytes - 1) / weight_bytes, 1, 16));
      DeviceBuffer weights(weight_bytes * copies), x(size_t{2} * max_rows * l.k),
          out(size_t{2} * max_rows * l.n);
      fill_random_bf16(weights.get(), weights.bytes(), rng);
      fill_random_bf16(x.get(), x.bytes(), rng);
      for (int rows : all_rows) {
        cublasLtMatmulDesc_t op;
        NVLLM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
        const cublasOperation_t transpose = CUBLAS_OP_T, as_is = CUBLAS_OP_N;
        NVLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                          &transpose, sizeof(transpose)));
        NVLLM_CUBLAS_CHECK(
            cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &as_is, sizeof(as_is)));
        cublasLtMatrixLayout_t a, b, c;
        NVLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16BF, l.k, l.n, l.k));
        NVLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16BF, l.k, rows, l.k));
        NVLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c, CUDA_R_16BF, l.n, rows, l.n));
        cublasLtMatmulPreference_t preference;
        NVLLM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
        const uint64_t max_workspace = kWorkspaceBytes;
        NVLLM_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
            preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace,
            sizeof(max_workspace)));
        std::vector<cublasLtMatmulHeuristicResult_t> results(32);
        int count = 0;
        NVLLM_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(handle, op, a, b, c, c, preference, 32,
                                                          results.data(), &count));
        std::vector<cublasLtMatmulAlgo_t> candidates;
        std::set<std::pair<int64_t, int64_t>> tiles;
        for (int i = 0; i < count; ++i) candidates.push_back(results[i].algo);
        for (int i = 0; i < count && rows <= kMaxDecodeRows; ++i) {
          const auto tile =
              std::make_pair(algo_config<uint32_t>(results[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID),
                             algo_config<int>(results[i].algo, CUBLASLT_ALGO_CONFIG_ID));
          if (!tiles.insert(tile).second) continue;
          for (uint32_t splits : {2u, 3u, 4u, 6u, 8u, 12u, 16u}) {
            for (uint32_t scheme : {uint32_t{CUBLASLT_REDUCTION_SCHEME_INPLACE},
                                    uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE}}) {
              cublasLtMatmulAlgo_t algo = results[i].algo;
              cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                   sizeof(splits));
              cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME,
                                                   &scheme, sizeof(scheme));
              cublasLtMatmulHeuristicResult_t checked{};
              if (cublasLtMatmulAlgoCheck(handle, op, a, b, c, c, &algo, &checked) ==
                      CUBLAS_STATUS_SUCCESS &&
                  checked.workspaceSize <= kWorkspaceBytes) {
                candidates.push_back(algo);
              }
            }
          }
        }
        // The first choice for more rows, where the heuristic's pick is often better.
        const size_t rounded_first = candidates.size();
        for (int more : {(rows + 127) / 128 * 128, 256}) {
          if (more <= rows || rows > kMaxDecodeRows) continue;
          cublasLtMatrixLayout_t b_more, c_more;
          NVLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&b_more, CUDA_R_16BF, l.k, more, l.k));
          NVLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&c_more, CUDA_R_16BF, l.n, more, l.n));
          cublasLtMatmulHeuristicResult_t more_result{};
          int more_count = 0;
          cublasLtMatmulHeuristicResult_t checked{};
          if (cublasLtMatmulAlgoGetHeuristic(handle, op, a, b_more, c_more, c_more, preference, 1,
                                             &more_result, &more_count) == CUBLAS_STATUS_SUCCESS &&
              more_count == 1 &&
              cublasLtMatmulAlgoCheck(handle, op, a, b, c, c, &more_result.algo, &checked) ==
                  CUBLAS_STATUS_SUCCESS &&
              checked.workspaceSize <= kWorkspaceBytes) {
            candidates.push_back(more_result.algo);
          }
          cublasLtMatrixLayoutDestroy(c_more);
          cublasLtMatrixLayoutDestroy(b_more);
        }
        const double floor_us = (weight_bytes + 2.0 * rows * (l.k + l.n)) / (bandwidth * 1e9) * 1e6;
        double first_us = 0, best_us = 1e30, top4_us = 1e30, rounded_us = 1e30;
        size_t best_index = 0;
        std::string best;
        const int calls = std::max(copies, 8);
        // Enqueues `calls` products with candidate i; false where cuBLASLt refuses it.
        const auto enqueue = [&](size_t i) {
          const float alpha = 1.0f, beta = 0.0f;
          for (int call = 0; call < calls; ++call) {
            const char* w = weights.get<char>() + (call % copies) * weight_bytes;
            if (cublasLtMatmul(handle, op, &alpha, w, a, x.get(), b, &beta, out.get(), c, out.get(),
                               c, &candidates[i], workspace.get(), kWorkspaceBytes,
                               stream) != CUBLAS_STATUS_SUCCESS) {
              return false;
            }
          }
          return true;
        };
        std::vector<bool> usable(candidates.size());
        for (size_t i = 0; i < candidates.size(); ++i) {
          usable[i] = enqueue(i);
          NVLLM_CUDA_CHECK(cudaStreamSynchronize(stream));
          if (!usable[i]) continue;
          const double us = 1e3 * time_graph_ms(stream, [&] { enqueue(i); }) / calls;
          if (i == 0) first_us = us;
          if (i < 4 && i < static_cast<size_t>(count)) top4_us = std::min(top4_us, us);
          if (i >= rounded_first) rounded_us = std::min(rounded_us, us);
          if (us < best_us) {
            best_us = us;
            best_index = i;
            best = (i < static_cast<size_t>(count) ? "heuristic #" + std::to_string(i) + " "
                    : i < rounded_first            ? std::string("split of top: ")
                                                   : std::string("first for more rows: ")) +
                   describe(candidates[i]);
          }
        }
        const double tflop = 2e-12 * rows * l.n * l.k;
        std::printf(
            "%-5s %-13s %6d x %-6d rows %5d  first %8.2f us %4.0f%% %4.0f TFLOP/s  top4 %8.2f us  "
            "rounded %8.2f us  best %8.2f us %4.0f%% %4.0f TFLOP/s  (%zu tried; %s) first: %s\n",
            shape.name, l.name, l.n, l.k, rows, first_us, 100 * floor_us / first_us,
            tflop / (first_us * 1e-6), top4_us, rounded_us < 1e30 ? rounded_us : 0.0, best_us,
            100 * floor_us / best_us, tflop / (best_us * 1e-6), candidates.size(), best.c_str(),
            describe(candidates[0]).c_str());
        for (size_t i = 0; meter != nullptr && i < candidates.size(); ++i) {
          if (!usable[i] || (i >= 4 && i != best_index)) continue;
          const CapturedOps ops(stream, [&] { enqueue(i); });
          const PowerSample p = meter->measure(ops.exec(), stream, kPowerSeconds);
          const double us = p.ms_per_replay * 1e3 / calls;
          std::printf(
              "  sustained #%zu: %8.2f us %4.0f TFLOP/s  %4.0f W  %4d MHz  %6.3f mJ a call%s\n", i,
              us, tflop / (us * 1e-6), p.watts, p.sm_mhz, p.millijoules_per_replay() / calls,
              i == best_index ? "  (fastest cool)" : "");
        }
        std::fflush(stdout);
        cublasLtMatmulPreferenceDestroy(preference);
        cublasLtMatrixLayoutDestroy(c);
        cublasLtMatrixLayoutDestroy(b);
        cublasLtMatrixLayoutDestroy(a);
        cublasLtMatmulDescDestroy(op);
      }
    }
  }
  cublasLtDestroy(handle);
  return 0;
}

}  // namespace
}  // namespace nanovllm

int main(int argc, char** argv) {
  std::vector<int> rows(std::begin(nanovllm::kDefaultRows), std::end(nanovllm::kDefaultRows));
  std::vector<std::string> wanted;
  bool power = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--power") {
      power = true;
    } else if (std::string(argv[i]) == "--rows") {
      rows.clear();
      for (const char* p = i + 1 < argc ? argv[++i] : ""; *p != '\0' || rows.empty();) {
        char* end = nullptr;
        const long value = std::strtol(p, &end, 10);
        if (end == p || value < 1 || value > nanovllm::kMaxRows) {
          std::fprintf(stderr, "cublaslt_algo_bench: --rows takes 1 to %d, comma-separated\n",
                       nanovllm::kMaxRows);
          return 2;
        }
        rows.push_back(static_cast<int>(value));
        p = *end == ',' ? end + 1 : end;
      }
    } else {
      wanted.emplace_back(argv[i]);
    }
  }
  return nanovllm::bench::bench_main(
      "cublaslt_algo_bench", [&](cudaStream_t stream, const cudaDeviceProp& properties) {
        int device = 0;
        NVLLM_CUDA_CHECK(cudaGetDevice(&device));
        const nanovllm::bench::PowerMeter meter(device);
        if (power && !meter.available()) {
          std::fprintf(stderr, "cublaslt_algo_bench: NVML's energy counter cannot be read here\n");
          return 1;
        }
        return nanovllm::run(stream, properties, wanted, rows, power ? &meter : nullptr);
      });
}
