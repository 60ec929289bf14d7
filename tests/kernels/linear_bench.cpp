// Every linear of the Qwen3-0.6B, -4B, -8B, -14B, -32B and -30B-A3B and the Qwen2.5-7B shapes as
// the engine runs it (CublasLtLinear, which takes the GEMV up to 8 rows), in bf16 on one GPU:
// - at decode sizes (1 to 256 rows), against the device-to-device copy bandwidth: the weight is
//   read once, so time x bandwidth / weight bytes is the fraction of the floor reached (or
//   against the peak, where the products take longer than the bytes). The calls cycle over
//   enough copies of the weight that L2 cannot hold it;
// - at prefill sizes (2,048 to 16,384 rows), against the dense bf16 peak measured in the same
//   run: the fastest of square products of 4096 to 8192 through the same path (the clocks
//   drop under the longest ones); not the LM head, which the engine runs on the sampled rows
//   only, into f32 logits.
// Each figure is one call in a graph of back-to-back calls, median of replays.
//   usage: linear_bench [--rows R,R,...] [SHAPE...]   (0.6b 4b 8b 14b 32b 30b-a3b qwen2.5-7b;
//          default: all shapes, the decode and prefill sizes below; rows up to 256 are timed
//          as decode sizes, more as prefill sizes)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda_bench_util.h"
#include "kernels/cuda/linear/cublaslt_linear.h"
#include "kernels/cuda/runtime/device_allocator.h"
#include "qwen3_linears.h"

namespace nanovllm {
namespace {

using namespace bench;

constexpr int kDefaultRows[] = {1, 8, 32, 64, 128, 256, 2048, 8192, 16384};
constexpr int kMaxDecodeRows = 256;

// Milliseconds of one out [m, n] = x [m, k] @ weight^T, over `copies` weights in turn.
double time_linear(cuda::CublasLtLinear& linear, cudaStream_t stream, int64_t m, const Linear& l,
                   const DeviceBuffer& weights, int copies, const DeviceBuffer& x,
                   const DeviceBuffer& out) {
  const size_t weight_bytes = size_t{2} * l.n * l.k;
  const int calls = std::max(copies, 8);
  const double ms = time_graph_ms(stream, [&] {
    for (int c = 0; c < calls; ++c) {
      cuda::LinearArgs args;
      args.out_dtype = l.logits ? DType::kF32 : DType::kBF16;
      args.x = x.get();
      args.ldx = l.k;
      args.weight = weights.get<char>() + (c % copies) * weight_bytes;
      args.ldw = l.k;
      args.out = out.get();
      args.ldo = l.n;
      args.m = m;
      args.n = l.n;
      args.k = l.k;
      linear.run(args, stream);
    }
  });
  return ms / calls;
}

int run(cudaStream_t stream, const cudaDeviceProp& properties, std::vector<std::string> wanted,
        std::vector<int> row_counts) {
  if (row_counts.empty()) row_counts.assign(std::begin(kDefaultRows), std::end(kDefaultRows));
  const int most_rows = *std::max_element(row_counts.begin(), row_counts.end());
  const int most_decode_rows = std::min(most_rows, kMaxDecodeRows);
  cuda::register_cuda_allocator();
  cuda::CublasLtLinear linear;
  std::mt19937 rng(1);
  const double bandwidth = copy_bandwidth(stream);  // GB/s, read + write
  // The peak: the fastest square product, through the same path.
  double peak_tflops = 0;
  int peak_size = 0;
  {
    constexpr int kLargest = 8192;
    DeviceBuffer w(size_t{2} * kLargest * kLargest), x(w.bytes()), out(w.bytes());
    fill_random_bf16(w.get(), w.bytes(), rng);
    fill_random_bf16(x.get(), x.bytes(), rng);
    for (int size : {4096, 6144, 8192}) {
      const Linear square{"square", size, size};
      const double ms = time_linear(linear, stream, size, square, w, 1, x, out);
      const double tflops = 2.0 * size * size * size / (ms * 1e-3) / 1e12;
      if (tflops > peak_tflops) {
        peak_tflops = tflops;
        peak_size = size;
      }
    }
  }
  std::printf("%s: copy %.0f GB/s (read + write), dense bf16 peak %.0f TFLOP/s (%d^3)\n",
              properties.name, bandwidth, peak_tflops, peak_size);
  std::printf("%-5s %-13s %7s %7s %8s %10s %9s\n", "shape", "linear", "n", "k", "rows", "us",
              "of floor");
  for (const Qwen3Shape& shape : kQwen3Shapes) {
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), shape.name) == wanted.end()) {
      continue;
    }
    for (const Linear& l : linears_of(shape)) {
      const size_t weight_bytes = size_t{2} * l.n * l.k;
      const int copies = static_cast<int>(
          std::clamp<size_t>((kMinBytesPerRun + weight_bytes - 1) / weight_bytes, 1, 16));
      DeviceBuffer weights(weight_bytes * copies);
      fill_random_bf16(weights.get(), weights.bytes(), rng);
      const int64_t max_rows = l.logits ? most_decode_rows : most_rows;
      DeviceBuffer x(size_t{2} * max_rows * l.k), out(size_t{4} * max_rows * l.n);
      fill_random_bf16(x.get(), x.bytes(), rng);
      for (int rows : row_counts) {
        if (rows > kMaxDecodeRows) continue;
        const double us = 1e3 * time_linear(linear, stream, rows, l, weights, copies, x, out);
        // The floor: the weight, x and out moved once at the copy bandwidth (which counts a
        // copy's reads and writes), or the products at the peak where those take longer (from
        // about 200 rows on an H100 or H200).
        const double bytes = weight_bytes + 2.0 * rows * l.k + (l.logits ? 4.0 : 2.0) * rows * l.n;
        const double copy_us = bytes / (bandwidth * 1e9) * 1e6;
        const double compute_us = 2.0 * rows * l.n * l.k / (peak_tflops * 1e12) * 1e6;
        std::printf("%-5s %-13s %7d %7d %8d %10.2f %8.0f%%  (of %s)\n", shape.name, l.name, l.n,
                    l.k, rows, us, 100.0 * std::max(copy_us, compute_us) / us,
                    copy_us >= compute_us ? "copy" : "peak");
      }
      for (int rows : row_counts) {
        if (l.logits || rows <= kMaxDecodeRows) continue;
        const double us = 1e3 * time_linear(linear, stream, rows, l, weights, 1, x, out);
        const double tflops = 2.0 * rows * l.n * l.k / (us * 1e-6) / 1e12;
        std::printf("%-5s %-13s %7d %7d %8d %10.2f %8.0f%%  (of peak, %.0f TFLOP/s)\n", shape.name,
                    l.name, l.n, l.k, rows, us, 100.0 * tflops / peak_tflops, tflops);
      }
    }
  }
  return 0;
}

}  // namespace
}  // namespace nanovllm

int main(int argc, char** argv) {
  std::vector<std::string> wanted;
  std::vector<int> row_counts;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg != "--rows") {
      wanted.push_back(arg);
      continue;
    }
    const std::string list = i + 1 < argc ? argv[++i] : "";
    for (size_t start = 0; start <= list.size();) {
      const size_t comma = std::min(list.find(',', start), list.size());
      const std::string item = list.substr(start, comma - start);
      char* end = nullptr;
      const long rows = std::strtol(item.c_str(), &end, 10);
      if (item.empty() || *end != '\0' || rows < 1 || rows > 65536) {
        std::fprintf(stderr,
                     "linear_bench: --rows takes row counts of 1 to 65536 like 1,8,128, got '%s'\n",
                     list.c_str());
        return 2;
      }
      row_counts.push_back(static_cast<int>(rows));
      start = comma + 1;
    }
  }
  return nanovllm::bench::bench_main("linear_bench",
                                     [&](cudaStream_t stream, const cudaDeviceProp& properties) {
                                       return nanovllm::run(stream, properties, wanted, row_counts);
                                     });
}
