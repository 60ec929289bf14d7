// The mixture-of-experts ops of Qwen3-30B-A3B (hidden 2048, intermediate 768, 128 experts, top
// 8) and of its TP=2 shard (intermediate 384), in bf16 on one GPU, as the engine runs them
// (cuda::moe_experts, moe/moe.h), with router ids drawn from the softmax of random logits
// (cuda::moe_route on normal logits: a realistic spread over the experts):
// - at decode sizes (1 to 384 rows), against the device-to-device copy bandwidth: the weights of
//   the experts a call touches (gate_up and down) are read once, so their bytes / time over the
//   copy's GB/s (read + write) is the fraction of the floor reached. The calls of a graph cycle
//   over distinct routings and two copies of the weights, so that L2 does not keep them;
// - at prefill sizes (2,048 to 16,384 rows), against the dense bf16 peak measured in the same
//   run (an 8192 x 8192 x 8192 cuBLASLt product), counting 2 * T * k * 3 * H * I flops.
// The router is timed apart. From 128 rows on, the whole op is also timed through each of its
// paths (the mma.sync GEMMs at 16- or 32-row tiles, CUTLASS's at 128), whichever moe_tiles_for
// would pick, to place the switches between them. At 1 and 384 rows the stages of the path the
// engine takes are timed cumulatively (align; + gate_up; + down; + combine), and at 2,048 and
// 16,384 rows those of the CUTLASS path (align; + gather; + gate_up; + silu_mul; + down;
// + combine). Each figure is a call in a graph of back-to-back calls, median of replays.
//   usage: moe_bench
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>
#include <random>
#include <set>
#include <vector>

#include "cuda_bench_util.h"
#include "kernels/cuda/linear/cublaslt_linear.h"
#include "kernels/cuda/moe/moe.h"
#include "kernels/cuda/runtime/device_allocator.h"

namespace nanovllm {
namespace {

using namespace bench;

constexpr int kModelHidden = 2048;
constexpr int kExperts = 128;
constexpr int kTopK = 8;
constexpr int kIntermediates[] = {768, 384};  // the model, its TP=2 shard
constexpr int kDecodeRows[] = {1, 8, 32, 64, 128, 160, 192, 224, 256, 320, 384};
// The decode sizes also timed through each of moe_experts' paths (moe_tiles_for picks one).
constexpr int kPathRowsFrom = 128;
constexpr cuda::MoeTiles kPaths[] = {cuda::MoeTiles::kDecode, cuda::MoeTiles::kDecodeWide,
                                     cuda::MoeTiles::kPrefill};
constexpr int kPrefillRows[] = {2048, 8192, 16384};
constexpr int kRoutings = 4;      // distinct routings a decode graph cycles over
constexpr int kWeightCopies = 2;  // and copies of the weights

// One routing of `rows` rows: ids and weights on the device, and how many experts it touches.
struct Routing {
  DeviceBuffer ids;
  DeviceBuffer weights;
  int touched = 0;
  int rows = 0;
  explicit Routing(int rows)
      : ids(size_t{4} * rows * kTopK), weights(size_t{4} * rows * kTopK), rows(rows) {}
};

// Routes `rows` rows of normal random logits (bf16) with moe_route; returns the router's time
// per call in us when `time_router`.
double make_routing(Routing& routing, int rows, std::mt19937& rng, cudaStream_t stream,
                    bool time_router) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint16_t> host(static_cast<size_t>(rows) * kExperts);
  for (uint16_t& v : host) v = float_to_bf16(normal(rng));
  DeviceBuffer logits(host.size() * 2);
  NVLLM_CUDA_CHECK(cudaMemcpy(logits.get(), host.data(), host.size() * 2, cudaMemcpyHostToDevice));
  cuda::MoeRouteArgs args;
  args.dtype = DType::kBF16;
  args.logits = logits.get();
  args.logits_stride = kExperts;
  args.rows = rows;
  args.experts = kExperts;
  args.top_k = kTopK;
  args.normalize = true;
  args.weights = routing.weights.get<float>();
  args.ids = routing.ids.get<int32_t>();
  double us = 0.0;
  if (time_router) {
    us = 1e3 * time_graph_ms(stream, [&] { cuda::moe_route(args, stream); });
  } else {
    cuda::moe_route(args, stream);
  }
  NVLLM_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<int32_t> ids(static_cast<size_t>(rows) * kTopK);
  NVLLM_CUDA_CHECK(
      cudaMemcpy(ids.data(), routing.ids.get(), ids.size() * 4, cudaMemcpyDeviceToHost));
  routing.touched = static_cast<int>(std::set<int32_t>(ids.begin(), ids.end()).size());
  return us;
}

cuda::MoeExpertsArgs experts_args(int rows, int intermediate, const Routing& routing,
                                  const void* gate_up, const void* down, const DeviceBuffer& x,
                                  const DeviceBuffer& out) {
  cuda::MoeExpertsArgs args;
  args.dtype = DType::kBF16;
  args.x = x.get();
  args.x_stride = kModelHidden;
  args.ids = routing.ids.get<int32_t>();
  args.weights = routing.weights.get<float>();
  args.gate_up = gate_up;
  args.down = down;
  args.out = out.get();
  args.out_stride = kModelHidden;
  args.rows = rows;
  args.hidden = kModelHidden;
  args.intermediate = intermediate;
  args.experts = kExperts;
  args.top_k = kTopK;
  return args;
}

// The sizes and tile map of moe_experts' stages at `rows` rows with `tiles`.
cuda::MoeCutlassArgs stage_args(int rows, int intermediate, cuda::MoeTiles tiles) {
  cuda::MoeCutlassArgs c;
  cuda::MoeGemmArgs& gemm = c.gemm;
  gemm.dtype = DType::kBF16;
  gemm.tiles = tiles;
  gemm.pairs = static_cast<int64_t>(rows) * kTopK;
  gemm.experts = kExperts;
  gemm.top_k = kTopK;
  gemm.hidden = kModelHidden;
  gemm.intermediate = intermediate;
  gemm.map.tile_rows = cuda::moe_tile_rows(tiles);
  gemm.map.max_tiles = cuda::moe_max_tiles(gemm.pairs, kExperts, gemm.map.tile_rows);
  return c;
}

// The buffers of moe_experts' stages, for timing them one by one: the mma.sync path's, or at
// kPrefill (bf16) the CUTLASS path's.
struct StageBuffers {
  cuda::MoeCutlassArgs c;  // c.gemm serves the mma.sync path too
  int64_t slots;
  bool cutlass;  // the CUTLASS path, with its own buffers; else the mma.sync path's weighted
  DeviceBuffer sorted, tile_experts, count, align_scratch, act, weighted, xs, gu, pair_slots,
      scratch;
  StageBuffers(int rows, int intermediate, cuda::MoeTiles tiles, const DeviceBuffer& x)
      : c(stage_args(rows, intermediate, tiles)),
        slots(c.gemm.map.max_tiles * c.gemm.map.tile_rows),
        cutlass(tiles == cuda::MoeTiles::kPrefill),
        sorted(size_t{4} * slots),
        tile_experts(size_t{4} * c.gemm.map.max_tiles),
        count(4),
        align_scratch(size_t{4} * cuda::moe_align_scratch_ints(c.gemm.pairs, kExperts)),
        act(size_t{2} * slots * intermediate),
        weighted(cutlass ? 0 : size_t{2} * c.gemm.pairs * kModelHidden),
        xs(cutlass ? size_t{2} * slots * kModelHidden : 0),
        gu(cutlass ? size_t{4} * slots * intermediate : 0),
        pair_slots(cutlass ? size_t{4} * c.gemm.pairs : 0),
        scratch(cutlass ? cuda::moe_cutlass_scratch_bytes(kExperts) : 0) {
    cuda::MoeGemmArgs& gemm = c.gemm;
    gemm.map.sorted_pairs = sorted.get<int32_t>();
    gemm.map.tile_experts = tile_experts.get<int32_t>();
    gemm.map.num_tiles = count.get<int32_t>();
    gemm.map.align_scratch = align_scratch.get<int32_t>();
    c.x = x.get();
    c.x_stride = kModelHidden;
    c.xs = xs.get();
    c.gu = gu.get();
    c.act = act.get();
    c.y = xs.get();
    c.pair_slots = pair_slots.get<int32_t>();
    c.scratch = scratch.get();
  }
  // The stages of the path, in order.
  std::vector<const char*> stage_names() const {
    if (cutlass) return {"align", "+ gather", "+ gate_up", "+ silu_mul", "+ down", "+ combine"};
    return {"align", "+ gate_up", "+ down", "+ combine"};
  }
};

// The first `stages` stages of moe_experts' path in `b`, a call per routing (cycling over the
// weight copies), in us per call.
double time_stages(StageBuffers& b, int stages, const std::vector<const Routing*>& routings,
                   const std::vector<const char*>& gate_ups, const std::vector<const char*>& downs,
                   const DeviceBuffer& out, cudaStream_t stream) {
  const cuda::MoeGemmArgs& gemm = b.c.gemm;
  const int rows = static_cast<int>(gemm.pairs / kTopK);
  const int calls = static_cast<int>(routings.size());
  return 1e3 / calls * time_graph_ms(stream, [&] {
           for (int call = 0; call < calls; ++call) {
             const Routing& r = *routings[call];
             const char* gate_up = gate_ups[call % gate_ups.size()];
             const char* down = downs[call % downs.size()];
             const int32_t* ids = r.ids.get<int32_t>();
             if (b.cutlass) {
               b.c.ids = ids;
               b.c.gate_up = gate_up;
               b.c.down = down;
               b.c.stages = std::min(stages, 5);
               cuda::moe_cutlass_experts(b.c, stream);
               if (stages >= 6) {
                 cuda::moe_combine_slots(DType::kBF16, b.c.y, b.c.pair_slots, ids,
                                         r.weights.get<float>(), rows, kTopK, kExperts,
                                         kModelHidden, out.get(), kModelHidden, stream);
               }
               continue;
             }
             cuda::moe_align(ids, gemm.pairs, kExperts, gemm.map, stream);
             if (stages >= 2) {
               cuda::moe_gate_up(gemm, b.c.x, kModelHidden, gate_up, b.act.get(), stream);
             }
             if (stages >= 3) {
               cuda::moe_down(gemm, b.act.get(), r.weights.get<float>(), down, b.weighted.get(),
                              stream);
             }
             if (stages >= 4) {
               cuda::moe_combine(DType::kBF16, b.weighted.get(), ids, rows, kTopK, kExperts,
                                 kModelHidden, out.get(), kModelHidden, stream);
             }
           }
         });
}

const char* tiles_name(cuda::MoeTiles tiles) {
  switch (tiles) {
    case cuda::MoeTiles::kDecode:
      return "16-row tiles";
    case cuda::MoeTiles::kDecodeWide:
      return "32-row tiles";
    case cuda::MoeTiles::kPrefill:
      break;
  }
  return "CUTLASS";
}

// Every stage of the path `tiles` at `rows` rows, timed cumulatively.
void print_stages(int rows, int intermediate, cuda::MoeTiles tiles,
                  const std::vector<const Routing*>& routings,
                  const std::vector<const char*>& gate_ups, const std::vector<const char*>& downs,
                  const DeviceBuffer& x, const DeviceBuffer& out, cudaStream_t stream) {
  StageBuffers b(rows, intermediate, tiles, x);
  const std::vector<const char*> names = b.stage_names();
  std::printf("  %s, stages at %d rows, I %d:", tiles_name(tiles), rows, intermediate);
  for (int stages = 1; stages <= static_cast<int>(names.size()); ++stages) {
    std::printf("  %s %.2f us", names[stages - 1],
                time_stages(b, stages, routings, gate_ups, downs, out, stream));
  }
  std::printf("\n");
}

int run(cudaStream_t stream, const cudaDeviceProp& properties) {
  cuda::register_cuda_allocator();
  std::mt19937 rng(1);
  const double bandwidth = copy_bandwidth(stream);  // GB/s, read + write
  double peak_tflops = 0;
  {
    cuda::CublasLtLinear linear;
    const int64_t n = 8192;
    DeviceBuffer w(size_t{2} * n * n), x(size_t{2} * n * n), out(size_t{2} * n * n);
    fill_random_bf16(w.get(), w.bytes(), rng);
    fill_random_bf16(x.get(), x.bytes(), rng);
    cuda::LinearArgs args;
    args.x = x.get();
    args.ldx = n;
    args.weight = w.get();
    args.ldw = n;
    args.out = out.get();
    args.ldo = n;
    args.m = args.n = args.k = n;
    const double ms = time_graph_ms(stream, [&] { linear.run(args, stream); });
    peak_tflops = 2.0 * n * n * n / (ms * 1e-3) / 1e12;
  }
  std::printf("%s: copy %.0f GB/s (read + write), dense bf16 peak %.0f TFLOP/s (8192^3)\n",
              properties.name, bandwidth, peak_tflops);
  std::printf("Qwen3-30B-A3B experts: hidden %d, %d experts, top %d, bf16\n", kModelHidden,
              kExperts, kTopK);

  const int max_rows = kPrefillRows[std::size(kPrefillRows) - 1];
  DeviceBuffer x(size_t{2} * max_rows * kModelHidden), out(size_t{2} * max_rows * kModelHidden);
  fill_random_bf16(x.get(), x.bytes(), rng);

  // The routings of every size, and the router's time.
  std::printf("%-10s %6s %10s\n", "router", "rows", "us");
  std::vector<std::deque<Routing>> decode_routings;
  for (int rows : kDecodeRows) {
    std::deque<Routing> routings;
    for (int c = 0; c < kRoutings; ++c) {
      routings.emplace_back(rows);
      const double us = make_routing(routings.back(), rows, rng, stream, c == 0);
      if (c == 0) std::printf("%-10s %6d %10.2f\n", "moe_route", rows, us);
    }
    decode_routings.push_back(std::move(routings));
  }
  std::deque<Routing> prefill_routings;
  for (int rows : kPrefillRows) {
    prefill_routings.emplace_back(rows);
    const double us = make_routing(prefill_routings.back(), rows, rng, stream, true);
    std::printf("%-10s %6d %10.2f\n", "moe_route", rows, us);
  }

  std::printf("%-6s %6s %10s %9s %9s %9s\n", "I", "rows", "us", "experts", "MB", "GB/s");
  for (int intermediate : kIntermediates) {
    const size_t gate_up_bytes = size_t{2} * kExperts * 2 * intermediate * kModelHidden;
    const size_t down_bytes = size_t{2} * kExperts * kModelHidden * intermediate;
    const size_t expert_bytes = (gate_up_bytes + down_bytes) / kExperts;
    DeviceBuffer weights((gate_up_bytes + down_bytes) * kWeightCopies);
    fill_random_bf16(weights.get(), weights.bytes(), rng);
    std::vector<const char*> gate_ups, downs;
    for (int c = 0; c < kWeightCopies; ++c) {
      gate_ups.push_back(weights.get<char>() + c * (gate_up_bytes + down_bytes));
      downs.push_back(gate_ups.back() + gate_up_bytes);
    }
    size_t scratch_bytes = 0;
    for (int rows : kPrefillRows) {
      scratch_bytes =
          std::max(scratch_bytes,
                   cuda::moe_experts_scratch_bytes(experts_args(
                       rows, intermediate, prefill_routings[0], gate_ups[0], downs[0], x, out)));
    }
    DeviceBuffer scratch(scratch_bytes);

    for (size_t i = 0; i < std::size(kDecodeRows); ++i) {
      const int rows = kDecodeRows[i];
      const std::deque<Routing>& routings = decode_routings[i];
      double touched = 0;
      for (const Routing& r : routings) touched += r.touched;
      touched /= kRoutings;
      const double us = 1e3 / kRoutings * time_graph_ms(stream, [&] {
                          for (int c = 0; c < kRoutings; ++c) {
                            cuda::moe_experts(experts_args(rows, intermediate, routings[c],
                                                           gate_ups[c % kWeightCopies],
                                                           downs[c % kWeightCopies], x, out),
                                              scratch.get(), stream);
                          }
                        });
      const double bytes = touched * expert_bytes;
      const double gbps = bytes / (us * 1e-6) / 1e9;
      std::printf("%-6d %6d %10.2f %9.1f %9.1f %9.0f %6.1f%%  (of copy)\n", intermediate, rows, us,
                  touched, bytes / 1e6, gbps, 100.0 * gbps / bandwidth);
    }
    for (size_t i = 0; i < std::size(kPrefillRows); ++i) {
      const int rows = kPrefillRows[i];
      const double us = 1e3 * time_graph_ms(stream, [&] {
                          cuda::moe_experts(experts_args(rows, intermediate, prefill_routings[i],
                                                         gate_ups[0], downs[0], x, out),
                                            scratch.get(), stream);
                        });
      const double tflops =
          2.0 * rows * kTopK * 3.0 * kModelHidden * intermediate / (us * 1e-6) / 1e12;
      std::printf("%-6d %6d %10.2f %9d %9s %9s %6.1f%%  (of peak, %.0f TFLOP/s)\n", intermediate,
                  rows, us, prefill_routings[i].touched, "", "", 100.0 * tflops / peak_tflops,
                  tflops);
    }
    // The larger decode batches through each path, the whole op (moe_combine included).
    std::printf("  the whole op by path, us (of the floor):\n  %6s", "rows");
    for (cuda::MoeTiles tiles : kPaths) std::printf(" %20s", tiles_name(tiles));
    std::printf("   engine's choice\n");
    for (size_t i = 0; i < std::size(kDecodeRows); ++i) {
      const int rows = kDecodeRows[i];
      if (rows < kPathRowsFrom) continue;
      std::vector<const Routing*> each;
      double touched = 0;
      for (const Routing& r : decode_routings[i]) {
        each.push_back(&r);
        touched += r.touched;
      }
      const double floor_us = touched / kRoutings * expert_bytes / (bandwidth * 1e3);
      std::printf("  %6d", rows);
      for (cuda::MoeTiles tiles : kPaths) {
        StageBuffers b(rows, intermediate, tiles, x);
        const int stages = static_cast<int>(b.stage_names().size());
        const double us = time_stages(b, stages, each, gate_ups, downs, out, stream);
        std::printf(" %11.2f (%5.1f%%)", us, 100.0 * floor_us / us);
      }
      std::printf("   %s\n", tiles_name(cuda::moe_tiles_for(int64_t{rows} * kTopK, kExperts)));
    }
    for (const std::deque<Routing>* routings :
         {&decode_routings.front(), &decode_routings.back()}) {
      std::vector<const Routing*> each;
      for (const Routing& r : *routings) each.push_back(&r);
      const int rows = routings->front().rows;
      print_stages(rows, intermediate, cuda::moe_tiles_for(int64_t{rows} * kTopK, kExperts), each,
                   gate_ups, downs, x, out, stream);
    }
    for (const Routing& r : prefill_routings) {
      if (&r == &prefill_routings[1]) continue;  // the smallest and the largest
      print_stages(r.rows, intermediate, cuda::MoeTiles::kPrefill, {&r}, gate_ups, downs, x, out,
                   stream);
    }
  }
  return 0;
}

}  // namespace
}  // namespace nanovllm

int main() {
  return nanovllm::bench::bench_main("moe_bench",
                                     [](cudaStream_t stream, const cudaDeviceProp& properties) {
                                       return nanovllm::run(stream, properties);
                                     });
}
