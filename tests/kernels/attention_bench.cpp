// Decode-attention bandwidth on the bench workload's geometry (Qwen3-0.6B: 16 query heads,
// 8 kv heads, head_dim 128, bf16, KV block size 256), or another number of query and kv heads,
// for batches 1, 32, 256 at contexts 512, 2048, 8192, and mixed contexts; or (--splits) the
// time of every split-KV factor against the one the kernel picks, over batches of 1 to 96
// sequences in bands of contexts from 1,000 to 16,000 keys. Each call is timed as
// part of a run over enough distinct caches ("layers") that L2 cannot hold them; the median over
// repetitions is compared with the device-to-device copy bandwidth measured here (read + write
// bytes). Each run over the layers is one CUDA graph. With --power, decode attention at
// bench.py's decode batches is replayed for about 2 s a batch and its power read from NVML:
// sustained, the GPU may run at its power limit, and then the joules a byte decide the speed.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <tuple>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "cuda_bench_util.h"
#include "kernels/cuda/attention/attention.h"
#include "kernels/cuda/attention/attention_launch.cuh"
#include "kernels/cuda/runtime/cuda_check.h"
#include "power_meter.h"

namespace nanovllm {
namespace {

using namespace bench;

constexpr int kBlockSize = 256;
constexpr int kMaxLayers = 128;
constexpr double kPowerSeconds = 2.0;

struct Result {
  int batch;
  int context;
  int layers;
  double us;
  double gbps;
  PowerSample power;  // with a meter: sustained over the layers' graph
};

struct Heads {
  int query = kNumHeads;
  int kv = kNumKvHeads;
};

// One decode attention call per layer over sequences of `contexts` keys, in that order, with
// the keys split `splits` ways (0: as the kernel picks for them); with a meter, its power too.
Result bench_decode(const std::vector<int32_t>& contexts, Heads heads, int num_sms,
                    cudaStream_t stream, std::mt19937& rng, int splits = 0,
                    const PowerMeter* meter = nullptr) {
  const int batch = static_cast<int>(contexts.size());
  const int longest = *std::max_element(contexts.begin(), contexts.end());
  const int blocks_per_seq = (longest + kBlockSize - 1) / kBlockSize;
  const int num_blocks = batch * blocks_per_seq;
  const size_t cache_bytes =
      size_t{2} * num_blocks * kBlockSize * heads.kv * kHeadDim;  // one of K, V (bf16)
  const size_t layer_bytes = 2 * cache_bytes;
  const int layers = static_cast<int>(
      std::clamp<size_t>((kMinBytesPerRun + layer_bytes - 1) / layer_bytes, 1, kMaxLayers));
  DeviceBuffer caches(layer_bytes * layers);
  fill_random_bf16(caches.get(), layer_bytes * layers, rng);

  // Every sequence's blocks are scattered over the pool.
  std::vector<int32_t> pool(num_blocks);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  std::vector<int32_t> cu(batch + 1);
  std::iota(cu.begin(), cu.end(), 0);
  DeviceBuffer tables_d(pool.size() * sizeof(int32_t));
  DeviceBuffer cu_d(cu.size() * sizeof(int32_t));
  DeviceBuffer contexts_d(contexts.size() * sizeof(int32_t));
  NVLLM_CUDA_CHECK(cudaMemcpy(tables_d.get(), pool.data(), pool.size() * sizeof(int32_t),
                              cudaMemcpyHostToDevice));
  NVLLM_CUDA_CHECK(
      cudaMemcpy(cu_d.get(), cu.data(), cu.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
  NVLLM_CUDA_CHECK(cudaMemcpy(contexts_d.get(), contexts.data(), contexts.size() * sizeof(int32_t),
                              cudaMemcpyHostToDevice));

  const int qkv_width = (heads.query + 2 * heads.kv) * kHeadDim;
  DeviceBuffer qkv(size_t{2} * batch * qkv_width);
  DeviceBuffer out(size_t{2} * batch * heads.query * kHeadDim);
  fill_random_bf16(qkv.get(), size_t{2} * batch * qkv_width, rng);

  cuda::PagedAttentionArgs args;
  args.dtype = DType::kBF16;
  args.qkv = qkv.get();
  args.qkv_row_stride = qkv_width;
  args.out = out.get();
  args.out_row_stride = heads.query * kHeadDim;
  args.cu_seqlens_q = cu_d.get<int32_t>();
  args.context_lens = contexts_d.get<int32_t>();
  args.block_tables = tables_d.get<int32_t>();
  args.block_table_stride = blocks_per_seq;
  args.num_seqs = batch;
  args.num_tokens = batch;
  args.max_seqlen_q = 1;
  args.num_heads = heads.query;
  args.num_kv_heads = heads.kv;
  args.head_dim = kHeadDim;
  args.block_size = kBlockSize;
  args.scale = 0.08838834764831845f;
  args.num_sms = num_sms;
  args.max_seqlen_k = longest;
  args.k_cache = caches.get();  // the first layer's, as the runs below set them
  args.v_cache = caches.get<char>() + cache_bytes;
  cuda::check_paged_attention(args);

  const auto run_layers = [&] {
    for (int layer = 0; layer < layers; ++layer) {
      const char* layer_base = caches.get<char>() + layer * layer_bytes;
      args.k_cache = layer_base;
      args.v_cache = layer_base + cache_bytes;
      if (splits == 0) {
        cuda::paged_attention(args, stream);
      } else {
        cuda::attention::launch_attention_decode(args, splits, stream);
      }
    }
  };
  const double ms = bench::time_graph_ms(stream, run_layers);
  const double us = ms * 1e3 / layers;
  const double keys = std::accumulate(contexts.begin(), contexts.end(), 0.0);
  const double bytes = keys * 2 * heads.kv * kHeadDim * 2;
  Result result{batch, static_cast<int>(keys / batch), layers, us, bytes / (us * 1e-6) / 1e9, {}};
  if (meter != nullptr) {
    const CapturedOps ops(stream, run_layers);
    result.power = meter->measure(ops.exec(), stream, kPowerSeconds);
  }
  return result;
}

// Every split-KV factor against the kernel's own choice: batches of 1 to 96 sequences, their
// contexts drawn uniformly from each band, longest first (as the engine orders them).
int sweep_splits(cudaStream_t stream, const cudaDeviceProp& prop, Heads heads) {
  const double copy_gbps = copy_bandwidth(stream);
  fmt::print("device: {} ({} SMs); device-to-device copy {:.0f} GB/s\n", prop.name,
             prop.multiProcessorCount, copy_gbps);
  fmt::print("decode attention, {} heads, {} kv heads: us (% of copy) by split count\n\n",
             heads.query, heads.kv);
  fmt::print("| keys | sequences | picked |");
  for (int s = 1; s <= 8; ++s) fmt::print(" {} |", s);
  fmt::print("\n| --- | ---: | ---: |");
  for (int s = 1; s <= 8; ++s) fmt::print(" ---: |");
  fmt::print("\n");
  for (auto [low, high] : {std::pair{1000, 2000}, std::pair{2000, 4000}, std::pair{4000, 8000},
                           std::pair{8000, 16000}}) {
    for (int batch : {1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96}) {
      std::mt19937 rng(batch * 7 + low);
      std::vector<int32_t> contexts(batch);
      std::uniform_int_distribution<int32_t> context_of(low, high);
      for (int32_t& c : contexts) c = context_of(rng);
      std::sort(contexts.rbegin(), contexts.rend());
      const Result picked = bench_decode(contexts, heads, prop.multiProcessorCount, stream, rng);
      fmt::print("| {} to {} | {} | {:.1f} ({:.0f}%) |", low, high, batch, picked.us,
                 100.0 * picked.gbps / copy_gbps);
      for (int s = 1; s <= 8; ++s) {
        const Result r = bench_decode(contexts, heads, prop.multiProcessorCount, stream, rng, s);
        fmt::print(" {:.1f} ({:.0f}%) |", r.us, 100.0 * r.gbps / copy_gbps);
      }
      fmt::print("\n");
      std::fflush(stdout);
    }
  }
  return 0;
}

// Sustained: decode attention at bench.py's decode batches (its first steps: 256 sequences of
// about 170 to 1,100 keys; 128 of about 1,000; 32 of 2,048), longest first, against the copy
// bandwidth measured cool, as the other modes do.
int power_run(cudaStream_t stream, const cudaDeviceProp& prop, Heads heads) {
  int device = 0;
  NVLLM_CUDA_CHECK(cudaGetDevice(&device));
  const PowerMeter meter(device);
  if (!meter.available()) {
    std::fprintf(stderr, "attention_bench: NVML's energy counter cannot be read here\n");
    return 1;
  }
  const double copy_gbps = copy_bandwidth(stream);
  fmt::print("device: {}; device-to-device copy {:.0f} GB/s; sustained, each for about {:.0f} s:\n",
             prop.name, copy_gbps, kPowerSeconds);
  fmt::print("| decode attention | us | GB/s | of copy | W | SM MHz | pJ a K/V byte |\n");
  fmt::print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
  std::mt19937 rng(0);
  const auto contexts_of = [&](int batch, int low, int high) {
    std::vector<int32_t> contexts(batch);
    std::uniform_int_distribution<int32_t> context_of(low, high);
    for (int32_t& c : contexts) c = context_of(rng);
    std::sort(contexts.rbegin(), contexts.rend());
    return contexts;
  };
  for (auto [batch, low, high] :
       {std::tuple{256, 170, 1100}, std::tuple{128, 900, 1100}, std::tuple{32, 2048, 2048}}) {
    const Result r = bench_decode(contexts_of(batch, low, high), heads, prop.multiProcessorCount,
                                  stream, rng, 0, &meter);
    const double us = r.power.ms_per_replay * 1e3 / r.layers;
    const double bytes = r.gbps * 1e9 * r.us * 1e-6;
    fmt::print(
        "| {} / {} heads, {} x {}..{} keys | {:.1f} | {:.0f} | {:.0f}% | {:.0f} | {} | {:.1f} |\n",
        heads.query, heads.kv, batch, low, high, us, bytes / (us * 1e-6) / 1e9,
        100.0 * bytes / (us * 1e-6) / 1e9 / copy_gbps, r.power.watts, r.power.sm_mhz,
        r.power.millijoules_per_replay() * 1e9 / (bytes * r.layers));
    std::fflush(stdout);
  }
  return 0;
}

int run(cudaStream_t stream, const cudaDeviceProp& prop, Heads heads) {
  std::mt19937 rng(0);

  const double copy_gbps = copy_bandwidth(stream);
  fmt::print("device: {} ({} SMs, L2 {} MB)\n", prop.name, prop.multiProcessorCount,
             prop.l2CacheSize >> 20);
  fmt::print("device-to-device copy: {:.0f} GB/s (read + write)\n", copy_gbps);
  fmt::print("decode attention: {} heads, {} kv heads, head_dim {}, bf16, block size {}\n",
             heads.query, heads.kv, kHeadDim, kBlockSize);

  std::vector<Result> results;
  for (int batch : {1, 32, 256}) {
    for (int context : {512, 2048, 8192}) {
      const Result r = bench_decode(std::vector<int32_t>(batch, context), heads,
                                    prop.multiProcessorCount, stream, rng);
      fmt::print(
          "  B {:>3} ctx {:>4}: {:>8.1f} us  {:>6.0f} GB/s  {:>5.1f}% of copy  ({} caches)\n",
          r.batch, r.context, r.us, r.gbps, 100.0 * r.gbps / copy_gbps, r.layers);
      std::fflush(stdout);
      results.push_back(r);
    }
  }

  // The bench workload's decode batches mix contexts of about 100 to 2,048 keys: the order of
  // the sequences decides which CTAs run last.
  std::vector<int32_t> mixed(131);
  std::uniform_int_distribution<int32_t> context_of(100, 2048);
  for (int32_t& c : mixed) c = context_of(rng);
  // Mixed contexts: `range` names their spread, `order` the order they come in.
  const auto bench_mixed = [&](const std::vector<int32_t>& contexts, const char* range,
                               const char* order) {
    const Result r = bench_decode(contexts, heads, prop.multiProcessorCount, stream, rng);
    fmt::print("  B {} contexts {} ({}, mean {}): {:.1f} us  {:.0f} GB/s  {:.1f}% of copy\n",
               r.batch, range, order, r.context, r.us, r.gbps, 100.0 * r.gbps / copy_gbps);
    std::fflush(stdout);
  };
  for (const char* order : {"random order", "ascending order", "descending order"}) {
    if (order[0] == 'a') std::sort(mixed.begin(), mixed.end());
    if (order[0] == 'd') std::sort(mixed.rbegin(), mixed.rend());
    bench_mixed(mixed, "100..2048", order);
  }
  // 128 sequences of about 1,000 keys, longest first (as the engine orders them).
  std::vector<int32_t> near_1000(128);
  std::uniform_int_distribution<int32_t> around(900, 1100);
  for (int32_t& c : near_1000) c = around(rng);
  std::sort(near_1000.rbegin(), near_1000.rend());
  bench_mixed(near_1000, "900..1100", "descending");

  fmt::print("\n| batch | context | time (us) | GB/s | % of copy |\n");
  fmt::print("| ---: | ---: | ---: | ---: | ---: |\n");
  for (const Result& r : results) {
    fmt::print("| {} | {} | {:.1f} | {:.0f} | {:.1f} |\n", r.batch, r.context, r.us, r.gbps,
               100.0 * r.gbps / copy_gbps);
  }
  return 0;
}

}  // namespace
}  // namespace nanovllm

//   usage: attention_bench [--splits | --power] [QUERY_HEADS KV_HEADS]   (default 16 8)
int main(int argc, char** argv) {
  const bool splits = argc > 1 && std::strcmp(argv[1], "--splits") == 0;
  const bool power = argc > 1 && std::strcmp(argv[1], "--power") == 0;
  if (splits || power) --argc, ++argv;
  nanovllm::Heads heads;
  if (argc == 3) {
    heads.query = std::atoi(argv[1]);
    heads.kv = std::atoi(argv[2]);
  }
  if (argc == 2 || argc > 3 || heads.kv < 1 || heads.query % heads.kv != 0 ||
      heads.query / heads.kv > 8) {
    std::fprintf(stderr,
                 "usage: attention_bench [--splits | --power] [QUERY_HEADS KV_HEADS] (a group of 1 "
                 "to 8)\n");
    return 2;
  }
  return nanovllm::bench::bench_main("attention_bench",
                                     [&](cudaStream_t stream, const cudaDeviceProp& prop) {
                                       if (splits)
                                         return nanovllm::sweep_splits(stream, prop, heads);
                                       if (power) return nanovllm::power_run(stream, prop, heads);
                                       return nanovllm::run(stream, prop, heads);
                                     });
}
