#include "engine/model_runner.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>

#include "core/check.h"
#include "core/logging.h"

namespace nanovllm {
namespace {

size_t available_host_memory() {
  const long pages = sysconf(_SC_AVPHYS_PAGES);
  const long page_size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page_size <= 0) return 0;
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

int blocks_per_sequence(int max_model_len, int block_size) {
  return (max_model_len + block_size - 1) / block_size;
}

BatchInputCapacity input_capacity(const EngineConfig& config, int max_model_len) {
  BatchInputCapacity capacity;
  // Prefill steps carry up to max_num_batched_tokens rows, decode steps one per sequence.
  capacity.max_tokens = std::max(config.max_num_batched_tokens, config.max_num_seqs);
  capacity.max_seqs = config.max_num_seqs;
  capacity.max_blocks_per_seq = blocks_per_sequence(max_model_len, config.kvcache_block_size);
  return capacity;
}

Buffer int32_buffer(int64_t count, Device device) {
  return Buffer(static_cast<size_t>(count) * sizeof(int32_t), device);
}

Tensor int32_view(const Buffer& buffer, std::initializer_list<int64_t> shape) {
  return buffer.as_tensor(DType::kI32, shape);
}

}  // namespace

ModelRunner::ModelRunner(const EngineConfig& config, Backend& backend, Qwen3Model& model)
    : backend_(backend),
      model_(model),
      host_inputs_(input_capacity(
          config, config.resolved_max_model_len(model.config().max_position_embeddings))) {
  config.validate();
  if (device_name(backend.device()) != config.device) {
    throw Error(fmt::format("engine config asks for device '{}' but the backend runs on '{}'",
                            config.device, device_name(backend.device())));
  }
  const ModelConfig& model_config = model.config();
  if (config.tensor_parallel_size != 1) {
    throw Error(fmt::format("tensor_parallel_size {} is not supported by this runner (only 1)",
                            config.tensor_parallel_size));
  }
  const AttentionDims dims = model.attention_dims();
  kv_shape_.num_layers = model_config.num_hidden_layers;
  kv_shape_.num_kv_heads = dims.num_kv_heads;
  kv_shape_.head_dim = dims.head_dim;
  kv_shape_.block_size = config.kvcache_block_size;
  kv_shape_.dtype = backend.compute_dtype();

  limits_.block_size = config.kvcache_block_size;
  limits_.vocab_size = model_config.vocab_size;
  limits_.max_model_len = config.resolved_max_model_len(model_config.max_position_embeddings);
  limits_.num_kvcache_blocks = choose_num_kvcache_blocks(config);
  allocate_kv_cache();

  const BatchInputCapacity capacity = input_capacity(config, limits_.max_model_len);
  const Device device = backend.device();
  input_ids_ = int32_buffer(capacity.max_tokens, device);
  positions_ = int32_buffer(capacity.max_tokens, device);
  slot_mapping_ = int32_buffer(capacity.max_tokens, device);
  cu_seqlens_q_ = int32_buffer(capacity.max_seqs + 1, device);
  context_lens_ = int32_buffer(capacity.max_seqs, device);
  block_tables_ =
      int32_buffer(static_cast<int64_t>(capacity.max_seqs) * capacity.max_blocks_per_seq, device);
  last_token_indices_ = int32_buffer(capacity.max_seqs, device);
  sample_rows_.reserve(capacity.max_seqs);
}

int ModelRunner::choose_num_kvcache_blocks(const EngineConfig& config) const {
  if (config.num_kvcache_blocks > 0) return config.num_kvcache_blocks;
  if (backend_.device() == Device::kCPU) {
    return cpu_num_kvcache_blocks(kv_shape_, kDefaultCpuKVCacheBytes, available_host_memory(),
                                  config.max_num_seqs, limits_.max_model_len);
  }
  // Sizing from free device memory (gpu_num_kvcache_blocks) needs the CUDA backend's memory
  // queries, which this build does not have.
  throw Error(
      "CUDA backend not built: cannot size the KV cache from free GPU memory; "
      "set num_kvcache_blocks explicitly");
}

void ModelRunner::allocate_kv_cache() {
  const int64_t blocks = limits_.num_kvcache_blocks;
  const int64_t per_tensor =
      blocks * kv_shape_.block_size * kv_shape_.num_kv_heads * kv_shape_.head_dim;
  const size_t tensor_bytes = static_cast<size_t>(per_tensor) * dtype_size(kv_shape_.dtype);
  kv_buffer_ = Buffer(tensor_bytes * 2 * kv_shape_.num_layers, backend_.device());
  auto* base = static_cast<unsigned char*>(kv_buffer_.data());
  kv_cache_.clear();
  for (int layer = 0; layer < kv_shape_.num_layers; ++layer) {
    unsigned char* k = base + tensor_bytes * (2 * layer);
    unsigned char* v = base + tensor_bytes * (2 * layer + 1);
    const std::initializer_list<int64_t> shape = {blocks, kv_shape_.block_size,
                                                  kv_shape_.num_kv_heads, kv_shape_.head_dim};
    kv_cache_.push_back({Tensor(k, kv_shape_.dtype, shape, backend_.device()),
                         Tensor(v, kv_shape_.dtype, shape, backend_.device())});
  }
  NVLLM_LOG_INFO("KV cache: {} blocks of {} tokens, {:.2f} GiB in {}", blocks, kv_shape_.block_size,
                 static_cast<double>(kv_buffer_.bytes()) / (1 << 30), dtype_name(kv_shape_.dtype));
}

void ModelRunner::upload_inputs() {
  const BatchInputs& in = host_inputs_;
  const int64_t tokens = in.num_tokens();
  const int64_t seqs = in.num_seqs();
  backend_.upload(int32_view(input_ids_, {tokens}), in.input_ids.data());
  backend_.upload(int32_view(positions_, {tokens}), in.positions.data());
  backend_.upload(int32_view(slot_mapping_, {tokens}), in.slot_mapping.data());
  backend_.upload(int32_view(cu_seqlens_q_, {seqs + 1}), in.cu_seqlens_q.data());
  backend_.upload(int32_view(context_lens_, {seqs}), in.context_lens.data());
  backend_.upload(int32_view(block_tables_, {seqs, in.block_table_width()}),
                  in.block_tables.data());
  backend_.upload(
      int32_view(last_token_indices_, {static_cast<int64_t>(in.last_token_indices.size())}),
      in.last_token_indices.data());
}

ForwardBatch ModelRunner::forward_batch() const {
  const BatchInputs& in = host_inputs_;
  const int64_t tokens = in.num_tokens();
  const int64_t seqs = in.num_seqs();
  ForwardBatch batch;
  batch.input_ids = int32_view(input_ids_, {tokens});
  batch.positions = int32_view(positions_, {tokens});
  batch.last_token_indices =
      int32_view(last_token_indices_, {static_cast<int64_t>(in.last_token_indices.size())});
  batch.attention.num_seqs = static_cast<int>(seqs);
  batch.attention.max_seqlen_q = in.max_seqlen_q();
  batch.attention.max_seqlen_k = in.max_seqlen_k();
  batch.attention.cu_seqlens_q = int32_view(cu_seqlens_q_, {seqs + 1});
  batch.attention.context_lens = int32_view(context_lens_, {seqs});
  batch.attention.block_tables = int32_view(block_tables_, {seqs, in.block_table_width()});
  batch.attention.slot_mapping = int32_view(slot_mapping_, {tokens});
  return batch;
}

void ModelRunner::execute(const ScheduledBatch& batch, std::vector<SampleResult>& samples_out) {
  samples_out.clear();
  host_inputs_.build(batch, limits_.block_size);
  upload_inputs();
  const Tensor logits = model_.forward(forward_batch(), kv_cache_);  // fp32 [rows, vocab]
  const int num_sampling = host_inputs_.num_sampling();
  if (num_sampling == 0) return;  // only prompt chunks: their K/V is all this step was for

  const int vocab = limits_.vocab_size;
  NVLLM_CHECK_MSG(logits.dtype() == DType::kF32, "logits are {}, expected f32",
                  dtype_name(logits.dtype()));
  NVLLM_CHECK_EQ(logits.size(0), static_cast<int64_t>(num_sampling));
  NVLLM_CHECK_EQ(logits.size(1), static_cast<int64_t>(vocab));
  const float* host_logits = nullptr;
  if (logits.device() == Device::kCPU) {
    host_logits = logits.data_as<const float>();
  } else {
    host_logits_.resize(static_cast<size_t>(num_sampling) * vocab);
    backend_.download(host_logits_.data(), logits);
    host_logits = host_logits_.data();
  }

  sample_rows_.clear();
  for (const ScheduledSequence& entry : batch.seqs) {
    if (entry.samples) sample_rows_.push_back({&entry.seq->params, &entry.seq->rng});
  }
  sampler_.sample_rows(host_logits, vocab, sample_rows_, samples_out);
}

}  // namespace nanovllm
