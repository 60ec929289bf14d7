#include "kernels/cuda/runtime/peer_all_reduce.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "core/check.h"
#include "kernels/cuda/device/vec.cuh"
#include "kernels/cuda/runtime/cuda_check.h"
#include "kernels/cuda/runtime/launch.cuh"

namespace nanovllm::cuda {
namespace {

constexpr int kMaxRanks = PeerAllReduce::kMaxRanks;
constexpr int kThreads = 512;
constexpr int kMaxBlocks = 64;

// A rank's flags, in its own device memory; the peers write `arrived`.
struct PeerSignal {
  uint32_t calls[kMaxBlocks];                  // this rank's calls so far, by block
  uint32_t arrived[2][kMaxBlocks][kMaxRanks];  // by parity, block, sending rank: its call
};

// What a kernel needs to reach every rank.
struct PeerView {
  std::byte* inbox[kMaxRanks];  // by rank: [2 parities][ranks][slot_bytes]
  PeerSignal* signal[kMaxRanks];
  const volatile int* aborted;
  size_t slot_bytes;
  int rank;
};

__device__ __forceinline__ void store_release_system(uint32_t* flag, uint32_t value) {
  asm volatile("st.release.sys.global.u32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
}

__device__ __forceinline__ uint32_t load_acquire_system(const uint32_t* flag) {
  uint32_t value;
  asm volatile("ld.acquire.sys.global.u32 %0, [%1];\n" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

// sum += the kVecWidth<T> elements packed in `vector`.
template <typename T>
__device__ __forceinline__ void accumulate(const uint4& vector, float (&sum)[kVecWidth<T>]) {
  if constexpr (std::is_same_v<T, float>) {
    sum[0] += __uint_as_float(vector.x);
    sum[1] += __uint_as_float(vector.y);
    sum[2] += __uint_as_float(vector.z);
    sum[3] += __uint_as_float(vector.w);
  } else {
    float values[8];
    unpack8<T>(vector, values);
#pragma unroll
    for (int i = 0; i < 8; ++i) sum[i] += values[i];
  }
}

template <typename T>
__device__ __forceinline__ uint4 pack(const float (&sum)[kVecWidth<T>]) {
  if constexpr (std::is_same_v<T, float>) {
    return make_uint4(__float_as_uint(sum[0]), __float_as_uint(sum[1]), __float_as_uint(sum[2]),
                      __float_as_uint(sum[3]));
  } else {
    return pack8<T>(sum);
  }
}

// x [vectors of 16 bytes] = the sum over the ranks. Block b of every rank handles the same
// vectors and meets only block b of the others, so blocks never wait for each other locally.
template <typename T, int kRanks>
__global__ void __launch_bounds__(kThreads)
    one_shot_all_reduce_kernel(PeerView view, uint4* x, int64_t vectors) {
  start_after_prior_kernels();
  PeerSignal* own = view.signal[view.rank];
  __shared__ uint32_t call_shared;
  if (threadIdx.x == 0) {
    call_shared = own->calls[blockIdx.x] + 1;
    own->calls[blockIdx.x] = call_shared;
  }
  __syncthreads();
  const uint32_t call = call_shared;
  const int parity = static_cast<int>(call & 1);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kThreads;
  const auto slot_of = [&](int sender) {
    return (static_cast<size_t>(parity) * kRanks + sender) * view.slot_bytes;
  };

  // Push: this rank's vectors into its slot of every other rank's inbox (posted NVLink writes).
  for (int64_t i = first; i < vectors; i += stride) {
    const uint4 vector = x[i];
#pragma unroll
    for (int peer = 0; peer < kRanks; ++peer) {
      if (peer == view.rank) continue;
      reinterpret_cast<uint4*>(view.inbox[peer] + slot_of(view.rank))[i] = vector;
    }
  }
  // Meet: the barrier orders every thread's writes before the release, which carries them to
  // the peer that acquires the flag.
  __syncthreads();
  if (threadIdx.x < kRanks && threadIdx.x != view.rank) {
    const int peer = threadIdx.x;
    store_release_system(&view.signal[peer]->arrived[parity][blockIdx.x][view.rank], call);
    const uint32_t* flag = &own->arrived[parity][blockIdx.x][peer];
    for (uint32_t spins = 1; load_acquire_system(flag) != call; ++spins) {
      if (spins % 1024 == 0 && *view.aborted != 0) break;  // a host read: seldom
    }
  }
  __syncthreads();

  // Sum in rank order, reading the inbox past L1 (the peers wrote it, not this SM).
  const std::byte* inbox = view.inbox[view.rank];
  for (int64_t i = first; i < vectors; i += stride) {
    float sum[kVecWidth<T>] = {};
#pragma unroll
    for (int sender = 0; sender < kRanks; ++sender) {
      const uint4 vector =
          sender == view.rank ? x[i]
                              : __ldcg(reinterpret_cast<const uint4*>(inbox + slot_of(sender)) + i);
      accumulate<T>(vector, sum);
    }
    x[i] = pack<T>(sum);
  }
}

template <typename T, int kRanks>
void launch(const PeerView& view, void* x, int64_t vectors, cudaStream_t stream) {
  const auto blocks = static_cast<unsigned>(
      std::clamp<int64_t>((vectors + kThreads - 1) / kThreads, 1, kMaxBlocks));
  launch_kernel(one_shot_all_reduce_kernel<T, kRanks>, blocks, kThreads, 0, stream, view,
                static_cast<uint4*>(x), vectors);
}

template <typename T>
void launch_for_ranks(int ranks, const PeerView& view, void* x, int64_t vectors,
                      cudaStream_t stream) {
  switch (ranks) {
    case 2:
      return launch<T, 2>(view, x, vectors, stream);
    case 3:
      return launch<T, 3>(view, x, vectors, stream);
    case 4:
      return launch<T, 4>(view, x, vectors, stream);
    case 5:
      return launch<T, 5>(view, x, vectors, stream);
    case 6:
      return launch<T, 6>(view, x, vectors, stream);
    case 7:
      return launch<T, 7>(view, x, vectors, stream);
    case 8:
      return launch<T, 8>(view, x, vectors, stream);
    default:
      throw Error(fmt::format("peer all-reduce over {} ranks (2 to {})", ranks, kMaxRanks));
  }
}

// Makes `device` current until the end of the scope, then the one current before.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    NVLLM_CUDA_CHECK(cudaGetDevice(&before_));
    NVLLM_CUDA_CHECK(cudaSetDevice(device));
  }
  void set(int device) { NVLLM_CUDA_CHECK(cudaSetDevice(device)); }
  ~CurrentDevice() { (void)cudaSetDevice(before_); }

 private:
  int before_ = 0;
};

}  // namespace

struct PeerAllReduce::Device {
  std::byte* inbox = nullptr;  // [2][size][max_bytes]
  PeerSignal* signal = nullptr;
};

PeerAllReduce::PeerAllReduce(int size, size_t max_bytes)
    : size_(size), max_bytes_(max_bytes), devices_(size) {}

std::unique_ptr<PeerAllReduce> PeerAllReduce::make(int size, size_t max_bytes) {
  NVLLM_CHECK_MSG(size >= 2 && size <= kMaxRanks, "peer all-reduce over {} ranks (2 to {})", size,
                  kMaxRanks);
  NVLLM_CHECK_MSG(max_bytes > 0 && max_bytes % 16 == 0, "peer all-reduce inbox of {} bytes",
                  max_bytes);
  for (int a = 0; a < size; ++a) {
    for (int b = 0; b < size; ++b) {
      int can = 0;
      if (a != b) NVLLM_CUDA_CHECK(cudaDeviceCanAccessPeer(&can, a, b));
      if (a != b && can == 0) return nullptr;
    }
  }
  std::unique_ptr<PeerAllReduce> group(new PeerAllReduce(size, max_bytes));
  CurrentDevice current(0);
  for (int rank = 0; rank < size; ++rank) {
    current.set(rank);
    for (int peer = 0; peer < size; ++peer) {
      if (peer == rank) continue;
      const cudaError_t enabled = cudaDeviceEnablePeerAccess(peer, 0);
      if (enabled == cudaErrorPeerAccessAlreadyEnabled) {
        (void)cudaGetLastError();  // NCCL, or an earlier group, enabled it
      } else {
        NVLLM_CUDA_CHECK(enabled);
      }
    }
    Device& device = group->devices_[rank];
    NVLLM_CUDA_CHECK(cudaMalloc(&device.inbox, 2 * size * max_bytes));
    NVLLM_CUDA_CHECK(cudaMalloc(&device.signal, sizeof(PeerSignal)));
    NVLLM_CUDA_CHECK(cudaMemset(device.signal, 0, sizeof(PeerSignal)));
    NVLLM_CUDA_CHECK(cudaDeviceSynchronize());
  }
  int* aborted = nullptr;
  NVLLM_CUDA_CHECK(
      cudaHostAlloc(&aborted, sizeof(int), cudaHostAllocMapped | cudaHostAllocPortable));
  *aborted = 0;
  group->aborted_ = aborted;
  return group;
}

PeerAllReduce::~PeerAllReduce() {
  int before = 0;
  (void)cudaGetDevice(&before);
  for (int rank = 0; rank < size_; ++rank) {
    (void)cudaSetDevice(rank);
    (void)cudaFree(devices_[rank].inbox);
    (void)cudaFree(devices_[rank].signal);
  }
  (void)cudaSetDevice(before);
  if (aborted_ != nullptr) (void)cudaFreeHost(const_cast<int*>(aborted_));
}

bool PeerAllReduce::takes(const Tensor& x) const {
  const DType dtype = x.dtype();
  const size_t bytes = static_cast<size_t>(x.numel()) * dtype_size(dtype);
  return (dtype == DType::kF32 || dtype == DType::kBF16 || dtype == DType::kF16) &&
         x.is_contiguous() && reinterpret_cast<uintptr_t>(x.data()) % 16 == 0 && bytes > 0 &&
         bytes % 16 == 0 && bytes <= max_bytes_;
}

void PeerAllReduce::run(int rank, Tensor x, cudaStream_t stream) {
  NVLLM_CHECK_MSG(takes(x), "peer all-reduce: x {} ({}) is not taken (see takes())",
                  x.shape_string(), dtype_name(x.dtype()));
  NVLLM_CHECK(rank >= 0 && rank < size_);
  PeerView view{};
  for (int r = 0; r < size_; ++r) {
    view.inbox[r] = devices_[r].inbox;
    view.signal[r] = devices_[r].signal;
  }
  view.aborted = aborted_;
  view.slot_bytes = max_bytes_;
  view.rank = rank;
  const int64_t vectors = x.numel() * static_cast<int64_t>(dtype_size(x.dtype())) / 16;
  dispatch_float_dtype(x.dtype(), "peer all-reduce", [&](auto type) {
    launch_for_ranks<decltype(type)>(size_, view, x.data(), vectors, stream);
  });
}

void PeerAllReduce::abort() {
  *aborted_ = 1;
}

}  // namespace nanovllm::cuda
