// The CUDA backend: every op validates its tensors on the host, then enqueues its kernel (or
// cuBLASLt GEMM) on the backend's own non-blocking stream and returns without waiting. Weights,
// activations and the KV cache are kept in the compute dtype; math is fp32.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <type_traits>

#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/linear/cublaslt_linear.h"
#include "kernels/cuda/runtime/alignment.h"
#include "kernels/cuda/runtime/cuda_check.h"
#include "kernels/cuda/runtime/device_allocator.h"
#include "kernels/cuda/runtime/nccl_group.h"
#include "kernels/cuda/runtime/small_copy.h"
#include "kernels/cuda/runtime/stream_tickets.h"
#include "kernels/cuda/runtime/tensor_checks.h"
#include "kernels/cuda/runtime/timeline.h"
#include "kernels/cuda/sampling/sampling.h"

namespace nanovllm {

using cuda::check_contiguous;
using cuda::check_rows;

namespace {

// An instantiated graph, launched on the stream it was captured from.
class CudaGraph final : public CapturedGraph {
 public:
  CudaGraph(cudaGraphExec_t exec, cudaStream_t stream) : exec_(exec), stream_(stream) {}
  ~CudaGraph() override {
    if (cudaGraphExecDestroy(exec_) != cudaSuccess) (void)cudaGetLastError();
  }
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;

  void replay() override { NVLLM_CUDA_CHECK(cudaGraphLaunch(exec_, stream_)); }

 private:
  cudaGraphExec_t exec_;
  cudaStream_t stream_;
};

// What CUDA knows of the memory at `pointer` (type cudaMemoryTypeUnregistered: nothing).
cudaPointerAttributes pointer_attributes(const void* pointer) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    (void)cudaGetLastError();
    attributes = cudaPointerAttributes{};
  }
  return attributes;
}

// Whether the host memory at `pointer` is page-locked (or otherwise known to CUDA), so that an
// async copy from it may still be reading after cudaMemcpyAsync returns.
bool is_registered_host_memory(const void* pointer) {
  return pointer_attributes(pointer).type != cudaMemoryTypeUnregistered;
}

// The device's address for page-locked host memory at `pointer`; nullptr for any other memory.
void* host_memory_device_pointer(const void* pointer) {
  const cudaPointerAttributes attributes = pointer_attributes(pointer);
  return attributes.type == cudaMemoryTypeHost ? attributes.devicePointer : nullptr;
}

}  // namespace

CudaBackend::CudaBackend(DType dtype, int device, std::shared_ptr<Communicator> group)
    : dtype_(dtype), device_(device), group_(std::move(group)) {
  if (dtype != DType::kF32 && dtype != DType::kBF16 && dtype != DType::kF16) {
    throw Error(fmt::format(
        "the CUDA backend computes in float32, bfloat16 or float16; {} is not supported",
        dtype_name(dtype)));
  }
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    throw Error(fmt::format("no CUDA device is visible: {}",
                            status != cudaSuccess ? cudaGetErrorString(status) : "0 devices"));
  }
  if (device < 0 || device >= count) {
    throw Error(fmt::format("CUDA device {} is not visible ({} visible)", device, count));
  }
  NVLLM_CUDA_CHECK(cudaSetDevice(device_));
  NVLLM_CUDA_CHECK(cudaDeviceGetAttribute(&num_sms_, cudaDevAttrMultiProcessorCount, device_));
  int major = 0;
  int minor = 0;
  NVLLM_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device_));
  NVLLM_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device_));
  compute_capability_ = major * 10 + minor;
  cuda::register_cuda_allocator();
  cudaStream_t stream = nullptr;
  NVLLM_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  stream_.reset(stream);
  linear_ = std::make_unique<cuda::CublasLtLinear>();
#ifdef NANOVLLM_TIMELINE
  // Enough records for the last ~7 decode steps of Qwen3-0.6B at one row (~210 CTAs an SM),
  // in a file under 16 MB.
  if (const char* path = std::getenv("NANOVLLM_TIMELINE_OUT")) {
    timeline_path_ = path;
    cuda::timeline::start(1536);
  }
#endif
}

CudaBackend::~CudaBackend() {
  // Queued work may still use the scratch buffers and the GEMM workspace freed below.
  if (cudaStreamSynchronize(stream()) != cudaSuccess) (void)cudaGetLastError();
#ifdef NANOVLLM_TIMELINE
  if (!timeline_path_.empty()) {
    try {
      cuda::timeline::dump(timeline_path_);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "timeline: %s\n", e.what());
    }
  }
#endif
}

bool CudaBackend::capturing() const {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  NVLLM_CUDA_CHECK(cudaStreamIsCapturing(stream(), &status));
  return status != cudaStreamCaptureStatusNone;
}

void CudaBackend::check_not_capturing(std::string_view what) const {
  if (capturing()) {
    throw Error(fmt::format("{} is not allowed while a CUDA graph is being captured", what));
  }
}

void* CudaBackend::grow_scratch(Buffer& scratch, size_t bytes, std::string_view user) {
  if (bytes <= scratch.bytes()) return scratch.data();
  if (capturing()) {
    throw Error(fmt::format(
        "{} needs {} bytes of scratch but has {} while a CUDA graph is being captured; run the "
        "same batch once without capturing first",
        user, bytes, scratch.bytes()));
  }
  // Captured graphs replay the address they recorded, so a replaced buffer stays allocated.
  if (scratch.data() != nullptr) retired_scratch_.push_back(std::move(scratch));
  scratch = Buffer(bytes, Device::kCUDA);
  // Zeroed once: kernels that keep counters in their scratch leave them at zero.
  NVLLM_CUDA_CHECK(cudaMemsetAsync(scratch.data(), 0, bytes, stream()));
  return scratch.data();
}

void CudaBackend::check_copy(const Tensor& tensor, const void* host, std::string_view name) const {
  NVLLM_CHECK_MSG(tensor.device() == Device::kCUDA, "{} is on {}, expected cuda", name,
                  device_name(tensor.device()));
  NVLLM_CHECK_MSG(tensor.is_contiguous(), "{} {} is not contiguous", name, tensor.shape_string());
  NVLLM_CHECK_MSG(tensor.nbytes() == 0 || (tensor.defined() && host != nullptr),
                  "{} {}: a null pointer", name, tensor.shape_string());
}

// Pageable host memory is staged by the driver before cudaMemcpyAsync returns, so the caller
// may reuse it at once; page-locked memory would be read later, so the copy is waited for.
void CudaBackend::upload(Tensor dst, const void* host_src) {
  const uint64_t ticket = upload_async(dst, host_src);
  if (is_registered_host_memory(host_src)) wait_for(ticket);
}

void CudaBackend::download(void* host_dst, const Tensor& src) {
  wait_for(download_async(host_dst, src));
}

uint64_t CudaBackend::upload_async(Tensor dst, const void* host_src) {
  check_copy(dst, host_src, "upload destination");
  return enqueue_copy(dst.data(), host_src, dst.nbytes(), cudaMemcpyHostToDevice, "upload");
}

uint64_t CudaBackend::download_async(void* host_dst, const Tensor& src) {
  check_copy(src, host_dst, "download source");
  return enqueue_copy(host_dst, src.data(), src.nbytes(), cudaMemcpyDeviceToHost, "download");
}

// A few bytes to or from page-locked memory (a step's inputs, its sampled tokens) go by a kernel
// (small_copy.h); anything else by the copy engine.
uint64_t CudaBackend::enqueue_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                   std::string_view what) {
  if (bytes == 0) return 0;
  check_not_capturing(what);
  const bool up = kind == cudaMemcpyHostToDevice;
  void* mapped =
      bytes <= cuda::kSmallCopyMaxBytes ? host_memory_device_pointer(up ? src : dst) : nullptr;
  if (mapped != nullptr) {
    cuda::small_copy(up ? dst : mapped, up ? mapped : src, bytes, stream());
  } else {
    NVLLM_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, kind, stream()));
  }
  return tickets_.record(stream());
}

void CudaBackend::wait_for(uint64_t ticket) {
  tickets_.wait(ticket);
}

void CudaBackend::pin_host_memory(void* host, size_t bytes) {
  if (bytes == 0) return;
  // Mapped, so that small copies can be made by a kernel (enqueue_copy).
  NVLLM_CUDA_CHECK(cudaHostRegister(host, bytes, cudaHostRegisterMapped));
}

void CudaBackend::unpin_host_memory(void* host) {
  // Only ever called on memory pin_host_memory() registered; nothing to report otherwise.
  if (cudaHostUnregister(host) != cudaSuccess) (void)cudaGetLastError();
}

void CudaBackend::synchronize() {
  check_not_capturing("synchronize");
  NVLLM_CUDA_CHECK(cudaStreamSynchronize(stream()));
}

void CudaBackend::check_attention_support(const AttentionDims& dims, int block_size) const {
  cuda::check_attention_dims(dims);
  cuda::check_attention_support(dims.head_dim, block_size, dims.num_heads, dims.num_kv_heads,
                                dtype_);
}

DeviceMemoryInfo CudaBackend::memory_info() const {
  DeviceMemoryInfo info;
  // Asked from any thread (the engine's, of rank 0's backend): of this backend's device.
  int current = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&current));
  NVLLM_CUDA_CHECK(cudaSetDevice(device_));
  const cudaError_t status = cudaMemGetInfo(&info.free, &info.total);
  NVLLM_CUDA_CHECK(cudaSetDevice(current));
  NVLLM_CUDA_CHECK(status);
  const cuda::AllocatorCounters counters = cuda::allocator_counters(device_);
  info.allocated = counters.allocated;
  info.peak_allocated = counters.peak_allocated;
  return info;
}

std::unique_ptr<CapturedGraph> CudaBackend::capture(const std::function<void()>& body) {
  NVLLM_CUDA_CHECK(cudaStreamBeginCapture(stream(), cudaStreamCaptureModeThreadLocal));
  try {
    body();
  } catch (...) {
    // End the capture so the stream is usable again, drop what was recorded, and let the
    // body's error through.
    cudaGraph_t partial = nullptr;
    if (cudaStreamEndCapture(stream(), &partial) == cudaSuccess && partial != nullptr) {
      (void)cudaGraphDestroy(partial);
    }
    (void)cudaGetLastError();
    throw;
  }
  cudaGraph_t graph = nullptr;
  NVLLM_CUDA_CHECK(cudaStreamEndCapture(stream(), &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
  (void)cudaGraphDestroy(graph);  // the executable graph does not need it
  if (status != cudaSuccess) {
    cuda::throw_cuda_error(status, "cudaGraphInstantiate(&exec, graph, 0)", __FILE__, __LINE__);
  }
  return std::make_unique<CudaGraph>(exec, stream());
}

void CudaBackend::embedding(const Tensor& ids, const Tensor& weight, int64_t first_id, Tensor out) {
  check_contiguous(ids, "ids", DType::kI32, {-1});
  const int64_t tokens = ids.size(0);
  check_contiguous(weight, "embedding weight", dtype_, {-1, -1});
  const int64_t vocab = weight.size(0);
  const int64_t hidden = weight.size(1);
  check_rows(out, "embedding out", dtype_, {tokens, hidden});
  // An embedding lookup is a row gather from the weight (an id outside it gets a zero row).
  cuda::gather_rows(dtype_, weight.data(), hidden, vocab, ids.data_as<int32_t>(), first_id, tokens,
                    hidden, out.data(), out.stride(0), stream());
}

void CudaBackend::rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor out) {
  check_rows(x, "rms_norm x", dtype_, {-1, -1});
  const int64_t rows = x.size(0);
  const int64_t hidden = x.size(1);
  check_contiguous(weight, "rms_norm weight", dtype_, {hidden});
  check_rows(out, "rms_norm out", dtype_, {rows, hidden});
  NVLLM_CHECK_MSG(out.data() != x.data() || out.stride(0) == x.stride(0),
                  "rms_norm in place needs out and x to have the same row stride");
  cuda::rms_norm(dtype_, x.data(), x.stride(0), weight.data(), eps, rows, hidden, out.data(),
                 out.stride(0), stream());
}

void CudaBackend::add_rms_norm(Tensor x, Tensor residual, const Tensor& weight, float eps) {
  check_rows(x, "add_rms_norm x", dtype_, {-1, -1});
  const int64_t rows = x.size(0);
  const int64_t hidden = x.size(1);
  check_rows(residual, "add_rms_norm residual", dtype_, {rows, hidden});
  check_contiguous(weight, "add_rms_norm weight", dtype_, {hidden});
  NVLLM_CHECK_MSG(rows == 0 || x.data() != residual.data(),
                  "add_rms_norm x and residual share storage");
  cuda::add_rms_norm(dtype_, x.data(), x.stride(0), residual.data(), residual.stride(0),
                     weight.data(), eps, rows, hidden, stream());
}

cuda::LinearArgs CudaBackend::linear_args(const Tensor& x, const Tensor& weight,
                                          const Tensor& out) const {
  check_rows(x, "linear x", dtype_, {-1, -1});
  const int64_t m = x.size(0);
  const int64_t k = x.size(1);
  check_rows(weight, "linear weight", dtype_, {-1, k});
  const int64_t n = weight.size(0);
  NVLLM_CHECK_MSG(out.dtype() == dtype_ || out.dtype() == DType::kF32,
                  "linear out is {}, expected {} or float32", out.shape_string(),
                  dtype_name(dtype_));
  check_rows(out, "linear out", out.dtype(), {m, n});
  NVLLM_CHECK_MSG(m == 0 || n == 0 || (out.data() != x.data() && out.data() != weight.data()),
                  "linear out must not share storage with its inputs");
  cuda::LinearArgs args;
  args.in_dtype = dtype_;
  args.out_dtype = out.dtype();
  args.x = x.data();
  args.ldx = x.stride(0);
  args.weight = weight.data();
  args.ldw = weight.stride(0);
  args.out = out.data();
  args.ldo = out.stride(0);
  args.m = m;
  args.n = n;
  args.k = k;
  return args;
}

void CudaBackend::linear(const Tensor& x, const Tensor& weight, Tensor out) {
  linear_->run(linear_args(x, weight, out), stream());
}

void CudaBackend::linear_bias(const Tensor& x, const Tensor& weight, const Tensor& bias,
                              Tensor out) {
  cuda::LinearArgs args = linear_args(x, weight, out);
  NVLLM_CHECK_MSG(out.dtype() == dtype_, "linear_bias out is {}, expected {}",
                  dtype_name(out.dtype()), dtype_name(dtype_));
  check_contiguous(bias, "linear_bias bias", dtype_, {args.n});
  // cuBLASLt's epilogue wants the bias 16-byte aligned (the engine's always is); else it is
  // added after the product.
  if (args.k > 0 && cuda::aligned_to(bias.data(), 16)) args.bias = bias.data();
  linear_->run(args, stream());
  if (args.bias == nullptr) add_bias(out, bias);
}

void CudaBackend::add_bias(Tensor x, const Tensor& bias) {
  check_rows(x, "add_bias x", dtype_, {-1, -1});
  check_contiguous(bias, "add_bias bias", dtype_, {x.size(1)});
  cuda::add_bias(dtype_, bias.data(), x.size(0), x.size(1), x.data(), x.stride(0), stream());
}

cuda::QkNormRopeArgs CudaBackend::qk_norm_rope_args(const Tensor& qkv, const Tensor& q_norm,
                                                    const Tensor& k_norm, const Tensor& positions,
                                                    const Tensor& cos_sin, float eps,
                                                    const AttentionDims& dims) const {
  cuda::check_attention_dims(dims);
  check_rows(qkv, "qkv", dtype_, {-1, dims.qkv_size()});
  const int64_t tokens = qkv.size(0);
  NVLLM_CHECK_MSG(q_norm.defined() == k_norm.defined(),
                  "q_norm and k_norm are both given (q/k norm) or both not (rotary only)");
  if (q_norm.defined()) {
    check_contiguous(q_norm, "q_norm", dtype_, {dims.head_dim});
    check_contiguous(k_norm, "k_norm", dtype_, {dims.head_dim});
  }
  check_contiguous(positions, "positions", DType::kI32, {tokens});
  check_contiguous(cos_sin, "cos_sin", DType::kF32, {-1, dims.head_dim});
  cuda::QkNormRopeArgs args;
  args.dtype = dtype_;
  args.qkv = qkv.data();
  args.qkv_stride = qkv.stride(0);
  args.tokens = tokens;
  args.num_heads = dims.num_heads;
  args.num_kv_heads = dims.num_kv_heads;
  args.head_dim = dims.head_dim;
  args.q_norm = q_norm.defined() ? q_norm.data() : nullptr;
  args.k_norm = k_norm.defined() ? k_norm.data() : nullptr;
  args.positions = positions.data_as<int32_t>();
  args.cos_sin = cos_sin.data_as<float>();
  args.max_positions = cos_sin.size(0);
  args.eps = eps;
  return args;
}

void CudaBackend::qk_norm_rope(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm,
                               const Tensor& positions, const Tensor& cos_sin, float eps,
                               const AttentionDims& dims) {
  cuda::qk_norm_rope(qk_norm_rope_args(qkv, q_norm, k_norm, positions, cos_sin, eps, dims),
                     stream());
}

cuda::QkNormRopeArgs CudaBackend::qk_norm_rope_store_kv_args(
    const Tensor& qkv, const Tensor& q_norm, const Tensor& k_norm, const Tensor& positions,
    const Tensor& cos_sin, float eps, const AttentionDims& dims, const LayerKVCache& cache,
    const AttentionMetadata& metadata) const {
  cuda::QkNormRopeArgs args = qk_norm_rope_args(qkv, q_norm, k_norm, positions, cos_sin, eps, dims);
  cuda::check_kv_cache(cache, dims, dtype_);
  check_contiguous(metadata.slot_mapping, "slot_mapping", DType::kI32, {args.tokens});
  args.slot_mapping = metadata.slot_mapping.data_as<int32_t>();
  args.num_slots = cache.k.size(0) * cache.k.size(1);
  args.k_cache = cache.k.data();
  args.v_cache = cache.v.data();
  return args;
}

void CudaBackend::qk_norm_rope_store_kv(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm,
                                        const Tensor& positions, const Tensor& cos_sin, float eps,
                                        const AttentionDims& dims, const LayerKVCache& cache,
                                        const AttentionMetadata& metadata) {
  cuda::qk_norm_rope(qk_norm_rope_store_kv_args(qkv, q_norm, k_norm, positions, cos_sin, eps, dims,
                                                cache, metadata),
                     stream());
}

void CudaBackend::qk_norm_rope_attention(Tensor qkv, const Tensor& q_norm, const Tensor& k_norm,
                                         const Tensor& positions, const Tensor& cos_sin, float eps,
                                         const AttentionDims& dims, const LayerKVCache& cache,
                                         const AttentionMetadata& metadata, float scale,
                                         Tensor out) {
  // The decode kernel fuses it (bf16/f16); the f32 and prefill kernels take q and k ready.
  if (dtype_ == DType::kF32 || metadata.max_seqlen_q != 1 || qkv.size(0) == 0) {
    Backend::qk_norm_rope_attention(qkv, q_norm, k_norm, positions, cos_sin, eps, dims, cache,
                                    metadata, scale, out);
    return;
  }
  run_attention(qkv, cache, metadata, dims, scale, out,
                qk_norm_rope_store_kv_args(qkv, q_norm, k_norm, positions, cos_sin, eps, dims,
                                           cache, metadata));
}

void CudaBackend::store_kv(const Tensor& qkv, const LayerKVCache& cache,
                           const AttentionMetadata& metadata, const AttentionDims& dims) {
  cuda::check_attention_dims(dims);
  check_rows(qkv, "qkv", dtype_, {-1, dims.qkv_size()});
  cuda::check_kv_cache(cache, dims, dtype_);
  const int64_t tokens = qkv.size(0);
  check_contiguous(metadata.slot_mapping, "slot_mapping", DType::kI32, {tokens});
  cuda::StoreKvArgs args;
  args.dtype = dtype_;
  args.qkv = qkv.data();
  args.qkv_stride = qkv.stride(0);
  args.tokens = tokens;
  args.num_heads = dims.num_heads;
  args.num_kv_heads = dims.num_kv_heads;
  args.head_dim = dims.head_dim;
  args.slot_mapping = metadata.slot_mapping.data_as<int32_t>();
  args.num_slots = cache.k.size(0) * cache.k.size(1);
  args.k_cache = cache.k.data();
  args.v_cache = cache.v.data();
  cuda::store_kv(args, stream());
}

void CudaBackend::attention(const Tensor& qkv, const LayerKVCache& cache,
                            const AttentionMetadata& metadata, const AttentionDims& dims,
                            float scale, Tensor out) {
  run_attention(qkv, cache, metadata, dims, scale, out, {});
}

void CudaBackend::run_attention(const Tensor& qkv, const LayerKVCache& cache,
                                const AttentionMetadata& metadata, const AttentionDims& dims,
                                float scale, Tensor out, const cuda::QkNormRopeArgs& fused) {
  cuda::check_attention_dims(dims);
  check_rows(qkv, "qkv", dtype_, {-1, dims.qkv_size()});
  cuda::check_kv_cache(cache, dims, dtype_);
  const int64_t tokens = qkv.size(0);
  check_rows(out, "attention out", dtype_, {tokens, dims.q_size()});
  const int num_seqs = metadata.num_seqs;
  NVLLM_CHECK_GE(num_seqs, 0);
  check_contiguous(metadata.cu_seqlens_q, "cu_seqlens_q", DType::kI32, {num_seqs + 1});
  check_contiguous(metadata.context_lens, "context_lens", DType::kI32, {num_seqs});
  check_contiguous(metadata.block_tables, "block_tables", DType::kI32, {num_seqs, -1});
  if (tokens == 0) return;
  NVLLM_CHECK_MSG(num_seqs > 0, "attention over {} tokens with no sequences", tokens);
  NVLLM_CHECK_MSG(metadata.max_seqlen_q >= 1 && metadata.max_seqlen_q <= tokens,
                  "attention max_seqlen_q {} is outside [1, {}] for {} tokens",
                  metadata.max_seqlen_q, tokens, tokens);
  NVLLM_CHECK_LE(tokens, int64_t{INT32_MAX});
  const int block_size = static_cast<int>(cache.k.size(1));
  check_attention_support(dims, block_size);

  cuda::PagedAttentionArgs args;
  args.dtype = dtype_;
  args.qkv = qkv.data();
  args.qkv_row_stride = qkv.stride(0);
  args.k_cache = cache.k.data();
  args.v_cache = cache.v.data();
  args.num_blocks = cache.k.size(0);
  args.out = out.data();
  args.out_row_stride = out.stride(0);
  args.cu_seqlens_q = metadata.cu_seqlens_q.data_as<int32_t>();
  args.context_lens = metadata.context_lens.data_as<int32_t>();
  args.block_tables = metadata.block_tables.data_as<int32_t>();
  args.block_table_stride = static_cast<int>(metadata.block_tables.size(1));
  args.num_seqs = num_seqs;
  args.num_tokens = static_cast<int>(tokens);
  args.max_seqlen_q = metadata.max_seqlen_q;
  args.max_seqlen_k = metadata.max_seqlen_k;
  args.num_heads = dims.num_heads;
  args.num_kv_heads = dims.num_kv_heads;
  args.head_dim = dims.head_dim;
  args.block_size = block_size;
  args.scale = scale;
  args.num_sms = num_sms_;
  if (metadata.seq_order.defined()) {
    check_contiguous(metadata.seq_order, "seq_order", DType::kI32, {num_seqs});
    args.seq_order = metadata.seq_order.data_as<int32_t>();
  }
  args.qk_norm_rope = fused;
#ifdef NANOVLLM_HOPPER_PREFILL
  if (cuda::HopperPrefillAttention::supports(args, compute_capability_)) {
    cuda::check_paged_attention(args);
    const int32_t* cu_seqlens_q = metadata.host_cu_seqlens_q;
    const int32_t* context_lens = metadata.host_context_lens;
    std::vector<int32_t> read_back;  // for callers that built the metadata on the device only
    if (cu_seqlens_q == nullptr || context_lens == nullptr) {
      read_back.resize(2 * static_cast<size_t>(num_seqs) + 1);
      download(read_back.data(), metadata.cu_seqlens_q);
      download(read_back.data() + num_seqs + 1, metadata.context_lens);
      cu_seqlens_q = read_back.data();
      context_lens = read_back.data() + num_seqs + 1;
    }
    if (hopper_prefill_.run(args, cu_seqlens_q, context_lens, stream())) return;
  }
#endif
  cuda::paged_attention(args, stream());
}

void CudaBackend::silu_mul(const Tensor& gate_up, Tensor out) {
  check_rows(gate_up, "silu_mul gate_up", dtype_, {-1, -1});
  const int64_t rows = gate_up.size(0);
  NVLLM_CHECK_MSG(gate_up.size(1) % 2 == 0, "silu_mul gate_up {} has an odd width",
                  gate_up.shape_string());
  const int64_t width = gate_up.size(1) / 2;
  check_rows(out, "silu_mul out", dtype_, {rows, width});
  NVLLM_CHECK_MSG(rows == 0 || width == 0 || out.data() != gate_up.data(),
                  "silu_mul out must not share storage with gate_up");
  cuda::silu_mul(dtype_, gate_up.data(), gate_up.stride(0), rows, width, out.data(), out.stride(0),
                 stream());
}

void CudaBackend::gather_rows(const Tensor& x, const Tensor& indices, Tensor out) {
  check_rows(x, "gather_rows x", dtype_, {-1, -1});
  check_contiguous(indices, "gather_rows indices", DType::kI32, {-1});
  const int64_t width = x.size(1);
  const int64_t count = indices.size(0);
  check_rows(out, "gather_rows out", dtype_, {count, width});
  NVLLM_CHECK_MSG(count == 0 || width == 0 || out.data() != x.data(),
                  "gather_rows out must not share storage with x");
  cuda::gather_rows(dtype_, x.data(), x.stride(0), x.size(0), indices.data_as<int32_t>(), 0, count,
                    width, out.data(), out.stride(0), stream());
}

// Over a group, NCCL on this stream; one rank: the sum over the group is x itself, the gather
// a copy.
void CudaBackend::all_reduce_sum(Tensor x) {
  check_rows(x, "all_reduce_sum x", dtype_, {-1, -1});
  if (group_) group_->all_reduce_sum(x, stream());
}

void CudaBackend::all_gather_columns(const Tensor& x, Tensor out) {
  check_rows(x, "all_gather_columns x", x.dtype(), {-1, -1});
  if (group_) return group_->all_gather_columns(x, out, stream());
  check_rows(out, "all_gather_columns out", x.dtype(), {x.size(0), x.size(1)});
  const size_t row_bytes = static_cast<size_t>(x.size(1)) * dtype_size(x.dtype());
  NVLLM_CUDA_CHECK(cudaMemcpy2DAsync(out.data(), out.stride(0) * dtype_size(out.dtype()), x.data(),
                                     x.stride(0) * dtype_size(x.dtype()), row_bytes, x.size(0),
                                     cudaMemcpyDeviceToDevice, stream()));
}

void CudaBackend::gather_ids(const Tensor& ids, const Tensor& indices, Tensor out) {
  check_contiguous(ids, "gather_ids ids", DType::kI32, {-1});
  check_contiguous(indices, "gather_ids indices", DType::kI32, {-1});
  const int64_t count = indices.size(0);
  check_contiguous(out, "gather_ids out", DType::kI32, {count});
  // The row gather moves 4-byte elements as they are: int32 ids pass through as f32 words.
  cuda::gather_rows(DType::kF32, ids.data(), 1, ids.size(0), indices.data_as<int32_t>(), 0, count,
                    1, out.data(), 1, stream());
}

void CudaBackend::sample(const Tensor& logits, const SamplingTensors& params, Tensor token_ids) {
  check_contiguous(logits, "logits", DType::kF32, {-1, -1});
  const int64_t rows = logits.size(0);
  const int64_t vocab = logits.size(1);
  check_contiguous(params.temperature, "temperature", DType::kF32, {rows});
  check_contiguous(params.top_k, "top_k", DType::kI32, {rows});
  check_contiguous(params.top_p, "top_p", DType::kF32, {rows});
  check_contiguous(params.seed, "seed", DType::kI64, {rows});
  check_contiguous(params.position, "position", DType::kI32, {rows});
  check_contiguous(token_ids, "token_ids", DType::kI32, {rows});
  if (rows == 0) return;
  NVLLM_CHECK_MSG(vocab > 0, "sampling from logits {} with an empty vocabulary",
                  logits.shape_string());
  cuda::SamplingArgs args;
  args.logits = logits.data_as<float>();
  args.rows = rows;
  args.vocab = vocab;
  args.temperature = params.temperature.data_as<float>();
  args.top_k = params.top_k.data_as<int32_t>();
  args.top_p = params.top_p.data_as<float>();
  args.seed = params.seed.data_as<int64_t>();
  args.position = params.position.data_as<int32_t>();
  args.token_ids = token_ids.data_as<int32_t>();
  void* workspace =
      grow_scratch(sampling_scratch_, cuda::sample_workspace_bytes(rows, vocab), "sampling");
  cuda::sample(args, workspace, stream());
}

void CudaBackend::compute_logprobs(const Tensor& logits, const Tensor& token_ids, int num_top,
                                   const LogprobsTensors& out) {
  check_contiguous(logits, "logits", DType::kF32, {-1, -1});
  const int64_t rows = logits.size(0);
  const int64_t vocab = logits.size(1);
  check_contiguous(token_ids, "token_ids", DType::kI32, {rows});
  NVLLM_CHECK_MSG(num_top >= 0 && num_top <= 20, "num_top {} is outside [0, 20]", num_top);
  check_contiguous(out.logprob, "logprob", DType::kF32, {rows});
  check_contiguous(out.rank, "rank", DType::kI32, {rows});
  if (num_top > 0) {
    check_contiguous(out.top_ids, "top_ids", DType::kI32, {rows, num_top});
    check_contiguous(out.top_logprobs, "top_logprobs", DType::kF32, {rows, num_top});
  }
  if (rows == 0) return;
  NVLLM_CHECK_MSG(vocab > 0, "logprobs of logits {} with an empty vocabulary",
                  logits.shape_string());
  cuda::LogprobsArgs args;
  args.logits = logits.data_as<float>();
  args.rows = rows;
  args.vocab = vocab;
  args.token_ids = token_ids.data_as<int32_t>();
  args.num_top = num_top;
  args.logprob = out.logprob.data_as<float>();
  args.rank = out.rank.data_as<int32_t>();
  args.top_ids = num_top > 0 ? out.top_ids.data_as<int32_t>() : nullptr;
  args.top_logprobs = num_top > 0 ? out.top_logprobs.data_as<float>() : nullptr;
  cuda::compute_logprobs(args, stream());
}

bool cuda_available() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // leave no error behind for later checks
    return false;
  }
  return count >= 1;
}

std::unique_ptr<Backend> make_cuda_backend(DType dtype, int device,
                                           std::shared_ptr<Communicator> group) {
  return std::make_unique<CudaBackend>(dtype, device, std::move(group));
}

std::vector<std::shared_ptr<Communicator>> make_gpu_group(int size) {
  return cuda::make_nccl_group(size, cuda::default_one_shot_max_bytes(size));
}

}  // namespace nanovllm
