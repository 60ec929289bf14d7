#include "kernels/cuda/runtime/nccl_group.h"

#include <cuda_runtime.h>
#include <dlfcn.h>
#include <fmt/format.h>
#include <nccl.h>

#include <mutex>
#include <string>

#include "core/buffer.h"
#include "core/check.h"
#include "core/logging.h"
#include "kernels/cuda/runtime/cuda_check.h"
#include "kernels/cuda/runtime/peer_all_reduce.h"

namespace nanovllm::cuda {
namespace {

// The NCCL functions this project calls, from libnccl.so.2.
struct Nccl {
  decltype(&ncclGetVersion) get_version = nullptr;
  decltype(&ncclCommInitAll) comm_init_all = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
};

const Nccl& nccl() {
  static const Nccl loaded = [] {
    void* library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) {
      throw Error(
          fmt::format("tensor parallelism on GPUs needs NCCL, and libnccl.so.2 cannot be "
                      "loaded ({}); put its directory on LD_LIBRARY_PATH",
                      dlerror()));
    }
    Nccl functions;
    const auto find = [library](auto& function, const char* name) {
      function =
          reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
      if (function == nullptr) throw Error(fmt::format("libnccl.so.2 has no {}", name));
    };
    find(functions.get_version, "ncclGetVersion");
    find(functions.comm_init_all, "ncclCommInitAll");
    find(functions.comm_destroy, "ncclCommDestroy");
    find(functions.comm_abort, "ncclCommAbort");
    find(functions.all_reduce, "ncclAllReduce");
    find(functions.all_gather, "ncclAllGather");
    find(functions.error_string, "ncclGetErrorString");
    int version = 0;
    functions.get_version(&version);
    NVLLM_LOG_INFO("NCCL {} loaded", version);
    return functions;
  }();
  return loaded;
}

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) {
    throw Error(fmt::format("{} failed: {}", what, nccl().error_string(result)));
  }
}

ncclDataType_t nccl_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return ncclFloat32;
    case DType::kBF16:
      return ncclBfloat16;
    case DType::kF16:
      return ncclFloat16;
    default:
      throw Error(fmt::format("NCCL collectives take f32, bf16 or f16, not {}", dtype_name(dtype)));
  }
}

// The group's communicators, its one-shot all-reduce (none without peer access), and whether
// (and why) it was aborted.
struct Group {
  std::vector<ncclComm_t> comms;
  std::unique_ptr<PeerAllReduce> one_shot;
  std::mutex mutex;
  std::string aborted;

  ~Group() {
    if (!aborted.empty()) return;  // ncclCommAbort released them
    for (ncclComm_t comm : comms) (void)nccl().comm_destroy(comm);
  }

  void throw_if_aborted() {
    std::lock_guard lock(mutex);
    if (!aborted.empty()) throw Error(aborted);
  }
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(std::shared_ptr<Group> group, int rank)
      : group_(std::move(group)), rank_(rank) {}

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(group_->comms.size()); }

  void all_reduce_sum(Tensor x, void* stream) override {
    group_->throw_if_aborted();
    NVLLM_CHECK_MSG(x.is_contiguous(), "all_reduce_sum x {} is not contiguous", x.shape_string());
    if (group_->one_shot && group_->one_shot->takes(x)) {
      group_->one_shot->run(rank_, x, static_cast<cudaStream_t>(stream));
      return;
    }
    check_nccl(
        nccl().all_reduce(x.data(), x.data(), static_cast<size_t>(x.numel()), nccl_dtype(x.dtype()),
                          ncclSum, group_->comms[rank_], static_cast<cudaStream_t>(stream)),
        "ncclAllReduce");
  }

  // NCCL gathers rank after rank ([size, R, C]); the columns are then put side by side.
  void all_gather_columns(const Tensor& x, Tensor out, void* stream) override {
    group_->throw_if_aborted();
    NVLLM_CHECK_MSG(x.is_contiguous() && x.ndim() == 2,
                    "all_gather_columns x {} is not "
                    "contiguous rows",
                    x.shape_string());
    const int64_t rows = x.size(0);
    const int64_t cols = x.size(1);
    NVLLM_CHECK_MSG(out.ndim() == 2 && out.size(0) == rows && out.size(1) == cols * size() &&
                        out.stride(1) == 1 && out.dtype() == x.dtype(),
                    "all_gather_columns out {} for {} ranks of x {}", out.shape_string(), size(),
                    x.shape_string());
    const size_t element = dtype_size(x.dtype());
    const size_t bytes = static_cast<size_t>(x.numel()) * element * size();
    if (gathered_.bytes() < bytes) gathered_ = Buffer(bytes, Device::kCUDA);
    const auto cuda_stream = static_cast<cudaStream_t>(stream);
    check_nccl(nccl().all_gather(x.data(), gathered_.data(), static_cast<size_t>(x.numel()),
                                 nccl_dtype(x.dtype()), group_->comms[rank_], cuda_stream),
               "ncclAllGather");
    for (int k = 0; k < size(); ++k) {
      const auto* part = static_cast<const std::byte*>(gathered_.data()) + k * x.numel() * element;
      NVLLM_CUDA_CHECK(cudaMemcpy2DAsync(
          static_cast<std::byte*>(out.data()) + k * cols * element, out.stride(0) * element, part,
          cols * element, cols * element, rows, cudaMemcpyDeviceToDevice, cuda_stream));
    }
  }

  void abort(const std::string& reason) override {
    std::lock_guard lock(group_->mutex);
    if (!group_->aborted.empty()) return;
    group_->aborted = reason.empty() ? "tensor parallelism: aborted" : reason;
    if (group_->one_shot) group_->one_shot->abort();
    for (ncclComm_t comm : group_->comms) (void)nccl().comm_abort(comm);
  }

 private:
  std::shared_ptr<Group> group_;
  const int rank_;
  Buffer gathered_;  // [size, R, C]: the all-gather's rank-major result
};

}  // namespace

// allreduce_bench on H100s (NVLink): at 2 ranks the one-shot path wins at every size a decode
// step has (2.6 MB: 14 us against 28); at 4 they are level at 2 MiB. 8 ranks write twice the
// bytes over NVLink again: half of that, until a machine of 8 measures it.
size_t default_one_shot_max_bytes(int size) {
  if (size <= 2) return size_t{4} << 20;
  return size <= 4 ? size_t{2} << 20 : size_t{1} << 20;
}

std::vector<std::shared_ptr<Communicator>> make_nccl_group(int size, size_t one_shot_max_bytes) {
  NVLLM_CHECK_GE(size, 1);
  int devices = 0;
  NVLLM_CUDA_CHECK(cudaGetDeviceCount(&devices));
  if (devices < size) {
    throw Error(fmt::format("tensor_parallel_size {} needs {} GPUs; {} {} visible", size, size,
                            devices, devices == 1 ? "is" : "are"));
  }
  auto group = std::make_shared<Group>();
  group->comms.resize(size);
  std::vector<int> ordinals(size);
  for (int i = 0; i < size; ++i) ordinals[i] = i;
  check_nccl(nccl().comm_init_all(group->comms.data(), size, ordinals.data()), "ncclCommInitAll");
  if (size > 1 && one_shot_max_bytes > 0) {
    group->one_shot = PeerAllReduce::make(size, one_shot_max_bytes);
    if (!group->one_shot) {
      NVLLM_LOG_INFO(
          "tensor parallelism: the GPUs cannot map each other's memory; every "
          "all-reduce goes through NCCL");
    }
  }
  std::vector<std::shared_ptr<Communicator>> ranks;
  for (int rank = 0; rank < size; ++rank) {
    ranks.push_back(std::make_shared<NcclCommunicator>(group, rank));
  }
  return ranks;
}

}  // namespace nanovllm::cuda
