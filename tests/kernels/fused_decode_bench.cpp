// The fused decode kernel (fused_decode.h) on Qwen3-0.6B's geometry: every layer of a decode
// step at batch 1, 2, 4 and 8 and contexts of 128 to 4,096 keys, replayed as a CUDA graph,
// against the weight bytes it must stream (and the device-to-device copy bandwidth); then, at
// batch 1, where a CTA's time goes, phase by phase, from the kernel's timeline (median over
// CTAs and layers).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "cross_sm_latency.h"
#include "cuda_bench_util.h"
#include "kernels/cuda/fused_decode.h"

namespace nanovllm {
namespace {

using namespace bench;

constexpr int kBlockSize = 256;
constexpr int kMaxContext = 4096;
constexpr int kMaxPositions = 4096;
constexpr int kBlocksPerSeq = kMaxContext / kBlockSize;
// The bench's batch-1 run (128 prompt tokens, 1,024 generated) goes from 129 to 1,152 keys.
constexpr int kTimelineContext = 640;

// Random bf16 weights and caches, and the launch arguments over them.
struct Model {
  std::vector<DeviceBuffer*> owned;
  cuda::FusedDecodeArgs args;
  size_t layer_weight_bytes = 0;

  void* take(size_t bytes, std::mt19937& rng) {
    owned.push_back(new DeviceBuffer(bytes));
    fill_random_bf16(owned.back()->get(), bytes, rng);
    return owned.back()->get();
  }
  ~Model() {
    for (DeviceBuffer* b : owned) delete b;
  }
};

int run(cudaStream_t stream, const cudaDeviceProp& properties) {
  std::mt19937 rng(1);
  const double copy_gbps = copy_bandwidth(stream);
  Model model;
  cuda::FusedDecodeArgs& args = model.args;
  const size_t e = 2;
  const int qkv_rows = (kNumHeads + 2 * kNumKvHeads) * kHeadDim;
  const int num_blocks = cuda::kFusedDecodeMaxRows * kBlocksPerSeq;
  const size_t cache_bytes = size_t{1} * num_blocks * kBlockSize * kNumKvHeads * kHeadDim * e;
  for (int l = 0; l < kLayers; ++l) {
    cuda::FusedDecodeLayer& layer = args.layers[l];
    layer.input_norm = model.take(kHidden * e, rng);
    layer.qkv_proj = model.take(size_t{1} * qkv_rows * kHidden * e, rng);
    layer.q_norm = model.take(kHeadDim * e, rng);
    layer.k_norm = model.take(kHeadDim * e, rng);
    layer.o_proj = model.take(size_t{1} * kHidden * kNumHeads * kHeadDim * e, rng);
    layer.post_norm = model.take(kHidden * e, rng);
    layer.gate_up_proj = model.take(size_t{2} * kIntermediate * kHidden * e, rng);
    layer.down_proj = model.take(size_t{1} * kHidden * kIntermediate * e, rng);
    layer.k_cache = model.take(cache_bytes, rng);
    layer.v_cache = model.take(cache_bytes, rng);
  }
  model.layer_weight_bytes =
      e * kHidden * (size_t{1} * qkv_rows + kNumHeads * kHeadDim + 3 * kIntermediate);
  args.embed_tokens = model.take(size_t{1} * kVocab * kHidden * e, rng);
  args.vocab = kVocab;
  args.eps = 1e-6f;
  args.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  std::vector<float> cos_sin(size_t{1} * kMaxPositions * kHeadDim, 0.5f);
  DeviceBuffer table(cos_sin.size() * sizeof(float));
  NVLLM_CUDA_CHECK(cudaMemcpy(table.get(), cos_sin.data(), cos_sin.size() * sizeof(float),
                              cudaMemcpyHostToDevice));
  args.cos_sin = table.get<float>();
  args.max_positions = kMaxPositions;
  args.num_slots = int64_t{num_blocks} * kBlockSize;

  // Row r: blocks r * kBlocksPerSeq + ...; a context sets positions and this step's slot.
  const int rows = cuda::kFusedDecodeMaxRows;
  std::vector<int32_t> ids(rows), tables(size_t{1} * rows * kBlocksPerSeq);
  for (int r = 0; r < rows; ++r) {
    ids[r] = static_cast<int32_t>(rng() % kVocab);
    for (int b = 0; b < kBlocksPerSeq; ++b) tables[r * kBlocksPerSeq + b] = r * kBlocksPerSeq + b;
  }
  const auto upload = [&](const std::vector<int32_t>& v) {
    model.owned.push_back(new DeviceBuffer(v.size() * sizeof(int32_t)));
    NVLLM_CUDA_CHECK(cudaMemcpy(model.owned.back()->get(), v.data(), v.size() * sizeof(int32_t),
                                cudaMemcpyHostToDevice));
    return model.owned.back()->get<const int32_t>();
  };
  args.input_ids = upload(ids);
  args.block_tables = upload(tables);
  DeviceBuffer positions(rows * sizeof(int32_t)), contexts(rows * sizeof(int32_t)),
      slots(rows * sizeof(int32_t));
  args.positions = positions.get<const int32_t>();
  args.context_lens = contexts.get<const int32_t>();
  args.slot_mapping = slots.get<const int32_t>();
  const auto set_context = [&](int context) {
    std::vector<int32_t> position(rows, context - 1), length(rows, context), slot(rows);
    for (int r = 0; r < rows; ++r) {
      slot[r] = tables[r * kBlocksPerSeq + (context - 1) / kBlockSize] * kBlockSize +
                (context - 1) % kBlockSize;
    }
    NVLLM_CUDA_CHECK(cudaMemcpy(positions.get(), position.data(), rows * sizeof(int32_t),
                                cudaMemcpyHostToDevice));
    NVLLM_CUDA_CHECK(
        cudaMemcpy(contexts.get(), length.data(), rows * sizeof(int32_t), cudaMemcpyHostToDevice));
    NVLLM_CUDA_CHECK(
        cudaMemcpy(slots.get(), slot.data(), rows * sizeof(int32_t), cudaMemcpyHostToDevice));
  };
  args.block_table_stride = kBlocksPerSeq;
  DeviceBuffer hidden(size_t{1} * rows * kHidden * e), residual(size_t{1} * rows * kHidden * e);
  args.hidden_out = hidden.get();
  args.residual_out = residual.get();

  cuda::FusedDecodeShape shape{DType::kBF16, kLayers,     1,        kHidden,   kIntermediate,
                               kNumHeads,    kNumKvHeads, kHeadDim, kBlockSize};
  const size_t scratch_bytes = cuda::fused_decode_scratch_bytes(shape);
  DeviceBuffer scratch(scratch_bytes);
  NVLLM_CUDA_CHECK(cudaMemset(scratch.get(), 0, scratch_bytes));
  args.scratch = scratch.get();

  const bench::CrossSmLatency hop = bench::cross_sm_latency(stream);
  fmt::print("cross-SM round trip of a tagged word: {:.0f} ns; SM clock {:.2f} GHz\n",
             hop.round_trip_ns, hop.sm_clock_ghz);
  const double weight_bytes = static_cast<double>(model.layer_weight_bytes) * kLayers;
  fmt::print("{}: {} SMs; device-to-device copy {:.0f} GB/s; {} layers, {:.1f} MB of weights\n",
             properties.name, properties.multiProcessorCount, copy_gbps, kLayers,
             weight_bytes / 1e6);
  fmt::print("{:>5} {:>8} {:>10} {:>10} {:>8} {:>10}\n", "batch", "context", "us/step", "us/layer",
             "GB/s", "% of copy");
  for (const auto& [r, context] :
       {std::pair{1, 128}, std::pair{1, 640}, std::pair{1, 1152}, std::pair{1, 4096},
        std::pair{2, 640}, std::pair{4, 640}, std::pair{8, 640}, std::pair{8, 4096}}) {
    shape.rows = r;
    args.shape = shape;
    set_context(context);
    const double ms = time_graph_ms(stream, [&] { cuda::fused_decode(args, stream); });
    const double gbps = weight_bytes / (ms * 1e-3) / 1e9;
    fmt::print("{:>5} {:>8} {:>10.1f} {:>10.2f} {:>8.0f} {:>10.1f}\n", r, context, ms * 1e3,
               ms * 1e3 / kLayers, gbps, 100.0 * gbps / copy_gbps);
  }

  // Batch 1 with the timeline: per phase, the wait for its input (and the norm), its main
  // work, and the time that work waited for weights.
  shape.rows = 1;
  args.shape = shape;
  set_context(kTimelineContext);
  const int entries = 1 + kLayers * cuda::kFusedDecodeEvents;
  const int ctas = properties.multiProcessorCount;
  const size_t timeline_bytes = size_t{1} * ctas * entries * sizeof(uint64_t);
  DeviceBuffer timeline(timeline_bytes);
  args.timeline = timeline.get<uint64_t>();
  for (int i = 0; i < 3; ++i) {
    NVLLM_CUDA_CHECK(cudaMemsetAsync(timeline.get(), 0, timeline_bytes, stream));
    cuda::fused_decode(args, stream);
  }
  NVLLM_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<uint64_t> marks(size_t{1} * ctas * entries);
  NVLLM_CUDA_CHECK(
      cudaMemcpy(marks.data(), timeline.get(), timeline_bytes, cudaMemcpyDeviceToHost));
  // Median over CTAs and the middle layers of f(layer's entries, previous layer's barrier end).
  const auto median_of = [&](auto f) {
    std::vector<double> values;
    for (int c = 0; c < ctas; ++c) {
      for (int l = 1; l + 1 < kLayers; ++l) {
        const uint64_t* e =
            marks.data() + size_t{1} * c * entries + 1 + l * cuda::kFusedDecodeEvents;
        const double v = f(e, e[cuda::kDownDone - cuda::kFusedDecodeEvents]);
        if (v >= 0.0) values.push_back(v);
      }
    }
    return values.empty()
               ? std::pair{0.0, 0.0}
               : std::pair{median(values), *std::max_element(values.begin(), values.end())};
  };
  const auto span = [&](int from, int to) {
    return median_of([=](const uint64_t* e, uint64_t before) {
      const uint64_t a = from < 0 ? before : e[from];
      return a == 0 || e[to] == 0 ? -1.0 : (static_cast<double>(e[to]) - a) * 1e-3;
    });
  };
  const auto value = [&](int at) {
    return median_of([=](const uint64_t* e, uint64_t) { return e[at] * 1e-3; }).first;
  };
  // "median/max" of a span.
  const auto cell = [&](int from, int to) {
    const auto [mid, most] = span(from, to);
    return fmt::format("{:.2f}/{:.2f}", mid, most);
  };
  using namespace cuda;
  fmt::print("\nbatch 1, context {}: one layer, median over CTAs and layers 1..{} (us):\n",
             kTimelineContext, kLayers - 2);
  fmt::print("{:<10} {:>12} {:>12} {:>10}   (median/max over CTAs)\n", "phase", "input", "work",
             "ring wait");
  fmt::print("{:<10} {:>12} {:>12} {:>10.2f}\n", "qkv_proj", cell(-1, kQkvInput),
             cell(kQkvInput, kQkvDone), value(kQkvRingWait));
  fmt::print("{:<10} {:>12} {:>12}\n", "attention", cell(kQkvDone, kAttnQuery),
             cell(kAttnQuery, kAttnDone));
  fmt::print("{:<10} {:>12} {:>12} {:>10.2f}\n", "o_proj", cell(kAttnDone, kOInput),
             cell(kOInput, kODone), value(kORingWait));
  fmt::print("{:<10} {:>12} {:>12} {:>10.2f}\n", "gate_up", cell(kODone, kMlpInput),
             cell(kMlpInput, kMlpDone), value(kMlpRingWait));
  fmt::print("{:<10} {:>12} {:>12} {:>10.2f}\n", "down_proj", cell(kMlpDone, kDownInput),
             cell(kDownInput, kDownDone), value(kDownRingWait));
  fmt::print("{:<10} {:>12}\n", "layer", cell(-1, kDownDone));
  return 0;
}

}  // namespace
}  // namespace nanovllm

int main() {
  return nanovllm::bench::bench_main("fused_decode_bench", nanovllm::run);
}
