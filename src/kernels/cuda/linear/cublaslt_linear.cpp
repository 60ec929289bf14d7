// cuBLASLt is column-major. A row-major [r, c] matrix with row stride ld is the column-major
// [c, r] matrix with leading dimension ld, so out = x @ W^T (row-major) is, column-major,
//   out^T [n, m] = W [k, n]^T  @  x^T [k, m]
// i.e. D = op(A) @ B with A = W (transposed, "T"), B = x (as is, "N"), m' = n, n' = m.
#include "kernels/cuda/linear/cublaslt_linear.h"

#include <algorithm>

#include "kernels/cuda/linear/gemv.h"
#include "kernels/cuda/linear/gemv_persistent.h"
#include "kernels/cuda/runtime/cuda_check.h"

namespace nanovllm::cuda {

struct CublasLtLinear::Plan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t weight_layout = nullptr;  // A
  cublasLtMatrixLayout_t x_layout = nullptr;       // B
  cublasLtMatrixLayout_t out_layout = nullptr;     // C and D
  cublasLtMatmulAlgo_t algo{};

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    // Destruction of host-side descriptors only fails on invalid handles; nothing to report.
    if (out_layout != nullptr) (void)cublasLtMatrixLayoutDestroy(out_layout);
    if (x_layout != nullptr) (void)cublasLtMatrixLayoutDestroy(x_layout);
    if (weight_layout != nullptr) (void)cublasLtMatrixLayoutDestroy(weight_layout);
    if (operation != nullptr) (void)cublasLtMatmulDescDestroy(operation);
  }
};

namespace {

cudaDataType_t cuda_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return CUDA_R_32F;
    case DType::kBF16:
      return CUDA_R_16BF;
    case DType::kF16:
      return CUDA_R_16F;
    default:
      throw Error(
          fmt::format("linear: dtype {} is not supported on CUDA (float32, bfloat16, "
                      "float16)",
                      dtype_name(dtype)));
  }
}

// The largest power of two (at most 256, cuBLASLt's default assumption) dividing the address.
uint32_t alignment_of(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  if (address == 0) return 256;
  return static_cast<uint32_t>(std::min<uintptr_t>(256, address & (~address + 1)));
}

// A single row may have any stride; cuBLASLt wants ld >= the row length all the same.
int64_t leading_dimension(int64_t ld, int64_t rows, int64_t row_length, const char* name) {
  if (rows <= 1) return std::max<int64_t>({ld, row_length, 1});
  NVLLM_CHECK_MSG(ld >= row_length, "linear: {} rows are {} elements apart but {} long", name, ld,
                  row_length);
  return ld;
}

// RAII for the heuristic query's preference descriptor.
class Preference {
 public:
  Preference() { NVLLM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference_)); }
  ~Preference() { (void)cublasLtMatmulPreferenceDestroy(preference_); }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;

  template <typename Value>
  void set(cublasLtMatmulPreferenceAttributes_t attribute, Value value) {
    NVLLM_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(preference_, attribute, &value, sizeof(value)));
  }
  cublasLtMatmulPreference_t get() const { return preference_; }

 private:
  cublasLtMatmulPreference_t preference_ = nullptr;
};

}  // namespace

CublasLtLinear::CublasLtLinear() : workspace_(kWorkspaceBytes, Device::kCUDA) {
  NVLLM_CUBLAS_CHECK(cublasLtCreate(&handle_));
}

CublasLtLinear::~CublasLtLinear() {
  plans_.clear();
  (void)cublasLtDestroy(handle_);
}

const CublasLtLinear::Plan& CublasLtLinear::plan_for(const PlanKey& key) {
  auto found = plans_.find(key);
  if (found != plans_.end()) return *found->second;

  auto plan = std::make_unique<Plan>();
  // fp32 accumulation and scaling for every dtype; plain 32F never uses TF32, so f32 GEMMs
  // keep full fp32 precision.
  NVLLM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan->operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T;
  const cublasOperation_t as_is = CUBLAS_OP_N;
  NVLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_TRANSA,
                                                    &transpose, sizeof(transpose)));
  NVLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan->operation, CUBLASLT_MATMUL_DESC_TRANSB,
                                                    &as_is, sizeof(as_is)));
  if (key.bias) {  // one per output feature: a row of the column-major out^T
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    NVLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan->operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)));
  }
  const cudaDataType_t in_type = cuda_type(key.in_dtype);
  const cudaDataType_t out_type = cuda_type(key.out_dtype);
  // Column-major shapes: W is [k, n], x is [k, m], out is [n, m].
  NVLLM_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan->weight_layout, in_type, key.k, key.n, key.ldw));
  NVLLM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan->x_layout, in_type, key.k, key.m, key.ldx));
  NVLLM_CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&plan->out_layout, out_type, key.n, key.m, key.ldo));

  Preference preference;
  preference.set<uint64_t>(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, kWorkspaceBytes);
  preference.set<uint32_t>(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_w);
  preference.set<uint32_t>(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_x);
  preference.set<uint32_t>(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_out);
  preference.set<uint32_t>(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_out);

  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      handle_, plan->operation, plan->weight_layout, plan->x_layout, plan->out_layout,
      plan->out_layout, preference.get(), 1, &result, &count);
  if (status != CUBLAS_STATUS_SUCCESS || count == 0 || result.state != CUBLAS_STATUS_SUCCESS) {
    throw Error(fmt::format(
        "linear: cuBLASLt has no algorithm for x [{}, {}] (ld {}) @ weight [{}, {}]^T (ld {}) -> "
        "out [{}, {}] (ld {}){}, {} -> {}, alignments {}/{}/{} bytes: {}",
        key.m, key.k, key.ldx, key.n, key.k, key.ldw, key.m, key.n, key.ldo,
        key.bias ? " + bias" : "", dtype_name(key.in_dtype), dtype_name(key.out_dtype), key.align_x,
        key.align_w, key.align_out,
        cublasLtGetStatusString(status != CUBLAS_STATUS_SUCCESS ? status : result.state)));
  }
  plan->algo = result.algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void CublasLtLinear::run(const LinearArgs& args, cudaStream_t stream) {
  NVLLM_CHECK_MSG(args.out_dtype == args.in_dtype ||
                      (args.out_dtype == DType::kF32 && args.in_dtype != DType::kF32),
                  "linear: {} inputs cannot produce {} output", dtype_name(args.in_dtype),
                  dtype_name(args.out_dtype));
  (void)cuda_type(args.in_dtype);  // rejects integer dtypes before any work
  NVLLM_CHECK_MSG(
      args.bias == nullptr || (alignment_of(args.bias) >= 16 && args.out_dtype == args.in_dtype),
      "linear: a bias must be 16-byte aligned, into out of the inputs' dtype");
  if (args.m == 0 || args.n == 0) return;
  const int64_t ldo = leading_dimension(args.ldo, args.m, args.n, "out");
  if (args.k == 0) {
    // An empty sum: out = 0 (cuBLASLt does not take k = 0).
    NVLLM_CHECK_MSG(args.bias == nullptr, "linear: a bias over an empty sum (k = 0)");
    const size_t element = dtype_size(args.out_dtype);
    NVLLM_CUDA_CHECK(cudaMemset2DAsync(args.out, static_cast<size_t>(ldo) * element, 0,
                                       static_cast<size_t>(args.n) * element,
                                       static_cast<size_t>(args.m), stream));
    return;
  }
  // A few rows (decode): cuBLASLt's tiles stream the weight well below memory bandwidth there,
  // but for the large weights whose rows the persistent GEMV cannot stage beside its ring,
  // which the GEMV's kernel of a CTA a tile streams slower than cuBLASLt (docs/BENCHMARKS.md).
  GemvArgs gemv_args{args.in_dtype, args.out_dtype, args.x, args.ldx, args.weight, args.ldw,
                     args.out,      args.ldo,       args.m, args.n,   args.k};
  gemv_args.bias = args.bias;
  if (gemv_supported(gemv_args) &&
      (!gemv_persistent_weight(gemv_args) || gemv_persistent_serves(gemv_args))) {
    gemv(gemv_args, stream);
    return;
  }
  const PlanKey key{args.in_dtype,
                    args.out_dtype,
                    args.m,
                    args.n,
                    args.k,
                    leading_dimension(args.ldx, args.m, args.k, "x"),
                    leading_dimension(args.ldw, args.n, args.k, "weight"),
                    ldo,
                    alignment_of(args.x),
                    alignment_of(args.weight),
                    alignment_of(args.out),
                    args.bias != nullptr};
  const Plan& plan = plan_for(key);
  if (key.bias) {  // the descriptor is the plan's: the pointer is set for this call
    NVLLM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(
        plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &args.bias, sizeof(args.bias)));
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;  // C is not read; it is given as out, like D
  NVLLM_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.operation, &alpha, args.weight,
                                    plan.weight_layout, args.x, plan.x_layout, &beta, args.out,
                                    plan.out_layout, args.out, plan.out_layout, &plan.algo,
                                    workspace_.data(), kWorkspaceBytes, stream));
}

}  // namespace nanovllm::cuda
