#include "engine/model_runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "core/logging.h"

namespace nanovllm {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

size_t available_host_memory() {
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

// The sample of a row whose sampled token is `token` (-1: every logit was NaN, and this request
// fails while the rest of the batch keeps its tokens).
SampleResult sampled(int32_t token) {
  SampleResult result;
  if (token < 0) {
    result.error = "sampler: every logit is NaN";
  } else {
    result.token_id = token;
  }
  return result;
}

int blocks_per_sequence(int max_model_len, int block_size) {
  return (max_model_len + block_size - 1) / block_size;
}

constexpr double kMiB = 1024.0 * 1024.0;

// nano-vllm's decode graph sizes: 1, 2, 4, 8, then every 16, up to 512; plus the largest
// batch itself when it is not one of them.
std::vector<int> graph_sizes(int max_num_seqs) {
  const int largest = std::min(max_num_seqs, 512);
  std::vector<int> sizes;
  for (int size : {1, 2, 4, 8}) {
    if (size <= largest) sizes.push_back(size);
  }
  for (int size = 16; size <= largest; size += 16) sizes.push_back(size);
  if (sizes.back() != largest) sizes.push_back(largest);
  return sizes;
}

}  // namespace

ModelRunner::ModelRunner(const EngineConfig& config, Backend& backend, CausalLM& model,
                         const std::function<int(int)>& agree_on_kv_blocks)
    : backend_(backend),
      model_(model),
      host_inputs_(step_capacity(
          config, config.resolved_max_model_len(model.config().max_position_embeddings))),
      step_inputs_(step_capacity(config, config.resolved_max_model_len(
                                             model.config().max_position_embeddings)),
                   backend) {
  config.validate();
  if (config.device != "auto" && device_name(backend.device()) != config.device) {
    throw Error(fmt::format("engine config asks for device '{}' but the backend runs on '{}'",
                            config.device, device_name(backend.device())));
  }
  const ModelConfig& model_config = model.config();
  const AttentionDims dims = model.attention_dims();
  backend.check_attention_support(dims, config.kvcache_block_size);
  kv_shape_.num_layers = model_config.num_hidden_layers;
  kv_shape_.num_kv_heads = dims.num_kv_heads;
  kv_shape_.head_dim = dims.head_dim;
  kv_shape_.block_size = config.kvcache_block_size;
  kv_shape_.dtype = backend.compute_dtype();

  limits_.block_size = config.kvcache_block_size;
  limits_.vocab_size = model_config.vocab_size;
  limits_.max_model_len = config.resolved_max_model_len(model_config.max_position_embeddings);

  const int max_seqs = config.max_num_seqs;
  sample_out_ = Buffer(
      static_cast<size_t>(max_seqs) * (3 + 2 * SamplingParams::kMaxLogprobs) * sizeof(int32_t),
      backend.device());
  for (size_t i = 0; i < host_tokens_.size(); ++i) {
    host_tokens_[i].resize(max_seqs);
    host_tokens_pins_[i] = HostPin(backend, host_tokens_[i].data(), max_seqs * sizeof(int32_t));
  }

  limits_.num_kvcache_blocks = choose_num_kvcache_blocks(config);
  if (agree_on_kv_blocks)
    limits_.num_kvcache_blocks = agree_on_kv_blocks(limits_.num_kvcache_blocks);
  kv_buffer_ = Buffer(kv_shape_.bytes_for_blocks(limits_.num_kvcache_blocks), backend.device());
  kv_cache_ = make_kv_views(kv_buffer_, limits_.num_kvcache_blocks);
  NVLLM_LOG_INFO("KV cache: {} blocks of {} tokens ({} tokens), {:.2f} GiB in {}",
                 limits_.num_kvcache_blocks, kv_shape_.block_size,
                 int64_t{limits_.num_kvcache_blocks} * kv_shape_.block_size,
                 static_cast<double>(kv_buffer_.bytes()) / (1 << 30), dtype_name(kv_shape_.dtype));

  if (!config.enforce_eager) capture_decode_graphs(config);
}

std::vector<LayerKVCache> ModelRunner::make_kv_views(const Buffer& buffer, int num_blocks) const {
  const int64_t blocks = num_blocks;
  const size_t tensor_bytes = static_cast<size_t>(blocks) * kv_shape_.block_size *
                              kv_shape_.num_kv_heads * kv_shape_.head_dim *
                              dtype_size(kv_shape_.dtype);
  NVLLM_CHECK_GE(buffer.bytes(), tensor_bytes * 2 * kv_shape_.num_layers);
  auto* base = static_cast<unsigned char*>(buffer.data());
  std::vector<LayerKVCache> views;
  for (int layer = 0; layer < kv_shape_.num_layers; ++layer) {
    unsigned char* k = base + tensor_bytes * (2 * layer);
    unsigned char* v = base + tensor_bytes * (2 * layer + 1);
    const std::initializer_list<int64_t> shape = {blocks, kv_shape_.block_size,
                                                  kv_shape_.num_kv_heads, kv_shape_.head_dim};
    views.push_back({Tensor(k, kv_shape_.dtype, shape, buffer.device()),
                     Tensor(v, kv_shape_.dtype, shape, buffer.device())});
  }
  return views;
}

int ModelRunner::choose_num_kvcache_blocks(const EngineConfig& config) {
  if (config.num_kvcache_blocks > 0) return config.num_kvcache_blocks;
  if (backend_.device() == Device::kCPU) {
    return cpu_num_kvcache_blocks(kv_shape_, kDefaultCpuKVCacheBytes, available_host_memory(),
                                  config.max_num_seqs, limits_.max_model_len);
  }
  return gpu_blocks_after_warmup(config);
}

// As nano-vllm: run the largest prefill a step can hold (max_num_batched_tokens as sequences of
// max_model_len) and sample it, so every activation buffer and scratch area reaches its peak
// size, then give the KV cache what gpu_memory_utilization leaves.
int ModelRunner::gpu_blocks_after_warmup(const EngineConfig& config) {
  const auto start = Clock::now();
  const int length = std::min(limits_.max_model_len, config.max_num_batched_tokens);
  const int num_seqs = std::clamp(config.max_num_batched_tokens / length, 1, config.max_num_seqs);
  const int seq_blocks = blocks_per_sequence(length, kv_shape_.block_size);

  backend_.reset_peak_memory();
  // A cache just large enough for the warm-up batch, released before sizing the real one.
  Buffer warmup_kv(kv_shape_.bytes_for_blocks(num_seqs * seq_blocks), backend_.device());
  std::vector<LayerKVCache> warmup_cache = make_kv_views(warmup_kv, num_seqs * seq_blocks);
  std::vector<std::unique_ptr<Sequence>> seqs;
  ScheduledBatch batch;
  batch.is_prefill = true;
  for (int i = 0; i < num_seqs; ++i) {
    seqs.push_back(
        std::make_unique<Sequence>(-1 - i, std::vector<int>(length, 0), SamplingParams{}, 0));
    for (int b = 0; b < seq_blocks; ++b) seqs.back()->block_table.push_back(i * seq_blocks + b);
    batch.seqs.push_back({seqs.back().get(), length, true});
  }
  host_inputs_.build(batch, kv_shape_.block_size);
  step_inputs_.build(host_inputs_);
  step_inputs_.upload();
  const Tensor logits = model_.forward(step_inputs_.forward_batch(), warmup_cache);
  backend_.sample(logits, step_inputs_.sampling(),
                  Tensor(sample_out_.data(), DType::kI32, {num_seqs}, backend_.device()));
  backend_.synchronize();
  const DeviceMemoryInfo peak = backend_.memory_info();
  warmup_kv = Buffer();
  const DeviceMemoryInfo now = backend_.memory_info();

  // Memory the forward pass held only while it ran, beyond what stays allocated (nano-vllm's
  // peak - current), leaving out the warm-up cache itself.
  const size_t warmup_kv_bytes = peak.allocated - now.allocated;
  const size_t held_at_peak = peak.peak_allocated - warmup_kv_bytes;
  const size_t activation_peak = held_at_peak > now.allocated ? held_at_peak - now.allocated : 0;
  const size_t used = now.total - now.free;
  const int blocks = gpu_num_kvcache_blocks(kv_shape_, now.total, used, activation_peak,
                                            config.gpu_memory_utilization);
  NVLLM_LOG_INFO(
      "warm-up forward ({} x {} tokens) in {:.2f} s: {:.0f} MiB in use, activation peak beyond "
      "that {:.0f} MiB, {:.0f} of {:.0f} MiB free",
      num_seqs, length, seconds_since(start), now.allocated / kMiB, activation_peak / kMiB,
      now.free / kMiB, now.total / kMiB);
  return blocks;
}

void ModelRunner::capture_decode_graphs(const EngineConfig& config) {
  if (!backend_.has_graphs()) return;
  if (model_.dumps_tensors()) {
    NVLLM_LOG_INFO("tensor dumps are on: decode runs without graphs");
    return;
  }
  const auto start = Clock::now();
  const int width = blocks_per_sequence(limits_.max_model_len, kv_shape_.block_size);
  std::vector<int> sizes = graph_sizes(config.max_num_seqs);
  // Every later step fits the buffers the graphs name.
  const BatchInputCapacity capacity = step_capacity(config, limits_.max_model_len);
  model_.reserve(capacity.max_tokens, capacity.max_seqs);
  // Largest first: its eager warm-up grows every buffer to the size all graphs then share.
  for (auto size = sizes.rbegin(); size != sizes.rend(); ++size) {
    step_inputs_.build_padding(*size, width, limits_.max_model_len);
    step_inputs_.upload();
    const ForwardBatch batch = step_inputs_.forward_batch();
    model_.forward(batch, kv_cache_);
    DecodeGraph entry;
    entry.batch_size = *size;
    entry.graph = backend_.capture([&] { entry.logits = model_.forward(batch, kv_cache_); });
    graphs_.push_back(std::move(entry));
  }
  backend_.synchronize();
  std::reverse(graphs_.begin(), graphs_.end());
  NVLLM_LOG_INFO("captured {} decode graphs (batch sizes 1 to {}) in {:.2f} s", graphs_.size(),
                 graphs_.back().batch_size, seconds_since(start));
}

std::vector<int> ModelRunner::graph_batch_sizes() const {
  std::vector<int> sizes;
  for (const DecodeGraph& entry : graphs_) sizes.push_back(entry.batch_size);
  return sizes;
}

const ModelRunner::DecodeGraph* ModelRunner::graph_for(const BatchInputs& step) const {
  if (step.is_prefill()) return nullptr;
  const int seqs = step.num_seqs();
  for (const DecodeGraph& entry : graphs_) {
    if (entry.batch_size >= seqs) return &entry;
  }
  return nullptr;
}

void ModelRunner::execute(const ScheduledBatch& batch, std::vector<SampleResult>& samples_out) {
  start(batch);
  finish(samples_out);
}

void ModelRunner::start(const ScheduledBatch& batch) {
  host_inputs_.build(batch, limits_.block_size);
  start(host_inputs_);
}

void ModelRunner::start(const BatchInputs& step) {
  NVLLM_CHECK_MSG(started_.size() < host_tokens_.size(), "{} steps are in flight already",
                  started_.size());
  const DecodeGraph* graph = graph_for(step);
  if (graph != nullptr) {
    step_inputs_.build(step, graph->batch_size,
                       blocks_per_sequence(limits_.max_model_len, limits_.block_size));
  } else {
    step_inputs_.build(step);
  }
  step_inputs_.upload();
  const ForwardBatch inputs = step_inputs_.forward_batch();
  if (!step.input_rows.empty()) {
    // The tokens the step before sampled, still in sample_out_, become this step's input.
    const int64_t fed = static_cast<int64_t>(step.input_rows.size());
    NVLLM_CHECK_GT(last_sampled_rows_, 0);
    backend_.gather_ids(
        Tensor(sample_out_.data(), DType::kI32, {last_sampled_rows_}, backend_.device()),
        step_inputs_.input_rows(),
        Tensor(inputs.input_ids.data(), DType::kI32, {fed}, backend_.device()));
  }
  Tensor logits;  // f32 [rows, vocab]
  if (graph != nullptr) {
    graph->graph->replay();
    logits = graph->logits;
  } else {
    logits = model_.forward(inputs, kv_cache_);
  }
  StartedStep started;
  started.rows = step.num_sampling();
  started.host_slot = static_cast<int>(steps_started_ % static_cast<int64_t>(host_tokens_.size()));
  // Only prompt chunks: their K/V was the point, and there is nothing to sample.
  if (started.rows > 0) sample(step, logits.slice_rows(0, started.rows), started);
  ++steps_started_;
  last_sampled_rows_ = started.rows;
  started_.push_back(std::move(started));
}

void ModelRunner::finish(std::vector<SampleResult>& samples_out) {
  NVLLM_CHECK_MSG(!started_.empty(), "no step in flight to finish");
  StartedStep step = std::move(started_.front());
  started_.pop_front();
  samples_out.clear();
  device_wait_seconds_ = step.device_wait_seconds;
  if (step.complete) {
    samples_out = std::move(step.samples);
    return;
  }
  if (step.rows == 0) return;
  const auto wait_start = Clock::now();
  backend_.wait_for(step.ticket);
  // The CPU backend computed everything in start(): no time was spent waiting.
  if (backend_.device() != Device::kCPU) device_wait_seconds_ = seconds_since(wait_start);
  const std::vector<int32_t>& tokens = host_tokens_[step.host_slot];
  for (int row = 0; row < step.rows; ++row) samples_out.push_back(sampled(tokens[row]));
}

void ModelRunner::sample(const BatchInputs& inputs, const Tensor& logits, StartedStep& step) {
  const int64_t rows = logits.size(0);
  constexpr int64_t kTop = SamplingParams::kMaxLogprobs;
  auto* base = static_cast<int32_t*>(sample_out_.data());
  const Device device = backend_.device();
  const int64_t capacity = static_cast<int64_t>(host_tokens_[0].size());
  const Tensor tokens(base, DType::kI32, {rows}, device);
  backend_.sample(logits, step_inputs_.sampling(), tokens);

  const int num_top = inputs.max_logprobs();  // -1: no row asks for logprobs
  int32_t* host_tokens = host_tokens_[step.host_slot].data();
  if (num_top < 0) {
    step.ticket = backend_.download_async(host_tokens, tokens);
    return;
  }

  // Logprobs: computed and downloaded now, so the step's samples are complete here.
  LogprobsTensors logprobs;
  logprobs.logprob = Tensor(base + capacity, DType::kF32, {rows}, device);
  logprobs.rank = Tensor(base + 2 * capacity, DType::kI32, {rows}, device);
  if (num_top > 0) {
    logprobs.top_ids = Tensor(base + 3 * capacity, DType::kI32, {rows, num_top}, device);
    logprobs.top_logprobs =
        Tensor(base + (3 + kTop) * capacity, DType::kF32, {rows, num_top}, device);
  }
  backend_.compute_logprobs(logits, tokens, num_top, logprobs);
  const auto wait_start = Clock::now();
  backend_.download(host_tokens, tokens);  // waits for the step's device work
  if (device != Device::kCPU) step.device_wait_seconds = seconds_since(wait_start);
  host_logprobs_.resize(rows);
  host_ranks_.resize(rows);
  host_top_ids_.resize(rows * num_top);
  host_top_logprobs_.resize(rows * num_top);
  backend_.download(host_logprobs_.data(), logprobs.logprob);
  backend_.download(host_ranks_.data(), logprobs.rank);
  if (num_top > 0) {
    backend_.download(host_top_ids_.data(), logprobs.top_ids);
    backend_.download(host_top_logprobs_.data(), logprobs.top_logprobs);
  }

  for (int64_t row = 0; row < rows; ++row) {
    SampleResult result = sampled(host_tokens[row]);
    const int wanted = inputs.sampling[row].logprobs;
    if (wanted >= 0 && result.error.empty()) {
      PositionLogprobs position;
      position.token_id = result.token_id;
      position.logprob = host_logprobs_[row];
      position.rank = host_ranks_[row];
      for (int i = 0; i < wanted; ++i) {
        position.top.push_back(
            {host_top_ids_[row * num_top + i], host_top_logprobs_[row * num_top + i]});
      }
      result.logprobs = std::move(position);
    }
    step.samples.push_back(std::move(result));
  }
  step.complete = true;
}

}  // namespace nanovllm
