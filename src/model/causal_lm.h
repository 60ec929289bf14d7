// What the engine side (the runner, the LLM, the server, the bindings) sees of a model: a
// causal language model that runs a batch over the paged KV cache and returns the logits of the
// rows asked for. Each architecture implements it in its own folder (model/<family>/) and is
// chosen from config.json through model_registry.h.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/backend.h"
#include "model/model_config.h"

namespace nanovllm {

// Which rank of a tensor-parallel group of `size` ranks a model (its weights, its forward) is.
struct TensorParallel {
  int rank = 0;
  int size = 1;
};

// One scheduled batch in device tensors (int32), prepared by the ModelRunner.
struct ForwardBatch {
  Tensor input_ids;           // [T]
  Tensor positions;           // [T]
  Tensor last_token_indices;  // [B] rows whose logits are computed
  AttentionMetadata attention;
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;

  // The checkpoint's config: layers, heads, KV heads, head_dim, vocabulary, max positions.
  virtual const ModelConfig& config() const = 0;

  // The paged KV cache this rank reads and writes: config().num_hidden_layers layers of
  // [blocks, block_size, num_kv_heads, head_dim] for K and for V, and the attention over it,
  // with this rank's share of the heads.
  virtual AttentionDims attention_dims() const = 0;

  // Whether forward() dumps its intermediates (NANOVLLM_DUMP_DIR), which copies to the host and
  // so cannot be captured in a graph.
  virtual bool dumps_tensors() const = 0;

  // Sizes the activation buffers for batches of up to `tokens` rows and `logit_rows` logit
  // rows, so later forwards allocate nothing (what a captured graph needs: a buffer that grew
  // after the capture would leave the graph naming freed memory).
  virtual void reserve(int64_t tokens, int64_t logit_rows) = 0;

  // Runs the batch, writing this step's K/V into kv_cache (one entry per layer), and returns
  // fp32 logits [B, vocab] on the backend's device, valid until the next forward.
  virtual Tensor forward(const ForwardBatch& batch, const std::vector<LayerKVCache>& kv_cache) = 0;
};

}  // namespace nanovllm
