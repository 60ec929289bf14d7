// Helpers of the CUDA micro-benchmarks: device buffers, random bf16 fill, CUDA-event timing
// of graphs (as the engine runs decode, so host launch costs stay out), copy bandwidth.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm::bench {

// Qwen3-0.6B, the geometry the decode benchmarks measure.
constexpr int kHidden = 1024;
constexpr int kIntermediate = 3072;
constexpr int kNumHeads = 16;
constexpr int kNumKvHeads = 8;
constexpr int kHeadDim = 128;
constexpr int kLayers = 28;
constexpr int kVocab = 151936;

constexpr size_t kMinBytesPerRun = size_t{256} << 20;  // ~5x the H100's 50 MB L2
constexpr int kWarmupRuns = 3;
constexpr int kTimedRuns = 15;

// Device memory freed on scope exit.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    NVLLM_CUDA_CHECK(cudaMalloc(&data_, std::max<size_t>(bytes, 16)));
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T = void>
  T* get() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// Fills `bytes` of device memory with random bf16 values in [-1, 1): a 16 MiB random pattern
// uploaded once and doubled in place on the device.
inline void fill_random_bf16(void* dst, size_t bytes, std::mt19937& rng) {
  const size_t pattern = std::min<size_t>(bytes, size_t{16} << 20) & ~size_t{1};
  std::vector<uint16_t> host(pattern / 2);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (uint16_t& v : host) v = float_to_bf16(dist(rng));
  char* base = static_cast<char*>(dst);
  NVLLM_CUDA_CHECK(cudaMemcpy(base, host.data(), pattern, cudaMemcpyHostToDevice));
  for (size_t filled = pattern; filled < bytes;) {
    const size_t n = std::min(filled, bytes - filled);
    NVLLM_CUDA_CHECK(cudaMemcpy(base + filled, base, n, cudaMemcpyDeviceToDevice));
    filled += n;
  }
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Milliseconds of `body` on `stream`, median over runs after warm-up.
template <typename Body>
double time_ms(cudaStream_t stream, int runs, Body body) {
  cudaEvent_t start, stop;
  NVLLM_CUDA_CHECK(cudaEventCreate(&start));
  NVLLM_CUDA_CHECK(cudaEventCreate(&stop));
  for (int i = 0; i < kWarmupRuns; ++i) body();
  std::vector<double> samples;
  for (int i = 0; i < runs; ++i) {
    NVLLM_CUDA_CHECK(cudaEventRecord(start, stream));
    body();
    NVLLM_CUDA_CHECK(cudaEventRecord(stop, stream));
    NVLLM_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0.0f;
    NVLLM_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    samples.push_back(ms);
  }
  NVLLM_CUDA_CHECK(cudaEventDestroy(start));
  NVLLM_CUDA_CHECK(cudaEventDestroy(stop));
  return median(samples);
}

// Device-to-device copy bandwidth in GB/s, counting read plus write bytes.
inline double copy_bandwidth(cudaStream_t stream) {
  const size_t bytes = size_t{1} << 30;
  DeviceBuffer src(bytes), dst(bytes);
  NVLLM_CUDA_CHECK(cudaMemset(src.get(), 1, bytes));
  const double ms = time_ms(stream, 10, [&] {
    NVLLM_CUDA_CHECK(
        cudaMemcpyAsync(dst.get(), src.get(), bytes, cudaMemcpyDeviceToDevice, stream));
  });
  return 2.0 * bytes / (ms * 1e-3) / 1e9;
}

// The ops `body` enqueues on `stream`, captured as a graph after one run outside the capture
// (first-call setup: function attributes, ...).
class CapturedOps {
 public:
  template <typename Body>
  CapturedOps(cudaStream_t stream, Body body) {
    body();
    NVLLM_CUDA_CHECK(cudaStreamSynchronize(stream));
    NVLLM_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
    body();
    NVLLM_CUDA_CHECK(cudaStreamEndCapture(stream, &graph_));
    NVLLM_CUDA_CHECK(cudaGraphInstantiate(&exec_, graph_, 0));
  }
  ~CapturedOps() {
    cudaGraphExecDestroy(exec_);
    cudaGraphDestroy(graph_);
  }
  CapturedOps(const CapturedOps&) = delete;
  CapturedOps& operator=(const CapturedOps&) = delete;
  cudaGraphExec_t exec() const { return exec_; }

 private:
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
};

// Milliseconds of one replay of the graph of the ops `body` enqueues on `stream`, median over
// kTimedRuns replays after warm-up.
template <typename Body>
double time_graph_ms(cudaStream_t stream, Body body) {
  const CapturedOps ops(stream, body);
  const double ms =
      time_ms(stream, kTimedRuns, [&] { NVLLM_CUDA_CHECK(cudaGraphLaunch(ops.exec(), stream)); });
  NVLLM_CUDA_CHECK(cudaStreamSynchronize(stream));
  return ms;
}

// A benchmark's main(): body(stream, properties) on a fresh non-blocking stream of the current
// device; an exception is reported under `name` with exit status 1.
template <typename Body>
int bench_main(const char* name, Body body) {
  try {
    int device = 0;
    NVLLM_CUDA_CHECK(cudaGetDevice(&device));
    cudaDeviceProp properties{};
    NVLLM_CUDA_CHECK(cudaGetDeviceProperties(&properties, device));
    cudaStream_t stream;
    NVLLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    const int status = body(stream, properties);
    NVLLM_CUDA_CHECK(cudaStreamDestroy(stream));
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

}  // namespace nanovllm::bench
