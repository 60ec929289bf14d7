// A GPU's power draw while it replays a graph, from NVML's energy counter (millijoules since the
// driver loaded), and its SM clock. Under a sustained load the H200s measured run at their 700 W
// limit, where a kernel's speed is its energy: these are the figures that say so. NVML is opened
// with dlopen, so the benchmarks build and run without it (available() is then false).
#pragma once

#include <cuda_runtime.h>
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm::bench {

struct PowerSample {
  double watts = 0;          // mean over the middle of the run
  int sm_mhz = 0;            // at the end of the run
  double ms_per_replay = 0;  // device time, sustained
  double millijoules_per_replay() const { return watts * ms_per_replay; }
};

class PowerMeter {
 public:
  explicit PowerMeter(int cuda_device) {
    lib_ = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib_ == nullptr) return;
    const auto init = symbol<int (*)()>("nvmlInit_v2");
    shutdown_ = symbol<int (*)()>("nvmlShutdown");
    const auto by_bus = symbol<int (*)(const char*, void**)>("nvmlDeviceGetHandleByPciBusId_v2");
    energy_ = symbol<EnergyFn>("nvmlDeviceGetTotalEnergyConsumption");
    clock_ = symbol<ClockFn>("nvmlDeviceGetClockInfo");
    if (init == nullptr || shutdown_ == nullptr || by_bus == nullptr || energy_ == nullptr ||
        clock_ == nullptr) {
      return;
    }
    initialized_ = init() == 0;
    char bus[32] = {};
    unsigned long long millijoules = 0;
    if (!initialized_ || cudaDeviceGetPCIBusId(bus, sizeof(bus), cuda_device) != cudaSuccess ||
        by_bus(bus, &device_) != 0 || energy_(device_, &millijoules) != 0) {
      device_ = nullptr;
    }
  }
  ~PowerMeter() {
    if (initialized_) shutdown_();
    if (lib_ != nullptr) dlclose(lib_);
  }
  PowerMeter(const PowerMeter&) = delete;
  PowerMeter& operator=(const PowerMeter&) = delete;

  bool available() const { return device_ != nullptr; }

  // Replays `graph` back to back for about `seconds`, reading the energy counter every 2 ms on
  // another thread; the power is the least-squares slope of those readings over the middle 80%
  // of the run (the counter moves in steps, so one reading at each end would not do).
  PowerSample measure(cudaGraphExec_t graph, cudaStream_t stream, double seconds) const {
    PowerSample sample;
    if (!available()) return sample;
    using Clock = std::chrono::steady_clock;
    cudaEvent_t start, stop;
    NVLLM_CUDA_CHECK(cudaEventCreate(&start));
    NVLLM_CUDA_CHECK(cudaEventCreate(&stop));
    // The replays' count from one timed replay.
    NVLLM_CUDA_CHECK(cudaEventRecord(start, stream));
    NVLLM_CUDA_CHECK(cudaGraphLaunch(graph, stream));
    NVLLM_CUDA_CHECK(cudaEventRecord(stop, stream));
    NVLLM_CUDA_CHECK(cudaEventSynchronize(stop));
    float one_ms = 0;
    NVLLM_CUDA_CHECK(cudaEventElapsedTime(&one_ms, start, stop));
    const int replays = std::max(1, static_cast<int>(seconds * 1e3 / std::max(one_ms, 1e-3f)));

    std::vector<std::pair<double, double>> readings;  // (s, mJ)
    std::atomic<bool> done{false};
    const Clock::time_point origin = Clock::now();
    std::thread reader([&] {
      while (!done.load()) {
        unsigned long long millijoules = 0;
        if (energy_(device_, &millijoules) == 0) {
          readings.emplace_back(std::chrono::duration<double>(Clock::now() - origin).count(),
                                static_cast<double>(millijoules));
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
      }
    });
    NVLLM_CUDA_CHECK(cudaEventRecord(start, stream));
    for (int i = 0; i < replays; ++i) NVLLM_CUDA_CHECK(cudaGraphLaunch(graph, stream));
    NVLLM_CUDA_CHECK(cudaEventRecord(stop, stream));
    NVLLM_CUDA_CHECK(cudaEventSynchronize(stop));
    const double end = std::chrono::duration<double>(Clock::now() - origin).count();
    unsigned mhz = 0;
    if (clock_(device_, kNvmlClockSm, &mhz) == 0) sample.sm_mhz = static_cast<int>(mhz);
    done.store(true);
    reader.join();
    float total_ms = 0;
    NVLLM_CUDA_CHECK(cudaEventElapsedTime(&total_ms, start, stop));
    NVLLM_CUDA_CHECK(cudaEventDestroy(start));
    NVLLM_CUDA_CHECK(cudaEventDestroy(stop));
    sample.ms_per_replay = total_ms / replays;

    // The run on the device is [end - total, end] on the host's clock.
    const double run = total_ms * 1e-3;
    const double from = end - 0.9 * run, to = end - 0.1 * run;
    double n = 0, st = 0, se = 0, stt = 0, ste = 0;
    for (const auto& [t, e] : readings) {
      if (t < from || t > to) continue;
      n += 1;
      st += t;
      se += e;
      stt += t * t;
      ste += t * e;
    }
    const double denominator = n * stt - st * st;
    if (n >= 3 && denominator > 0) sample.watts = (n * ste - st * se) / denominator * 1e-3;
    return sample;
  }

 private:
  using EnergyFn = int (*)(void*, unsigned long long*);
  using ClockFn = int (*)(void*, int, unsigned*);
  static constexpr int kNvmlClockSm = 1;

  template <typename Fn>
  Fn symbol(const char* name) const {
    return reinterpret_cast<Fn>(dlsym(lib_, name));
  }

  void* lib_ = nullptr;
  bool initialized_ = false;
  int (*shutdown_)() = nullptr;
  void* device_ = nullptr;
  EnergyFn energy_ = nullptr;
  ClockFn clock_ = nullptr;
};

}  // namespace nanovllm::bench
