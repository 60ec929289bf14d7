// What one batch-1 (and batch-8) decode step of Qwen3-0.6B costs op by op, and the linears of a
// batch-128 step: each op is timed in a CUDA graph of many back-to-back calls, as the engine
// replays decode, so the figure includes the launch-to-launch gap a real step pays. The GEMVs that
// carry their neighbours (the norms, SiLU and residual adds: gemv.h) are timed too, with the step
// they make. The GEMVs run over enough distinct weights that L2 cannot hold them and are compared
// with the device-to-device copy bandwidth; the small ops are latency figures. The sum over a
// step's ops is printed beside the weight-streaming floor, and a layer stack's fused GEMVs are
// timed one after another as a step runs them. The q/k norm and rotary run inside decode attention
// (attention_bench times attention alone).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "cuda_bench_util.h"
#include "kernels/cuda/elementwise/elementwise.h"
#include "kernels/cuda/linear/cublaslt_linear.h"
#include "kernels/cuda/linear/fused_mlp.h"
#include "kernels/cuda/linear/gemv.h"
#include "kernels/cuda/runtime/device_allocator.h"

namespace nanovllm {
namespace {

using namespace bench;

constexpr int kQkvWidth = (kNumHeads + 2 * kNumKvHeads) * kHeadDim;
constexpr int kMaxCopies = 64;
constexpr int kSmallOpCalls = 200;

// What rides along with a GEMV (gemv.h): the norm of its input, SiLU * up of it, the
// residual add of its output.
enum class Fusion { kNone, kNorm, kResidual, kSiluResidual };

struct GemvShape {
  const char* name;
  int64_t n, k;
  int per_step;  // calls in one decode step
  DType out_dtype;
  Fusion fusion = Fusion::kNone;
};

// The linears of a decode step, as plain products.
constexpr GemvShape kLinears[] = {
    {"qkv_proj", kQkvWidth, kHidden, kLayers, DType::kBF16},
    {"o_proj", kHidden, kNumHeads* kHeadDim, kLayers, DType::kBF16},
    {"gate_up_proj", 2 * kIntermediate, kHidden, kLayers, DType::kBF16},
    {"down_proj", kHidden, kIntermediate, kLayers, DType::kBF16},
    {"lm_head", kVocab, kHidden, 1, DType::kF32},
};

// Copies of a weight of `bytes` that together overflow L2.
int distinct_copies(size_t bytes) {
  return static_cast<int>(std::clamp<size_t>((kMinBytesPerRun + bytes - 1) / bytes, 1, kMaxCopies));
}

// Which step's sum a row counts in: the separate ops', the fused linears', or neither (the
// MLP kernel, which takes the place of two fused GEMVs).
enum class Step { kSeparate, kFused, kNeither };

struct Row {
  std::string op;
  int m;
  double us;       // per call
  double gbps;     // weight bytes per second; 0 for latency figures
  double step_us;  // us x calls per step
  Step step = Step::kSeparate;
};

// Microseconds per call of `m` x [n, k]^T, over distinct weights that L2 cannot hold, or with
// `in_l2` over one weight again and again (what a weight prefetched into L2 costs).
Row bench_gemv(const GemvShape& shape, int m, bool in_l2, cudaStream_t stream, std::mt19937& rng) {
  const size_t weight_bytes = size_t{2} * shape.n * shape.k;
  const int copies = in_l2 ? 1 : distinct_copies(weight_bytes);
  const int calls = in_l2 ? kMaxCopies : copies;
  DeviceBuffer weights(weight_bytes * copies);
  fill_random_bf16(weights.get(), weight_bytes * copies, rng);
  const int64_t x_width = shape.fusion == Fusion::kSiluResidual ? 2 * shape.k : shape.k;
  DeviceBuffer x(size_t{2} * m * x_width);
  fill_random_bf16(x.get(), size_t{2} * m * x_width, rng);
  DeviceBuffer out(dtype_size(shape.out_dtype) * m * shape.n);
  fill_random_bf16(out.get(), dtype_size(shape.out_dtype) * m * shape.n, rng);  // a residual
  DeviceBuffer norm_weight(size_t{2} * shape.k);
  fill_random_bf16(norm_weight.get(), size_t{2} * shape.k, rng);
  cuda::GemvArgs args{DType::kBF16, shape.out_dtype, x.get(), x_width, nullptr, shape.k,
                      out.get(),    shape.n,         m,       shape.n, shape.k};
  if (shape.fusion == Fusion::kNorm) {
    args.norm_weight = norm_weight.get();
    args.eps = 1e-6f;
  }
  if (shape.fusion == Fusion::kSiluResidual) args.silu_gate = true;
  if (shape.fusion == Fusion::kResidual || shape.fusion == Fusion::kSiluResidual) {
    args.residual = out.get();
    args.ldr = shape.n;
  }
  const double ms = time_graph_ms(stream, [&] {
    for (int c = 0; c < calls; ++c) {
      args.weight = weights.get<char>() + (c % copies) * weight_bytes;
      cuda::gemv(args, stream);
    }
  });
  const double us = ms * 1e3 / calls;
  return {fmt::format("gemv {} [{}x{}]{}", shape.name, shape.n, shape.k, in_l2 ? ", in L2" : ""),
          m,
          us,
          weight_bytes / (us * 1e-6) / 1e9,
          in_l2 ? 0.0 : us * shape.per_step,
          shape.fusion != Fusion::kNone ? Step::kFused : Step::kSeparate};
}

// Microseconds per call of `op` (one decode step's worth of rows), back to back.
template <typename Op>
Row bench_small(const char* name, int m, int per_step, cudaStream_t stream, Op op) {
  const double ms = time_graph_ms(stream, [&] {
    for (int i = 0; i < kSmallOpCalls; ++i) op();
  });
  const double us = ms * 1e3 / kSmallOpCalls;
  return {name, m, us, 0.0, us * per_step};
}

std::vector<Row> bench_batch(int m, cudaStream_t stream, std::mt19937& rng) {
  const GemvShape fused_shapes[] = {
      {"input norm + qkv_proj", kQkvWidth, kHidden, kLayers, DType::kBF16, Fusion::kNorm},
      {"o_proj + residual add", kHidden, kNumHeads * kHeadDim, kLayers, DType::kBF16,
       Fusion::kResidual},
      {"norm + gate_up_proj", 2 * kIntermediate, kHidden, kLayers, DType::kBF16, Fusion::kNorm},
      {"SiLU + down_proj + residual add", kHidden, kIntermediate, kLayers, DType::kBF16,
       Fusion::kSiluResidual},
      {"final norm + lm_head", kVocab, kHidden, 1, DType::kF32, Fusion::kNorm},
  };
  std::vector<Row> rows;
  for (const GemvShape& shape : kLinears) rows.push_back(bench_gemv(shape, m, false, stream, rng));
  for (const GemvShape& shape : fused_shapes) {
    rows.push_back(bench_gemv(shape, m, false, stream, rng));
  }
  for (const GemvShape& shape : kLinears) {
    if (shape.per_step > 1) rows.push_back(bench_gemv(shape, m, true, stream, rng));
  }

  DeviceBuffer h(size_t{2} * m * kHidden), residual(size_t{2} * m * kHidden);
  DeviceBuffer norm_weight(size_t{2} * kHidden);
  DeviceBuffer gate_up(size_t{2} * m * 2 * kIntermediate), act(size_t{2} * m * kIntermediate);
  for (DeviceBuffer* b : {&h, &residual, &norm_weight, &gate_up}) {
    NVLLM_CUDA_CHECK(cudaMemset(b->get(), 0, 2));  // values are irrelevant to the timing
  }

  // Layer 0's input norm is a plain rms_norm: counted as one more add_rms_norm.
  rows.push_back(bench_small("add_rms_norm", m, 2 * kLayers + 1, stream, [&] {
    cuda::add_rms_norm(DType::kBF16, h.get(), kHidden, residual.get(), kHidden, norm_weight.get(),
                       1e-6f, m, kHidden, stream);
  }));
  rows.push_back(bench_small("silu_mul", m, kLayers, stream, [&] {
    cuda::silu_mul(DType::kBF16, gate_up.get(), 2 * kIntermediate, m, kIntermediate, act.get(),
                   kIntermediate, stream);
  }));
  return rows;
}

// The MLP kernel's arguments for Qwen3-0.6B at one row, its weights (gate_up, down) left to set.
cuda::RmsNormMlpArgs mlp_args(const void* x, const void* norm, int64_t* pending, int num_sms) {
  cuda::RmsNormMlpArgs args;
  args.x = x;
  args.norm_weight = norm;
  args.eps = 1e-6f;
  args.ld_gate_up = kHidden;
  args.ld_down = kIntermediate;
  args.pending = pending;
  args.hidden = kHidden;
  args.intermediate = kIntermediate;
  args.num_sms = num_sms;
  return args;
}

// The MLP in one kernel at one row (rms_norm_mlp: norm, gate_up_proj, SiLU, down_proj into the
// pending sum), over distinct weights: microseconds per call.
Row bench_fused_mlp(int num_sms, cudaStream_t stream, std::mt19937& rng) {
  const size_t gate_up_bytes = size_t{2} * 2 * kIntermediate * kHidden;
  const size_t layer_bytes = gate_up_bytes + size_t{2} * kHidden * kIntermediate;
  const int copies = distinct_copies(layer_bytes);
  DeviceBuffer weights(layer_bytes * copies), x(size_t{2} * kHidden), norm(size_t{2} * kHidden);
  DeviceBuffer pending(sizeof(int64_t) * kHidden);
  for (DeviceBuffer* b : {&weights, &x, &norm}) fill_random_bf16(b->get(), b->bytes(), rng);
  NVLLM_CUDA_CHECK(cudaMemset(pending.get(), 0, pending.bytes()));
  cuda::RmsNormMlpArgs args = mlp_args(x.get(), norm.get(), pending.get<int64_t>(), num_sms);
  const double ms = time_graph_ms(stream, [&] {
    for (int c = 0; c < copies; ++c) {
      args.gate_up = weights.get<char>() + c * layer_bytes;
      args.down = weights.get<char>() + c * layer_bytes + gate_up_bytes;
      cuda::rms_norm_mlp(args, stream);
    }
  });
  const double us = ms * 1e3 / copies;
  return {"rms_norm_mlp (norm, gate_up_proj, SiLU, down_proj)",
          1,
          us,
          layer_bytes / (us * 1e-6) / 1e9,
          us * kLayers,
          Step::kNeither};
}

// The linears of a decode step at the bench workload's batch (about 128 rows), which go to
// cuBLASLt: microseconds per call over distinct weights, each in a graph of back-to-back calls.
std::vector<Row> bench_wide_batch(int m, cudaStream_t stream, std::mt19937& rng) {
  cuda::register_cuda_allocator();
  cuda::CublasLtLinear linear;
  std::vector<Row> rows;
  for (const GemvShape& shape : kLinears) {
    const size_t weight_bytes = size_t{2} * shape.n * shape.k;
    const int copies = distinct_copies(weight_bytes);
    DeviceBuffer weights(weight_bytes * copies);
    fill_random_bf16(weights.get(), weight_bytes * copies, rng);
    DeviceBuffer x(size_t{2} * m * shape.k);
    fill_random_bf16(x.get(), size_t{2} * m * shape.k, rng);
    DeviceBuffer out(dtype_size(shape.out_dtype) * m * shape.n);
    cuda::LinearArgs args{DType::kBF16, shape.out_dtype, x.get(), shape.k, nullptr, shape.k,
                          out.get(),    shape.n,         m,       shape.n, shape.k};
    const double ms = time_graph_ms(stream, [&] {
      for (int c = 0; c < copies; ++c) {
        args.weight = weights.get<char>() + c * weight_bytes;
        linear.run(args, stream);
      }
    });
    const double us = ms * 1e3 / copies;
    rows.push_back({fmt::format("cuBLASLt {} [{}x{}]", shape.name, shape.n, shape.k), m, us,
                    weight_bytes / (us * 1e-6) / 1e9, us * shape.per_step});
  }
  return rows;
}

// The four fused GEMVs of every layer (norm + qkv_proj, o_proj + residual add, norm +
// gate_up_proj, SiLU + down_proj + residual add), or with `fused_mlp` the first two and the
// MLP in one kernel (rms_norm_mlp), over 28 layers of distinct weights in one graph, at one
// row, as a batch-1 step runs them less attention: what the kernels cost one after another,
// each starting while the one before drains. Microseconds per step.
double bench_layer_chain(bool fused_mlp, int num_sms, cudaStream_t stream, std::mt19937& rng) {
  constexpr int64_t kQ = int64_t{kNumHeads} * kHeadDim;
  const size_t layer_elems =
      size_t{kQkvWidth} * kHidden + size_t{kHidden} * kQ + size_t{3} * kIntermediate * kHidden;
  DeviceBuffer weights(2 * layer_elems * kLayers);
  fill_random_bf16(weights.get(), 2 * layer_elems * kLayers, rng);
  DeviceBuffer h(2 * kHidden), qkv(2 * kQkvWidth), attn(2 * kQ), gate_up(4 * kIntermediate);
  DeviceBuffer norm(2 * kHidden);
  fill_random_bf16(norm.get(), 2 * kHidden, rng);
  fill_random_bf16(h.get(), 2 * kHidden, rng);
  fill_random_bf16(attn.get(), 2 * kQ, rng);
  DeviceBuffer pending(sizeof(int64_t) * kHidden);
  NVLLM_CUDA_CHECK(cudaMemset(pending.get(), 0, pending.bytes()));
  int64_t* const pending_sum = fused_mlp ? pending.get<int64_t>() : nullptr;
  const auto gemv = [&](const void* x, int64_t ldx, const void* w, int64_t n, int64_t k, void* out,
                        bool with_norm, bool silu, bool add) {
    cuda::GemvArgs args{DType::kBF16, DType::kBF16, x, ldx, w, k, out, n, 1, n, k};
    if (!silu) args.pending = pending_sum;
    if (with_norm) {
      args.norm_weight = norm.get();
      args.eps = 1e-6f;
    }
    args.silu_gate = silu;
    if (add) {
      args.residual = out;
      args.ldr = n;
    }
    cuda::gemv(args, stream);
  };
  const double ms = time_graph_ms(stream, [&] {
    const auto* w = weights.get<uint16_t>();
    for (int l = 0; l < kLayers; ++l) {
      const auto* qkv_w = w + l * layer_elems;
      const auto* o_w = qkv_w + size_t{kQkvWidth} * kHidden;
      const auto* gate_up_w = o_w + size_t{kHidden} * kQ;
      const auto* down_w = gate_up_w + size_t{2} * kIntermediate * kHidden;
      gemv(h.get(), kHidden, qkv_w, kQkvWidth, kHidden, qkv.get(), true, false, false);
      gemv(attn.get(), kQ, o_w, kHidden, kQ, h.get(), false, false, true);
      if (fused_mlp) {
        cuda::RmsNormMlpArgs args = mlp_args(h.get(), norm.get(), pending_sum, num_sms);
        args.gate_up = gate_up_w;
        args.down = down_w;
        cuda::rms_norm_mlp(args, stream);
        continue;
      }
      gemv(h.get(), kHidden, gate_up_w, 2 * kIntermediate, kHidden, gate_up.get(), true, false,
           false);
      gemv(gate_up.get(), 2 * kIntermediate, down_w, kHidden, kIntermediate, h.get(), false, true,
           true);
    }
  });
  return ms * 1e3;
}

int run(cudaStream_t stream, const cudaDeviceProp& prop) {
  std::mt19937 rng(0);
  const double copy_gbps = copy_bandwidth(stream);
  fmt::print("device: {} ({} SMs), device-to-device copy {:.0f} GB/s (read + write)\n", prop.name,
             prop.multiProcessorCount, copy_gbps);
  fmt::print("decode ops of Qwen3-0.6B (bf16), each in a graph of back-to-back calls\n\n");
  fmt::print("| op | rows | us / call | GB/s | % of copy | us / step |\n");
  fmt::print("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  for (int m : {1, 8}) {
    double step_us = 0.0, fused_step_us = 0.0;
    std::vector<Row> rows = bench_batch(m, stream, rng);
    if (m == 1) rows.push_back(bench_fused_mlp(prop.multiProcessorCount, stream, rng));
    for (const Row& r : rows) {
      if (r.step != Step::kNeither) (r.step == Step::kFused ? fused_step_us : step_us) += r.step_us;
      const std::string bandwidth =
          r.gbps > 0 ? fmt::format("{:.0f} | {:.1f}", r.gbps, 100.0 * r.gbps / copy_gbps) : "|";
      fmt::print("| {} | {} | {:.2f} | {} | {:.1f} |\n", r.op, r.m, r.us, bandwidth, r.step_us);
      std::fflush(stdout);
    }
    const double weight_bytes =
        2.0 * (kLayers * (double(kQkvWidth) * kHidden + kHidden * kNumHeads * kHeadDim +
                          3.0 * kIntermediate * kHidden) +
               double(kVocab) * kHidden);
    fmt::print(
        "| sum over a step, rows {}, separate ops (no attention, sampling) | | | | | {:.1f} |\n", m,
        step_us);
    fmt::print(
        "| sum over a step, rows {}, fused linears (no attention, sampling) | | | | | {:.1f} |\n",
        m, fused_step_us);
    fmt::print("| weight-streaming floor, rows {} | | | | | {:.1f} |\n", m,
               weight_bytes / (copy_gbps * 1e9) * 1e6);
  }
  double wide_step_us = 0.0;
  constexpr int kWideRows = 128;
  for (const Row& r : bench_wide_batch(kWideRows, stream, rng)) {
    wide_step_us += r.step_us;
    fmt::print("| {} | {} | {:.2f} | {:.0f} | {:.1f} | {:.1f} |\n", r.op, r.m, r.us, r.gbps,
               100.0 * r.gbps / copy_gbps, r.step_us);
    std::fflush(stdout);
  }
  fmt::print("| sum over a step's linears, rows {} | | | | | {:.1f} |\n", kWideRows, wide_step_us);
  const double layer_bytes = 2.0 * (double(kQkvWidth) * kHidden + kHidden * kNumHeads * kHeadDim +
                                    3.0 * kIntermediate * kHidden);
  fmt::print("\nat the copy bandwidth a layer's weights take {:.2f} us\n",
             layer_bytes / (copy_gbps * 1e9) * 1e6);
  for (bool fused_mlp : {false, true}) {
    const double chain_us = bench_layer_chain(fused_mlp, prop.multiProcessorCount, stream, rng);
    fmt::print(
        "{} of 28 layers in one graph, 1 row: {:.1f} us a step, {:.2f} us a layer ({:.1f}% of "
        "copy)\n",
        fused_mlp ? "qkv_proj, o_proj and the MLP kernel" : "the four fused GEMVs", chain_us,
        chain_us / kLayers, 100.0 * kLayers * layer_bytes / (chain_us * 1e-6) / 1e9 / copy_gbps);
  }
  return 0;
}

}  // namespace
}  // namespace nanovllm

int main() {
  return nanovllm::bench::bench_main("decode_ops_bench", nanovllm::run);
}
