// out = x @ W^T in fp32. Few rows (decode) stream W once through dot products; more rows go
// through a packed, cache-blocked GEMM whose 6x16 micro-kernel keeps its tile in registers.
#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/tensor_checks.h"

namespace nanovllm::cpu {
namespace {

constexpr int kMR = 6;  // rows of x per micro-tile
// Rows of W (output columns) per micro-tile: the 6 x kNR accumulator tile must fit in the
// vector registers, which x86 without AVX has too few of for 16.
#if defined(__x86_64__) && !defined(__AVX__)
constexpr int kNR = 8;
#else
constexpr int kNR = 16;
#endif
constexpr int64_t kKC = 256;  // depth of a packed panel
constexpr int64_t kMC = 96;   // rows of x per task, a multiple of kMR
constexpr int64_t kNC = 128;  // rows of W per task, a multiple of kNR

// ---- few rows: dot products, W read once ------------------------------------------------

// out[r, c] = dot(x[r], w[c]) for an R x C tile; lane-split sums so the loop vectorizes.
template <int R, int C>
void dot_tile(const float* x, int64_t ldx, const float* w, int64_t ldw, int64_t depth, float* out,
              int64_t ldo) {
  constexpr int kL = 16;
  float acc[R][C][kL] = {};
  int64_t k = 0;
  for (; k + kL <= depth; k += kL) {
    for (int r = 0; r < R; ++r) {
      for (int c = 0; c < C; ++c) {
        for (int l = 0; l < kL; ++l) acc[r][c][l] += x[r * ldx + k + l] * w[c * ldw + k + l];
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int c = 0; c < C; ++c) {
      float sum = 0.0f;
      for (int l = 0; l < kL; ++l) sum += acc[r][c][l];
      for (int64_t kk = k; kk < depth; ++kk) sum += x[r * ldx + kk] * w[c * ldw + kk];
      out[r * ldo + c] = sum;
    }
  }
}

// Rows [0, R) of x against W rows [n_begin, n_end).
template <int R>
void dot_rows(const float* x, const float* w, int64_t depth, float* out, int64_t ldo,
              int64_t n_begin, int64_t n_end) {
  constexpr int C = R == 1 ? 4 : R == 2 ? 2 : 1;
  int64_t n = n_begin;
  for (; n + C <= n_end; n += C)
    dot_tile<R, C>(x, depth, w + n * depth, depth, depth, out + n, ldo);
  for (; n < n_end; ++n) dot_tile<R, 1>(x, depth, w + n * depth, depth, depth, out + n, ldo);
}

void linear_few_rows(const float* x, const float* w, float* out, int64_t m, int64_t n, int64_t k,
                     ThreadPool& pool) {
  constexpr int64_t kChunk = 64;  // W rows per work item
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  pool.parallel_for(chunks, m * k * kChunk, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      const int64_t n_begin = chunk * kChunk;
      const int64_t n_end = std::min(n, n_begin + kChunk);
      for (int64_t r = 0; r < m;) {
        const float* x_rows = x + r * k;
        float* out_rows = out + r * n;
        switch (std::min<int64_t>(m - r, 4)) {
          case 1:
            dot_rows<1>(x_rows, w, k, out_rows, n, n_begin, n_end);
            r += 1;
            break;
          case 2:
            dot_rows<2>(x_rows, w, k, out_rows, n, n_begin, n_end);
            r += 2;
            break;
          case 3:
            dot_rows<3>(x_rows, w, k, out_rows, n, n_begin, n_end);
            r += 3;
            break;
          default:
            dot_rows<4>(x_rows, w, k, out_rows, n, n_begin, n_end);
            r += 4;
            break;
        }
      }
    }
  });
}

// ---- many rows: packed GEMM --------------------------------------------------------------

// Copies `rows` rows (leading dimension ld) by `depth` columns into tiles of `tile` rows laid
// out [tile index][depth][tile], zero-padding the last tile, so the micro-kernel reads both
// operands sequentially.
template <int tile>
void pack(const float* src, int64_t ld, int64_t rows, int64_t depth, float* packed) {
  for (int64_t r0 = 0; r0 < rows; r0 += tile) {
    const int valid = static_cast<int>(std::min<int64_t>(tile, rows - r0));
    for (int r = 0; r < tile; ++r) {
      const float* row = src + (r0 + r) * ld;
      if (r < valid) {
        for (int64_t k = 0; k < depth; ++k) packed[k * tile + r] = row[k];
      } else {
        for (int64_t k = 0; k < depth; ++k) packed[k * tile + r] = 0.0f;
      }
    }
    packed += tile * depth;
  }
}

// kNR floats as one value: GCC and Clang lower it to whatever vector registers the target has
// (one zmm, two ymm, four xmm), which keeps the whole 6x16 tile in registers; plain loops over
// a float[6][16] tile get spilled to the stack by g++.
using Row = float __attribute__((vector_size(kNR * sizeof(float))));

// c[rows, cols] (+)= a_tile^T b_tile over `depth`; a: [depth][kMR], b: [depth][kNR].
void micro_kernel(const float* a, const float* b, int64_t depth, float* c, int64_t ldc, int rows,
                  int cols, bool accumulate) {
  Row acc[kMR] = {};
  for (int64_t k = 0; k < depth; ++k) {
    Row bk;
    std::memcpy(&bk, b + k * kNR, sizeof(Row));
    const float* ak = a + k * kMR;
    for (int i = 0; i < kMR; ++i) acc[i] += ak[i] * bk;
  }
  for (int i = 0; i < rows; ++i) {
    float tile_row[kNR];
    std::memcpy(tile_row, &acc[i], sizeof(Row));
    float* c_row = c + i * ldc;
    if (accumulate) {
      for (int j = 0; j < cols; ++j) c_row[j] += tile_row[j];
    } else {
      for (int j = 0; j < cols; ++j) c_row[j] = tile_row[j];
    }
  }
}

// One task: out rows [m0, m0 + mc) by columns [n0, n0 + nc).
void gemm_block(const float* x, const float* w, float* out, int64_t n, int64_t k, int64_t m0,
                int64_t mc, int64_t n0, int64_t nc) {
  // Per-thread packing buffers, grown once and reused by every later call.
  static thread_local std::vector<float> x_packed;
  static thread_local std::vector<float> w_packed;
  x_packed.resize(kMC * kKC);
  w_packed.resize(kNC * kKC);

  for (int64_t k0 = 0; k0 < k; k0 += kKC) {
    const int64_t kc = std::min(kKC, k - k0);
    pack<kMR>(x + m0 * k + k0, k, mc, kc, x_packed.data());
    pack<kNR>(w + n0 * k + k0, k, nc, kc, w_packed.data());
    for (int64_t j = 0; j < nc; j += kNR) {
      const int cols = static_cast<int>(std::min<int64_t>(kNR, nc - j));
      const float* b = w_packed.data() + j * kc;
      for (int64_t i = 0; i < mc; i += kMR) {
        const int rows = static_cast<int>(std::min<int64_t>(kMR, mc - i));
        micro_kernel(x_packed.data() + i * kc, b, kc, out + (m0 + i) * n + n0 + j, n, rows, cols,
                     k0 > 0);
      }
    }
  }
}

void linear_many_rows(const float* x, const float* w, float* out, int64_t m, int64_t n, int64_t k,
                      ThreadPool& pool) {
  const int64_t m_blocks = (m + kMC - 1) / kMC;
  const int64_t n_blocks = (n + kNC - 1) / kNC;
  const int64_t tasks = m_blocks * n_blocks;
  pool.parallel_for(
      tasks, kMC * kNC * k,
      [&](int64_t begin, int64_t end) {
        for (int64_t task = begin; task < end; ++task) {
          const int64_t m0 = task / n_blocks * kMC;
          const int64_t n0 = task % n_blocks * kNC;
          gemm_block(x, w, out, n, k, m0, std::min(kMC, m - m0), n0, std::min(kNC, n - n0));
        }
      },
      /*grain=*/1);
}

}  // namespace

void linear(const Tensor& x, const Tensor& weight, Tensor out, ThreadPool& pool) {
  check_tensor(x, "linear x", DType::kF32, 2);
  const int64_t m = x.size(0);
  const int64_t k = x.size(1);
  check_shape(weight, "linear weight", DType::kF32, {-1, k});
  const int64_t n = weight.size(0);
  check_shape(out, "linear out", DType::kF32, {m, n});
  NVLLM_CHECK_MSG(out.data() != x.data() && out.data() != weight.data(),
                  "linear out must not share storage with its inputs");
  if (m == 0 || n == 0) return;
  if (k == 0) {
    std::fill(out.data_as<float>(), out.data_as<float>() + m * n, 0.0f);
    return;
  }
  if (m < kMR) {
    linear_few_rows(x.data_as<float>(), weight.data_as<float>(), out.data_as<float>(), m, n, k,
                    pool);
  } else {
    linear_many_rows(x.data_as<float>(), weight.data_as<float>(), out.data_as<float>(), m, n, k,
                     pool);
  }
}

}  // namespace nanovllm::cpu
